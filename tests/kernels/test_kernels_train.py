"""The FuseLens training ops (kernels.models.train_ops, kernels.ops.mlp_backward): gradients against float64 at odd
shapes in every dtype, through the fused dH kernel (TMA: Hopper, or the interpreter on the CPU) and its fallback;
autograd and torch.compile see the backward; the fuselens variant trains and names its path in a trace."""

import pytest

from tests.kernels._kernels_env import DEVICE, DTYPES, ON_GPU, REL_TOL, randn, rel_err, seed_of, torch

# isort: split
# kernels/ only after _kernels_env: it must set TRITON_INTERPRET before triton is imported
from kernels.models import train_ops  # noqa: E402
from kernels.models.dispatch import TRAIN_PATHS as _TRAIN_PATHS  # noqa: E402
from kernels.models.variants import VariantUnavailable, build  # noqa: E402
from kernels.models.workloads import GatedMLP, PlainMLP, build_model  # noqa: E402
from kernels.ops import mlp_backward  # noqa: E402

F = torch.nn.functional
TRAIN_PATHS = {p for paths in _TRAIN_PATHS.values() for p in paths}
# (tokens, d_model, hidden): odd token counts; the first has 16-byte rows in 2-byte dtypes, so the fused TMA kernel
# runs (on the GPU and under the interpreter), the second has odd widths, so the fallback epilogue runs
SHAPES = [(77, 40, 56), (77, 37, 53)] + ([(333, 1000, 2816)] if ON_GPU else [])


def _model(workload: str, d: int, h: int, seed: int):
    torch.manual_seed(seed)
    if workload == "plain":
        return PlainMLP(d, h)
    return GatedMLP(d, h, "gelu_tanh" if workload == "geglu" else "silu")


def _fused(model, x, forward="cublas", apart=None):
    if isinstance(model, PlainMLP):
        return train_ops.gelu_mlp(x, model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias)
    w = model.gate_proj.weight, model.up_proj.weight, model.down_proj.weight
    return train_ops.glu_mlp(x, *w, model.activation, forward, apart)


def _grads(model, fn, x, dy):
    for p in model.parameters():
        p.grad = None
    x = x.detach().requires_grad_()
    y = fn(model, x)
    y.backward(dy)
    return [y.detach(), x.grad, *(p.grad for p in model.parameters())]


def _dual_applies(dname, shape) -> bool:
    m, d, h = shape
    two_byte = dname != "fp32"
    return (
        two_byte and m > 64 and d % 8 == 0 and h % 8 == 0 and (not ON_GPU or torch.cuda.get_device_capability()[0] >= 9)
    )


CASES = [
    (w, dn, s, f, a)
    for w in ("geglu", "swiglu", "plain")
    for dn in ("fp32", "fp16", "bf16")
    for s in SHAPES
    for f in (("cublas", "dual") if w != "plain" and _dual_applies(dn, s) else ("cublas",))
    for a in ((False, True) if w != "plain" else (None,))
]


@pytest.mark.parametrize(("workload", "dname", "shape", "forward", "apart"), CASES)
def test_gradients_match_float64(workload, dname, shape, forward, apart):
    """y, dX and every weight (and bias) gradient of the training op against the module in float64 (same rounded
    weights, input and dY): within the dtype's tolerance and no worse than eager's own gradients in that dtype; with
    either forward of the gated op (cuBLAS + gating kernel, or the dual GEMM that keeps g and u) and g and u saved
    as one [g | u] or apart."""
    m, d, h = shape
    dt = DTYPES[dname]
    seed = seed_of(workload, dname, shape)
    model = _model(workload, d, h, seed).to(DEVICE, dt)
    x = randn(m, d, dtype=dt, seed=seed + 1)
    dy = randn(m, d, dtype=dt, seed=seed + 2)
    ref_model = _model(workload, d, h, seed).to(DEVICE, torch.float64)
    ref_model.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    ref = _grads(ref_model, lambda mod, t: mod(t), x.double(), dy.double())
    eager = _grads(model, lambda mod, t: mod(t), x, dy)
    ours = _grads(model, lambda mod, t: _fused(mod, t, forward, apart), x, dy)
    names = ["y", "dx", *(n for n, _ in model.named_parameters())]
    for name, o, e, r in zip(names, ours, eager, ref, strict=True):
        err, eager_err = rel_err(o, r), rel_err(e, r)
        # the interpreter rounds fp32 -> bf16 by truncation (tests/kernels/_kernels_env.py), doubling bf16 rounding errors
        slack = 3.0 if (dname == "bf16" and not ON_GPU) else 1.5
        assert err < REL_TOL[dname] and err <= slack * eager_err + 2e-6, f"{name}: {err:.2e} vs eager {eager_err:.2e}"
    aligned = dname != "fp32" and m > 64 and (d * dt.itemsize) % 16 == 0 and (h * dt.itemsize) % 16 == 0
    fused_ok = ON_GPU and torch.cuda.get_device_capability()[0] >= 9 or not ON_GPU
    ran = train_ops.EPILOGUE_RAN[(model.activation, dt, m, h)]
    assert ran == ("tma" if aligned and fused_ok else "torch")
    if ran == "tma" and not ON_GPU:  # the interpreter checks what the GPU's launcher cache needs of the arguments
        assert mlp_backward._dh_tuned.signature_ok
        if forward == "dual":
            assert mlp_backward._save_tuned.signature_ok


@pytest.mark.skipif(ON_GPU, reason="the GPU tunes PREFETCH like the tile shape; this runs it under the interpreter")
@pytest.mark.parametrize("workload", ["swiglu", "plain"])
def test_prefetching_epilogue_matches_float64(workload, monkeypatch):
    """The dH kernel with its saved-activation loads hoisted above the K loop (config PREFETCH) gives the same
    gradients (interpreter, bf16, odd token count)."""
    monkeypatch.setattr(mlp_backward, "_INTERP_PREFETCH", True)
    test_gradients_match_float64(workload, "bf16", (77, 40, 56), "cublas", False if workload != "plain" else None)


def test_a_dh_kernel_that_cannot_run_falls_back_and_says_so(monkeypatch):
    """Where the TMA kernel failed to tune (no config compiled on that GPU / Triton) the cuBLAS + torch epilogue runs
    instead, with the same gradients, and the op's record says why (the bench's "dH epilogue" column)."""
    m, d, h = 77, 40, 56
    dev = -1 if DEVICE == "cpu" else torch.cuda.current_device()
    saved_stride = h if train_ops.saves_apart(m, d, h) else 2 * h  # g's row stride: the layout the op saves in
    key = (dev, torch.float16, mlp_backward.GRAD_IDS["silu"], mlp_backward.m_bucket(m), h, d, saved_stride)
    monkeypatch.setitem(mlp_backward.FAILED, key, "RuntimeError: test")
    model = _model("swiglu", d, h, 11).to(DEVICE, torch.float16)
    x, dy = randn(m, d, dtype=torch.float16, seed=12), randn(m, d, dtype=torch.float16, seed=13)
    ref_model = _model("swiglu", d, h, 11).to(DEVICE, torch.float64)
    ref_model.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    ref = _grads(ref_model, lambda mod, t: mod(t), x.double(), dy.double())
    ours = _grads(model, _fused, x, dy)
    assert train_ops.EPILOGUE_RAN[("silu", torch.float16, m, h)] == "torch (TMA kernel failed: RuntimeError: test)"
    assert all(rel_err(o, r) < REL_TOL["fp16"] for o, r in zip(ours, ref, strict=True))


@pytest.mark.parametrize("activation", ["gelu_tanh", "silu", "gelu"])
def test_activation_derivatives_match_autograd(activation):
    """The fallback epilogue's act and act' (the same formulas as the Triton epilogue's) against autograd of the
    forward activations in float64, tails included."""
    from kernels.ops.activations import TORCH_ACTS, act_and_grad_torch

    g = torch.linspace(-12, 12, 4001, dtype=torch.float64, requires_grad=True)
    a, da = act_and_grad_torch(g.detach(), activation)
    ref = TORCH_ACTS[activation](g)
    (dref,) = torch.autograd.grad(ref.sum(), g)
    assert (a - ref.detach()).abs().max() < 1e-12
    assert (da - dref).abs().max() < 1e-9


@pytest.mark.parametrize("apart", [False, True])
def test_compiled_training_step_calls_the_ops(apart):
    """torch.compile (aot_eager: fake tensors, functionalization, AOTAutograd's joint graph; no C++ toolchain) traces
    the training op and its registered backward as graph nodes, with no graph break, and gives eager's gradients;
    with g and u saved as one [g | u] (backward op glu_mlp_backward) or apart (glu_dh_grad between cuBLAS GEMMs)."""
    model = _model("swiglu", 40, 56, 3).to(DEVICE)
    x = randn(77, 40, dtype=torch.float32, seed=4)
    dy = randn(77, 40, dtype=torch.float32, seed=5)

    def fused(mod, t):
        return _fused(mod, t, "cublas", apart)

    ref = _grads(model, fused, x, dy)
    seen = []

    def backend(gm, example_inputs):
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        def record(g, _inputs):
            seen.extend(f"{n.target} {n.args[:1]}" for n in g.graph.nodes if n.op == "call_function")
            return make_boxed_func(g)

        return aot_autograd(fw_compiler=record, bw_compiler=record)(gm, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(fused, backend=backend, fullgraph=True)
    got = _grads(model, compiled, x, dy)
    fwd, bwd = ("glu_mlp_train_apart", "glu_dh_grad") if apart else ("glu_mlp_train.", "glu_mlp_backward")
    assert any(fwd in s for s in seen) and any(bwd in s for s in seen), seen
    for o, r in zip(got, ref, strict=True):
        assert rel_err(o, r.double()) < 1e-6


@pytest.mark.parametrize("apart", [False, True])
def test_a_second_backward_is_refused(apart):
    """The backward overwrites the saved g and u with their gradients, so retain_graph + a second backward would be
    wrong: it raises instead."""
    model = _model("geglu", 40, 56, 6).to(DEVICE)
    x = randn(77, 40, dtype=torch.float32, seed=7)
    y = _fused(model, x, "cublas", apart)
    y.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="second backward"):
        y.sum().backward()


@pytest.mark.parametrize("workload", ["swiglu", "plain"])
def test_frozen_weights_get_no_gradient_and_no_gemm(workload):
    """A frozen MLP whose input still needs its gradient (LoRA on a base model): x's gradient is the module's, the
    frozen weights get none, and the backward runs none of their GEMMs (gated: dW_down, dWg, dWu, 3 of its 6 mm /
    addmm calls; plain: dW_down and db2, which the formula computes; the op still computes dW1 and db1)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    m, d, h = 77, 40, 56
    x = randn(m, d, dtype=torch.float32, seed=27)
    dy = randn(m, d, dtype=torch.float32, seed=28)

    class CountGemms(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += func.__name__.split(".")[0] in ("mm", "addmm", "addmm_")
            return func(*args, **(kwargs or {}))

    counts = {}
    for frozen in (False, True):
        model = _model(workload, d, h, 29).to(DEVICE)
        model.requires_grad_(not frozen)
        ref = _grads(model, lambda mod, t: mod(t), x, dy)[1]
        t = x.detach().requires_grad_()
        y = _fused(model, t)
        with CountGemms() as c:
            y.backward(dy)
        counts[frozen] = c.n
        assert torch.allclose(t.grad, ref, rtol=1e-5, atol=1e-6)
        assert all((p.grad is None) == frozen for p in model.parameters())
    assert counts[False] - counts[True] == (3 if workload == "swiglu" else 1), counts


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("apart", [False, True])
def test_activation_checkpointing_gives_the_same_gradients(apart, reentrant):
    """torch.utils.checkpoint around the training op (its forward recomputed in the backward): the gradients of x and
    of every weight are the ones without checkpointing, in either layout and either checkpoint mode."""
    from torch.utils.checkpoint import checkpoint

    model = _model("swiglu", 40, 56, 24).to(DEVICE)
    x = randn(77, 40, dtype=torch.float32, seed=25)
    dy = randn(77, 40, dtype=torch.float32, seed=26)
    plain = _grads(model, lambda mod, t: _fused(mod, t, "cublas", apart), x, dy)
    ckpt = _grads(
        model, lambda mod, t: checkpoint(lambda u: _fused(mod, u, "cublas", apart), t, use_reentrant=reentrant), x, dy
    )
    for o, r in zip(ckpt, plain, strict=True):
        assert torch.equal(o, r)


@pytest.mark.parametrize("workload", ["geglu", "plain"])
def test_fuselens_variant_trains_and_names_its_path(workload):
    """build('fuselens', train=True) trains (was refused as forward-only): grads equal the module's, and a profiled
    step holds the path range and the training ops with their input dims."""
    model = build_model(workload, 40, 56, torch.float32, DEVICE).train()
    x = randn(2, 9, 40, dtype=torch.float32, seed=8)
    fn = build("fuselens", model, train=True)
    ref = _grads(model, lambda mod, t: mod(t), x, torch.ones(2, 9, 40, device=DEVICE))
    with torch.profiler.profile(record_shapes=True) as prof:
        got = _grads(model, lambda mod, t: fn(t), x, torch.ones(2, 9, 40, device=DEVICE))
    for o, r in zip(got, ref, strict=True):
        assert rel_err(o, r.double()) < 1e-5
    names = [e.name for e in prof.events()]
    op = "glu" if workload == "geglu" else "gelu"
    assert {n for n in names if n.startswith("fuselens::path=")} <= {f"fuselens::path={p}" for p in TRAIN_PATHS}
    assert any(n.startswith("fuselens::path=") for n in names)
    if ON_GPU:
        return  # the GPU measures which path is faster; either is correct
    assert "fuselens::path=train_fused" in names
    # x [18, 40] -> 56 needs its gradient: dX + the [2h, d] weight gradients outweigh h, so g and u are saved apart
    apart = op == "glu" and train_ops.saves_apart(18, 40, 56)
    fwd_op, bwd_op = ("glu_mlp_train_apart", "glu_dh_grad") if apart else (f"{op}_mlp_train", f"{op}_mlp_backward")
    assert f"fuselens::{fwd_op}" in names and f"fuselens::{bwd_op}" in names
    fwd = next(e for e in prof.events() if e.name == f"fuselens::{fwd_op}")
    assert fwd.input_shapes[0] == [18, 40]


def test_fuselens_variant_trains_fp32_weights_under_autocast():
    """Mixed precision: fp32 weights, torch.autocast to bf16. The training ops take one dtype, so the fuselens path
    casts x and the weights as autocast does for F.linear; the fp32 weight gradients match eager's under the same
    autocast (both against float64) and the output is bf16 as eager's is."""
    dev = torch.device(DEVICE).type
    model = build_model("swiglu", 40, 56, torch.float32, DEVICE).train()
    x = randn(77, 40, dtype=torch.float32, seed=9)
    dy = randn(77, 40, dtype=torch.float32, seed=10)
    ref_model = build_model("swiglu", 40, 56, torch.float64, DEVICE)
    ref_model.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    ref = _grads(ref_model, lambda mod, t: mod(t), x.double(), dy.double())
    fn = build("fuselens", model, train=True)
    with torch.autocast(dev, dtype=torch.bfloat16):
        eager = _grads(model, lambda mod, t: mod(t), x, dy)
        train_ops.EPILOGUE_RAN.clear()
        ours = _grads(model, lambda mod, t: fn(t), x, dy)
    if not ON_GPU:  # the training op ran (in bf16), not the module (a GPU measures which path to take)
        assert ("silu", torch.bfloat16, 77, 56) in train_ops.EPILOGUE_RAN
    assert ours[0].dtype == eager[0].dtype == torch.bfloat16
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
    for o, e, r in zip(ours[2:], eager[2:], ref[2:], strict=True):
        err, eager_err = rel_err(o, r), rel_err(e, r)
        assert err < REL_TOL["bf16"] and err <= 3 * eager_err + 2e-6, (err, eager_err)


def test_forward_only_variants_still_say_so():
    with pytest.raises(VariantUnavailable, match="forward-only"):
        build("fuselens-gating", build_model("geglu", 16, 32, torch.float32, DEVICE), train=True)
    z = torch.zeros(2, 8), torch.zeros(4, 8), torch.zeros(4, 8), torch.zeros(8, 4)
    with pytest.raises(ValueError, match="activation must be"):
        torch.ops.fuselens.glu_mlp_train(*z, "gelu", "cublas")
    with pytest.raises(ValueError, match="needs the TMA dual GEMM"):
        torch.ops.fuselens.glu_mlp_train(*z, "silu", "dual")
    g = torch.zeros(2, 4)
    with pytest.raises(ValueError, match="activation must be"):
        torch.ops.fuselens.glu_dh_grad(z[0], z[3], g, g.clone(), "gelu")
    with pytest.raises(ValueError, match=r"g and u \[M, h\]"):
        torch.ops.fuselens.glu_dh_grad(z[0], z[3], g, torch.zeros(2, 3), "silu")


@pytest.mark.parametrize(("workload", "apart"), [("swiglu", False), ("swiglu", True), ("plain", None)])
def test_the_backward_fills_no_zero_gradients(workload, apart):
    """The saved [g | u] (g and u; pre) and h are outputs that take no gradient: the backward must not be handed
    zero-filled [M, 2h] / [M, h] gradients for them (an allocation and a memset of 1.5 x the activations per step)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    m, d, h = 77, 40, 56
    model = _model(workload, d, h, 14).to(DEVICE)
    x = randn(m, d, dtype=torch.float32, seed=15)
    y = _fused(model, x, "cublas", apart)
    filled = []

    class Fills(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.__name__.split(".")[0] in ("zeros", "zeros_like", "new_zeros", "fill_", "zero_"):
                shape = tuple(out.shape) if isinstance(out, torch.Tensor) else None
                if shape and shape[0] == m and shape[-1] in (h, 2 * h):
                    filled.append((func.__name__, shape))
            return out

    with Fills():
        y.backward(randn(m, d, dtype=torch.float32, seed=16))
    assert filled == []
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.skipif(not ON_GPU, reason="CUDA memory statistics")
@pytest.mark.parametrize("forward", ["cublas", "dual"])
def test_step_peak_memory_is_the_saved_activations_and_the_weight_gradients(forward):
    """A training step's peak allocation (above what was allocated before it) is the larger of the forward's
    (gu, h, y, and the dual GEMM's interleaved weight) and the backward's after h is released (gu, y, dW_down and
    the [2h, d] gate/up weight gradient): no [M, h] gradient of h, no zero-filled gradients, h not held to the end."""
    m, d, h = 1024, 512, 1536
    dt = torch.bfloat16
    model = _model("swiglu", d, h, 17).to(DEVICE, dt)
    x = randn(m, d, dtype=dt, seed=18)
    dy = randn(m, d, dtype=dt, seed=19)
    params = tuple(model.parameters())

    def step():
        _fused(model, x, forward).backward(dy)
        for p in params:
            p.grad = None

    step()  # tunes the kernels (scratch copies), off the measured step
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    e = dt.itemsize
    gu, hh, y, wd, wgu = 2 * m * h * e, m * h * e, m * d * e, d * h * e, 2 * h * d * e
    fwd = gu + hh + y + (wgu if forward == "dual" else 0)
    bwd = gu + y + wd + wgu
    assert peak <= max(fwd, bwd) + 2**20, (peak, fwd, bwd)


@pytest.mark.skipif(not ON_GPU, reason="CUDA memory statistics")
@pytest.mark.parametrize("forward", ["cublas", "dual"])
def test_saving_g_and_u_apart_lowers_the_peak_where_the_backward_ends_it(forward):
    """At Llama's proportions (d = M, h = 2.75 d: dX and the [2h, d] weight gradients outweigh h) the step's peak is
    the backward's end; saving g and u apart and freeing du before dWg allocates takes one [M, h] off it (joint
    measured beside apart), and the apart peak is within the live-tensor count of kernels.models.train_ops."""
    m, d, h = 1024, 1024, 2816
    assert train_ops.saves_apart(m, d, h) and not train_ops.saves_apart(8192, 768, 3072)
    dt = torch.bfloat16
    model = _model("swiglu", d, h, 21).to(DEVICE, dt)
    x = randn(m, d, dtype=dt, seed=22).requires_grad_()
    dy = randn(m, d, dtype=dt, seed=23)
    params = tuple(model.parameters())

    def step(apart):
        _fused(model, x, forward, apart).backward(dy)
        for p in (*params, x):
            p.grad = None

    peaks = {}
    for apart in (False, True):
        step(apart)  # tunes the kernels (scratch copies), off the measured step
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(apart)
        torch.cuda.synchronize()
        peaks[apart] = torch.cuda.max_memory_allocated() - base
    e = dt.itemsize
    mh, md, hd = m * h * e, m * d * e, h * d * e
    fwd = 3 * mh + md + (2 * hd if forward == "dual" else 0)  # g, u, h, y (and the interleaved weight)
    bwd = md + max(3 * mh + hd, 2 * mh + md + 2 * hd, mh + md + 3 * hd)  # y, then the module doc's count
    assert peaks[True] <= max(fwd, bwd) + 2**20, (peaks, fwd, bwd)
    # the joint layout peaks at its backward's end, min(Mh, hd) above the apart one; with the cuBLAS forward that
    # whole difference shows, with the dual GEMM the apart step peaks in its forward (the interleaved weight copy:
    # H100, 28.8 MB apart vs 33.0 joint)
    assert peaks[True] <= peaks[False] - (0.9 * min(mh, hd) if forward == "cublas" else 2**20), peaks


def _hopper_gluon() -> bool:
    from kernels.ops import ws_gemm

    return ON_GPU and torch.cuda.get_device_capability() == (9, 0) and ws_gemm.gluon is not None


def _dh_float64(dy, w_down, saved, activation):
    """The dH epilogue's result in float64 from the same rounded inputs: [dg | du] over a gated MLP's [g | u], dpre
    over the plain MLP's pre."""
    from kernels.ops.activations import act_and_grad_torch

    h = w_down.shape[1]
    dh = dy.double() @ w_down.double()
    act, dact = act_and_grad_torch(saved[:, :h].double(), activation)
    if activation in mlp_backward.GATED_GRADS:
        return torch.cat([dh * saved[:, h:].double() * dact, dh * act], dim=1)
    return dh * dact


def _first_call_operands(m, d, h, seed):
    """bf16 SwiGLU dH operands (dY, W_down, [g | u]) and their tuning key, with no kernel choice measured for it yet."""
    dt = torch.bfloat16
    dy = randn(m, d, dtype=dt, seed=seed)
    w_down = randn(d, h, dtype=dt, seed=seed + 1) * d**-0.5
    saved = randn(m, 2 * h, dtype=dt, seed=seed + 2)
    key = mlp_backward.dh_key(dy, w_down, saved, "silu")
    for cache in (mlp_backward.WS_CHOICE, mlp_backward.WS_TIMINGS, mlp_backward._dh_tuned.cache):
        cache.pop(key, None)
    return dy, w_down, saved, key


# (tokens, d_model, hidden): token counts off the 64-row tile; K (d_model) off the 64 K step in the first two, hidden
# off the 128-column tile in the second (16-byte rows still: TMA); and the HF shape
WS_SHAPES = [(1029, 1000, 2816), (4099, 776, 3000), (8192, 768, 3072)]


@pytest.mark.skipif(not _hopper_gluon(), reason="the warp-specialised Gluon kernels run on sm_90 only (no interpreter)")
@pytest.mark.parametrize("dname", ["fp16", "bf16"])
@pytest.mark.parametrize("activation", ["gelu_tanh", "silu", "gelu"])
@pytest.mark.parametrize("shape", WS_SHAPES)
def test_warp_specialised_dh_kernel_matches_float64(shape, activation, dname):
    """ws_dh.ws_dh_grad writes the activation backward of dY W_down over the saved g, u (pre for the plain MLP): each
    output against float64 from the same rounded inputs, within the dtype's tolerance and no worse than the Triton dH
    kernel's error on the same inputs."""
    from kernels.ops import ws_dh

    m, d, h = shape
    dt = DTYPES[dname]
    seed = seed_of("ws_dh", activation, dname, shape)
    gated = activation in mlp_backward.GATED_GRADS
    dy = randn(m, d, dtype=dt, seed=seed)
    w_down = randn(d, h, dtype=dt, seed=seed + 1) * d**-0.5
    saved = randn(m, 2 * h if gated else h, dtype=dt, seed=seed + 2)
    refs = _dh_float64(dy, w_down, saved, activation).split(h, dim=1)
    ours, triton_out = saved.clone(), saved.clone()
    halves = mlp_backward._halves(ours, w_down, activation)
    ws_dh.ws_dh_grad(dy, w_down, *halves, mlp_backward.GRAD_IDS[activation], gated)
    mlp_backward.fused_dh_grad(dy, w_down, triton_out, activation)
    for i, ref in enumerate(refs):
        cols = slice(i * h, (i + 1) * h)
        err, triton_err = rel_err(ours[:, cols], ref), rel_err(triton_out[:, cols], ref)
        assert err < REL_TOL[dname] and err <= 1.05 * triton_err + 1e-6, f"output {i}: {err:.2e} vs {triton_err:.2e}"


@pytest.mark.skipif(not _hopper_gluon(), reason="the warp-specialised Gluon kernels run on sm_90 only (no interpreter)")
@pytest.mark.parametrize("dname", ["fp16", "bf16"])
@pytest.mark.parametrize("activation", ["gelu_tanh", "silu"])
@pytest.mark.parametrize("shape", WS_SHAPES)
def test_warp_specialised_save_kernel_matches_float64(shape, activation, dname, monkeypatch):
    """ws_gemm.ws_gated_save: h = act(x Wg^T) * (x Wu^T) and the saved g, u, against float64, no worse than the Triton
    save kernel's."""
    from kernels.ops import hopper_gemm, ws_gemm
    from kernels.ops.activations import TORCH_ACTS, epilogue_act_id

    m, d, h = shape
    dt = DTYPES[dname]
    seed = seed_of("ws_save", activation, dname, shape)
    x = randn(m, d, dtype=dt, seed=seed)
    wg, wu = randn(h, d, dtype=dt, seed=seed + 1) * d**-0.5, randn(h, d, dtype=dt, seed=seed + 2) * d**-0.5
    g_ref, u_ref = x.double() @ wg.double().T, x.double() @ wu.double().T
    refs = [TORCH_ACTS[activation](g_ref) * u_ref, g_ref, u_ref]
    wgu = hopper_gemm.interleave_gate_up(wg, wu, hopper_gemm.GATE_UP_ROWS)
    out, gu = torch.empty(m, h, dtype=dt, device=DEVICE), torch.empty(m, 2 * h, dtype=dt, device=DEVICE)
    ws_gemm.ws_gated_save(x, wgu, epilogue_act_id(activation, dt), out, gu[:, :h], gu[:, h:])
    monkeypatch.setattr(mlp_backward, "_use_ws_save", lambda *a: False)  # the Triton save kernel, for comparison
    t_out, t_gu = mlp_backward.dual_gemm_save(x, wg, wu, activation)
    for name, o, t, r in zip(
        ("h", "g", "u"), (out, gu[:, :h], gu[:, h:]), (t_out, t_gu[:, :h], t_gu[:, h:]), refs, strict=True
    ):
        err, triton_err = rel_err(o, r), rel_err(t, r)
        assert err < REL_TOL[dname] and err <= 1.05 * triton_err + 1e-6, f"{name}: {err:.2e} vs {triton_err:.2e}"


@pytest.mark.skipif(not _hopper_gluon(), reason="the warp-specialised Gluon kernels run on sm_90 only (no interpreter)")
@pytest.mark.parametrize(("workload", "apart"), [("swiglu", False), ("swiglu", True), ("plain", None)])
def test_training_op_through_the_warp_specialised_kernels(workload, apart, monkeypatch):
    """With the Gluon kernels chosen (as a first-call measurement that finds them faster does), the training op's y,
    dX and weight gradients match float64 as the Triton path's do, and the op's record names the kernel ("ws"); with
    g and u saved as one [g | u] or apart."""
    from kernels.ops import ws_dh

    monkeypatch.setattr(mlp_backward, "_use_ws", lambda *a: ws_dh.CONFIGS[0])
    monkeypatch.setattr(mlp_backward, "_use_ws_save", lambda *a: True)
    m, d, h = 1029, 1000, 2816
    dt = torch.bfloat16
    model = _model(workload, d, h, 5).to(DEVICE, dt)
    x, dy = randn(m, d, dtype=dt, seed=6), randn(m, d, dtype=dt, seed=7)
    ref_model = _model(workload, d, h, 5).to(DEVICE, torch.float64)
    ref_model.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    ref = _grads(ref_model, lambda mod, t: mod(t), x.double(), dy.double())
    eager = _grads(model, lambda mod, t: mod(t), x, dy)
    ours = _grads(model, lambda mod, t: _fused(mod, t, "dual" if workload != "plain" else "cublas", apart), x, dy)
    for o, e, r in zip(ours, eager, ref, strict=True):
        assert rel_err(o, r) < REL_TOL["bf16"] and rel_err(o, r) <= 1.5 * rel_err(e, r) + 2e-6
    assert train_ops.EPILOGUE_RAN[(model.activation, dt, m, h)] == "ws"


@pytest.mark.skipif(not _hopper_gluon(), reason="the warp-specialised Gluon kernels run on sm_90 only (no interpreter)")
@pytest.mark.parametrize("apart", [False, True])
@pytest.mark.parametrize("d", [776, 128])
@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_every_warp_specialised_dh_config_matches_float64(activation, d, apart):
    """Each (rows, stages, group_m) the first-call measurement may pick (the 64-row ws_dh.CONFIGS and the 128-row
    ws_dh.WIDE_CONFIGS), gives the float64 result (bf16, a shape off the tile in every dimension; gated and plain),
    over the halves of one [g | u] and over g and u apart. K = 128 (two K steps per tile) lets a consumer's main loop
    finish before the other tile's g, u load lands: the shared epilogue buffer pair's hand-off must hold there."""
    from kernels.ops import ws_dh

    m, _, h = WS_SHAPES[1]
    gated = activation in mlp_backward.GATED_GRADS
    if apart and not gated:
        pytest.skip("the plain MLP saves one tensor")
    dt = torch.bfloat16
    dy = randn(m, d, dtype=dt, seed=31)
    w_down = randn(d, h, dtype=dt, seed=32) * d**-0.5
    saved = randn(m, 2 * h if gated else h, dtype=dt, seed=33)
    ref = _dh_float64(dy, w_down, saved, activation)
    for cfg in ws_dh.ALL_CONFIGS:
        if apart:
            halves = (saved[:, :h].clone(), saved[:, h:].clone())
        else:
            ours = saved.clone()
            halves = mlp_backward._halves(ours, w_down, activation)
        ws_dh.ws_dh_grad(dy, w_down, *halves, mlp_backward.GRAD_IDS[activation], gated, *cfg)
        got = torch.cat(halves, dim=1) if apart else ours
        assert rel_err(got, ref) < REL_TOL["bf16"], cfg


def test_the_128_row_dh_configs_share_an_epilogue_buffer_pair_only_where_two_do_not_fit():
    """ws_dh.epi_shared by hand (bf16, BN 128, BK 64): a ring stage is rows x 64 + 64 x 128 elements, a buffer pair
    2 x rows x 128; sm_90's opt-in limit is 232,448 bytes."""
    from kernels.ops import ws_dh

    assert ws_dh.BN == 128 and ws_dh.BK == 64
    # 64-row, 6 stages: 6 x 24,576 + 2 x 32,768 = 212,992: a pair each
    assert not ws_dh.epi_shared(64, 6)
    # 128-row, 3 stages: 3 x 32,768 + 2 x 65,536 = 229,376: a pair each, 3,072 bytes to spare
    assert not ws_dh.epi_shared(128, 3)
    # 128-row, 4 stages: 4 x 32,768 + 2 x 65,536 = 262,144: one shared pair (4 x 32,768 + 65,536 = 196,608)
    assert ws_dh.epi_shared(128, 4)
    assert all(ws_dh.epi_shared(r, s) for r, s, _ in ws_dh.WIDE_CONFIGS)
    assert not any(ws_dh.epi_shared(r, s) for r, s, _ in ws_dh.CONFIGS)


def test_a_candidate_whose_result_differs_is_told_apart_from_rounding():
    """mlp_backward.result_differs, the first-call measurement's check of each Gluon config against the Triton
    kernel: the Triton kernel (interpreter) and the cuBLAS + torch epilogue agree within it (bf16, another
    accumulation order), while one 64 x 128 tile left unwritten, or a NaN, is reported."""
    m, d, h = 333, 64, 256
    dt = torch.bfloat16
    dy = randn(m, d, dtype=dt, seed=51)
    w_down = randn(d, h, dtype=dt, seed=52) * d**-0.5
    saved = randn(m, 2 * h, dtype=dt, seed=53)
    triton_out, torch_out = saved.clone(), saved.clone()
    mlp_backward.fused_dh_grad(dy, w_down, triton_out, "silu")
    mlp_backward.torch_grad_epilogue(dy, w_down, torch_out, "silu")
    got, want = mlp_backward._halves(triton_out, w_down, "silu"), mlp_backward._halves(torch_out, w_down, "silu")
    assert not torch.equal(triton_out, torch_out)  # two implementations: not the same bits
    assert mlp_backward.result_differs(got, want) is None
    stale = triton_out.clone()
    stale[128:192, 128:256] = saved[128:192, 128:256]  # a tile whose epilogue never ran: the saved g left in it
    assert "output 0" in mlp_backward.result_differs(mlp_backward._halves(stale, w_down, "silu"), want)
    nan = triton_out.clone()
    nan[5, h + 3] = float("nan")
    assert "non-finite" in mlp_backward.result_differs(mlp_backward._halves(nan, w_down, "silu"), want)


@pytest.mark.skipif(not _hopper_gluon(), reason="the warp-specialised Gluon kernels run on sm_90 only (no interpreter)")
def test_the_first_call_measurement_leaves_out_a_config_whose_result_is_wrong(monkeypatch):
    """A Gluon config that computes something else (here one whose launches leave g as it was) is neither timed nor
    chosen: WS_FAILED says its result differs from the Triton kernel's, and the call's result is right."""
    from kernels.ops import ws_dh

    dy, w_down, saved, key = _first_call_operands(2053, 1000, 2816, seed=61)
    broken = ws_dh.CONFIGS[0]
    real = ws_dh.ws_dh_grad

    def sabotaged(dy_, w_, g, u, gid, gated, *cfg):
        kept = g.clone()
        real(dy_, w_, g, u, gid, gated, *cfg)
        if tuple(cfg) == broken:
            g.copy_(kept)

    monkeypatch.setattr(ws_dh, "ws_dh_grad", sabotaged)
    ref = _dh_float64(dy, w_down, saved, "silu")
    mlp_backward.dh_grad(dy, w_down, saved, "silu")
    assert mlp_backward.WS_FAILED[(key, broken)].startswith("its result differs from the Triton kernel's")
    assert str(broken) not in mlp_backward.WS_TIMINGS[key] and mlp_backward.WS_CHOICE[key] != broken
    assert rel_err(saved, ref) < REL_TOL["bf16"]


def test_the_two_layouts_of_one_shape_are_tuned_apart():
    """mlp_backward.dh_key: [g | u] and g, u apart at one shape (the joint layout runs where x needs no gradient, the
    apart one where it does) are measured once each, not one layout's choice reused for the other; the key's last
    element is g's row stride."""
    m, d, h = 300, 64, 96
    dy, w_down = randn(m, d, dtype=torch.bfloat16, seed=71), randn(d, h, dtype=torch.bfloat16, seed=72)
    gu = randn(m, 2 * h, dtype=torch.bfloat16, seed=73)
    joint = mlp_backward.dh_key(dy, w_down, gu, "silu")
    apart = mlp_backward.dh_key(dy, w_down, (gu[:, :h].clone(), gu[:, h:].clone()), "silu")
    assert joint != apart and joint[:-1] == apart[:-1]
    assert (joint[-1], apart[-1]) == (2 * h, h)
    assert (
        mlp_backward.dh_key(dy, w_down, randn(m, h, dtype=torch.bfloat16, seed=74), "gelu")[-1] == h
    )  # the plain MLP's pre


def test_dh_configs_by_reduction_depth():
    """Up to K = WS_MAX_K the measurement times the 64- and 128-row configs; above it only the 128-row ones (the
    64-row tiles measured 745-1127 us against Triton's 625 at Llama-2-7B, K = 4096, H100)."""
    from kernels.ops import ws_dh

    shallow, deep = mlp_backward.dh_configs(mlp_backward.WS_MAX_K), mlp_backward.dh_configs(mlp_backward.WS_MAX_K + 1)
    assert set(ws_dh.CONFIGS) <= set(shallow) and set(ws_dh.WIDE_CONFIGS) <= set(shallow)
    assert deep and {cfg[0] for cfg in deep} == {128}


@pytest.mark.skipif(not _hopper_gluon(), reason="the warp-specialised Gluon kernels run on sm_90 only (no interpreter)")
@pytest.mark.parametrize("d", [1000, 2056])
def test_the_first_call_measurement_keeps_saved_and_picks_a_kernel_that_is_right(d):
    """The dH kernel's first call per shape, as a user meets it: the measurement runs on a scratch copy (`saved` is
    bit-identical after it), records the tuned Triton kernel and the Gluon configs for that K (only 128-row tiles
    above WS_MAX_K), and the kernel it picks writes the float64 result."""
    dy, w_down, saved, key = _first_call_operands(2053, d, 2816, seed=41)
    before = saved.clone()
    mlp_backward.fused_dh_grad(dy, w_down, saved.clone(), "silu", scratch=True)  # tuned, as dh_grad does first
    mlp_backward._use_ws(key, dy, w_down, saved, "silu")
    assert torch.equal(saved, before)
    timings = mlp_backward.WS_TIMINGS[key]
    assert "triton" in timings and len(timings) >= 2, timings
    assert set(timings) - {"triton"} <= {str(cfg) for cfg in mlp_backward.dh_configs(d)}, timings
    ref = _dh_float64(dy, w_down, saved, "silu")
    ran = mlp_backward.dh_grad(dy, w_down, saved, "silu")
    assert ran == ("ws" if mlp_backward.WS_CHOICE[key] is not None else "tma")
    assert rel_err(saved, ref) < REL_TOL["bf16"]
