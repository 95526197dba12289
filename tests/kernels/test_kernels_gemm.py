"""GEMM + bias + GELU epilogue (kernels.ops.gemm_act) and dual-GEMM GEGLU/SwiGLU (kernels.ops.dual_gemm), both the pointer
kernels and the persistent TMA kernels (kernels.ops.hopper_gemm), against eager and float64 at odd shapes."""

import pytest

from tests.kernels._kernels_env import DEVICE, DTYPES, FULL, ON_GPU, randn, rel_err, rel_err_ok, seed_of, torch

# isort: split
# kernels/ only after _kernels_env: it must set TRITON_INTERPRET before triton is imported
from kernels.lab import sweep_floor, sweep_kernels  # noqa: E402
from kernels.ops import hopper_gemm  # noqa: E402
from kernels.ops.activations import epilogue_act_id  # noqa: E402
from kernels.ops.dual_gemm import dual_gemm_gated  # noqa: E402
from kernels.ops.gemm_act import gemm_bias_act  # noqa: E402

F = torch.nn.functional
# (M, K, N): M in {1, 7, 127}, K and N not multiples of any block; (127, 72, 88) also fits TMA's 16-byte rows.
SHAPES = [(1, 45, 37), (7, 45, 37), (127, 72, 88), (130, 40, 200)]
if FULL:
    SHAPES += [(8192, 768, 3072), (8192, 3072, 768), (16, 768, 3072), (4099, 768, 3000)]
IMPLS = ["pointer", "tma"]


def _skip_if_no_tma(impl, x, *ws):
    if impl.startswith("tma") and not hopper_gemm.usable(x, *ws):
        pytest.skip("TMA path does not apply (fp32, M <= 64, unaligned rows, or not sm_90+)")


def _inputs(M, K, N, dname, seed, n_weights):
    dt = DTYPES[dname]
    x = randn(M, K, dtype=dt, seed=seed)
    # nn.Linear-like scale keeps activations O(1) so the activations' curved parts are exercised
    ws = [randn(N, K, dtype=dt, seed=seed + 1 + i) * (K**-0.5) * 2 for i in range(n_weights)]
    return x, ws


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dname, bias", [("fp32", True), ("fp16", True), ("bf16", True), ("bf16", False)])
@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_gemm_bias_gelu(impl, shape, dname, bias):
    M, K, N = shape
    x, (w,) = _inputs(M, K, N, dname, seed=seed_of(shape, dname, bias), n_weights=1)
    b = randn(N, dtype=x.dtype, seed=7) if bias else None
    _skip_if_no_tma(impl, x, w)
    out = gemm_bias_act(x, w, b, "gelu", impl=impl)
    assert out.shape == (M, N) and out.dtype == x.dtype
    ref = F.gelu(F.linear(x.double(), w.double(), None if b is None else b.double()))
    eager = F.gelu(F.linear(x, w, b))
    ours, err_eager = rel_err(out, ref), rel_err(eager, ref)
    assert rel_err_ok(ours, err_eager, dname), f"rel err {ours:.2e} (eager {err_eager:.2e})"


@pytest.mark.parametrize("impl", [*IMPLS, "tma2"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
# every dtype with GEGLU; SwiGLU's epilogue differs only in the activation, so two dtypes suffice for it in CI
@pytest.mark.parametrize(
    "dname, act",
    [("fp32", "gelu_tanh"), ("fp16", "gelu_tanh"), ("bf16", "gelu_tanh"), ("fp16", "silu"), ("bf16", "silu")]
    + ([("fp32", "silu")] if FULL else []),
)
@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_dual_gemm_gated(impl, shape, dname, act):
    M, K, N = shape
    x, (wg, wu) = _inputs(M, K, N, dname, seed=seed_of(shape, dname, act), n_weights=2)
    _skip_if_no_tma(impl, x, wg, wu)
    if impl == "tma2":  # the first persistent TMA kernel, kept for the sweep and the bench's before/after rows
        out = sweep_kernels.dual_gemm_2dot(x, wg, wu, epilogue_act_id(act, x.dtype))
    else:
        out = dual_gemm_gated(x, wg, wu, act, impl=impl)
    assert out.shape == (M, N) and out.dtype == x.dtype

    def mlp_h(x, wg, wu):
        g = F.linear(x, wg)
        return (F.gelu(g, approximate="tanh") if act == "gelu_tanh" else F.silu(g)) * F.linear(x, wu)

    ref = mlp_h(x.double(), wg.double(), wu.double())
    ours, err_eager = rel_err(out, ref), rel_err(mlp_h(x, wg, wu), ref)
    assert rel_err_ok(ours, err_eager, dname), f"rel err {ours:.2e} (eager {err_eager:.2e})"


@pytest.mark.skipif(ON_GPU, reason="interpreter switch; on the GPU the autotuner times the SUBTILE configs")
@pytest.mark.parametrize("dname", ["fp16", "bf16"])
def test_single_tma_split_store_epilogue(monkeypatch, dname):
    monkeypatch.setattr(hopper_gemm, "_INTERP_SUBTILE", True)
    x, (w,) = _inputs(130, 40, 200, dname, seed=seed_of("subtile", dname), n_weights=1)
    b = randn(200, dtype=x.dtype, seed=5)
    ref = F.gelu(F.linear(x.double(), w.double(), b.double()))
    ours, err_eager = rel_err(gemm_bias_act(x, w, b, "gelu", impl="tma"), ref), rel_err(F.gelu(F.linear(x, w, b)), ref)
    assert rel_err_ok(ours, err_eager, dname), f"rel err {ours:.2e} (eager {err_eager:.2e})"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", [(130, 200, 40), (127, 88, 72)], ids=str)
@pytest.mark.parametrize("dname", ["fp32", "fp16", "bf16"])
def test_down_projection_through_the_identity_epilogue(impl, shape, dname):
    """The dispatch path dual_gemm+gemm runs down_proj as gemm_bias_act(h, W_down, None, "identity"): plain
    h W_down^T, no bias, at odd shapes (M, K = hidden, N = d_model) in every dtype."""
    M, K, N = shape
    h, (wd,) = _inputs(M, K, N, dname, seed=seed_of("down", shape, dname), n_weights=1)
    _skip_if_no_tma(impl, h, wd)
    out = gemm_bias_act(h, wd, None, "identity", impl=impl)
    ref = F.linear(h.double(), wd.double())
    ours, err_eager = rel_err(out, ref), rel_err(F.linear(h, wd), ref)
    assert rel_err_ok(ours, err_eager, dname), f"rel err {ours:.2e} (eager {err_eager:.2e})"


@pytest.mark.skipif(
    ON_GPU, reason="interpreter switch; on the GPU check_configs and the floor sweep force TAIL configs"
)
@pytest.mark.parametrize("dname", ["fp16", "bf16"])
def test_gated_split_k_tail_matches_float64(monkeypatch, dname):
    """The kernel's split-K wave tail (TAIL) under the interpreter (4 programs, 32 x 32 tiles): M 130, K 72, N 192 =
    5 x 6 tiles, 28 in whole waves and 2 cut into 2 K ranges (3 K steps: 2 + 1), the partials added through the
    workspace. Twice: the kernel resets its flags, so a second call waits for its own partials."""
    monkeypatch.setattr(hopper_gemm, "_INTERP_GATED_META", {**hopper_gemm.INTERP_META, "TAIL": True})
    x, (wg, wu) = _inputs(130, 72, 192, dname, seed=seed_of("tail", dname), n_weights=2)
    assert hopper_gemm.tail_plan(-1, 130, 192, 72, 32, 32, 32, 4)[:2] == (28, 2)
    ref = F.silu(F.linear(x.double(), wg.double())) * F.linear(x.double(), wu.double())
    err_eager = rel_err(F.silu(F.linear(x, wg)) * F.linear(x, wu), ref)
    for _ in range(2):
        out = hopper_gemm.persistent_gated(x, wg, wu, epilogue_act_id("silu", x.dtype))
        ours = rel_err(out, ref)
        assert rel_err_ok(ours, err_eager, dname), f"rel err {ours:.2e} (eager {err_eager:.2e})"
    assert not hopper_gemm.tail_plan(-1, 130, 192, 72, 32, 32, 32, 4)[3].any()  # flags back to 0


def test_tail_plan_fills_the_last_wave():
    """132 SMs, 128 x 128 tiles: TinyLlama 704 tiles = 660 in whole waves + 44 x 3 parts (132 programs); Llama-3-8B
    7128 + 40 x 3; Llama-2-7B's 112 left-over tiles cannot be cut (132 // 112 = 1 part): no split."""
    plan = hopper_gemm.tail_plan
    main, parts, ws, flags = plan(-1, 2048, 5632, 2048, 128, 128, 64, 132)
    assert (main, parts, tuple(ws.shape), tuple(flags.shape)) == (660, 3, (44, 2, 128, 256), (44,))
    assert plan(-1, 8192, 14336, 4096, 128, 128, 64, 132)[:2] == (7128, 3)
    assert plan(-1, 4096, 11008, 4096, 128, 128, 64, 132)[:2] == (2752, 1)


def _tile_shapes(configs) -> list:
    """One config per (BM, BN) tile among `configs` (the interpreter ignores stages, warps and GROUP_M)."""
    out = {}
    for c in configs:
        out.setdefault((c.kwargs["BM"], c.kwargs["BN"]), c)
    return list(out.values())


@pytest.mark.skipif(ON_GPU, reason="interpreter switch; on the GPU check_configs forces every config")
@pytest.mark.parametrize(
    "cfg",
    _tile_shapes(
        hopper_gemm.GATED_CONFIGS
        + hopper_gemm.GATED_CONFIGS_FEW_ROWS
        + hopper_gemm.GATED_CONFIGS_LLM
        + sweep_floor.GATED_CANDIDATES
    ),
    ids=str,
)
def test_gated_tma_tiles_of_every_shape(monkeypatch, cfg):
    """The interleaved epilogue's reshape/split at each shipped tile shape (64- and 128-row, 64- and 128-column
    outputs), under the interpreter at an odd shape: M 130, K 72, N 200 (not multiples of any tile)."""
    monkeypatch.setattr(hopper_gemm, "_INTERP_GATED_META", dict(cfg.kwargs))
    x, (wg, wu) = _inputs(130, 72, 200, "fp16", seed=seed_of("tiles", str(cfg)), n_weights=2)
    out = dual_gemm_gated(x, wg, wu, "silu", impl="tma")
    ref = F.silu(F.linear(x.double(), wg.double())) * F.linear(x.double(), wu.double())
    eager = F.silu(F.linear(x, wg)) * F.linear(x, wu)
    ours, err_eager = rel_err(out, ref), rel_err(eager, ref)
    assert rel_err_ok(ours, err_eager, "fp16"), f"rel err {ours:.2e} (eager {err_eager:.2e})"


def test_interleaved_weight_cache_follows_in_place_updates():
    wg = randn(24, 16, dtype=torch.float16, seed=21)
    wu = randn(24, 16, dtype=torch.float16, seed=22)
    first = hopper_gemm.cached_interleaved(wg, wu)
    assert torch.equal(_gate_rows(first), wg) and torch.equal(_up_rows(first), wu)
    assert hopper_gemm.cached_interleaved(wg, wu) is first
    wu.mul_(2)  # in-place update: bumps the version counter, so the cache must rebuild
    again = hopper_gemm.cached_interleaved(wg, wu)
    assert again is not first and torch.equal(_up_rows(again), wu)
    assert torch.equal(hopper_gemm.cached_interleaved(wg, wu, rows=1)[1::2], wu)  # another layout: another copy


def _gate_rows(wgu, rows=hopper_gemm.GATE_UP_ROWS):
    return wgu.reshape(-1, 2, rows, wgu.shape[1])[:, 0].reshape(-1, wgu.shape[1])


def _up_rows(wgu, rows=hopper_gemm.GATE_UP_ROWS):
    return wgu.reshape(-1, 2, rows, wgu.shape[1])[:, 1].reshape(-1, wgu.shape[1])


def test_interleave_gate_up_layout():
    """Rows [16 m, 16 m + 8) of the interleaved weight are gate rows [8 m, 8 m + 8), the next 8 the same up rows:
    the layout the gated kernel's epilogue split assumes (a wrong split swaps gate and up, or columns)."""
    wg = torch.arange(24 * 2, dtype=torch.float32).reshape(24, 2)
    wu = -wg
    wgu = hopper_gemm.interleave_gate_up(wg, wu)
    assert torch.equal(wgu[0:8], wg[0:8]) and torch.equal(wgu[8:16], wu[0:8]) and torch.equal(wgu[16:24], wg[8:16])
    assert torch.equal(hopper_gemm.interleave_gate_up(wg, wu, rows=1)[1::2], wu)
    with pytest.raises(ValueError, match="multiple of 8"):
        hopper_gemm.interleave_gate_up(wg[:20], wu[:20])


def test_strided_x_goes_to_pointer_kernel():
    x = randn(100, 96, dtype=torch.float16, seed=11)[:, :72]  # row stride 96: pointer kernel handles any stride
    w = randn(40, 72, dtype=torch.float16, seed=12) * 0.1
    ref = F.gelu(F.linear(x.double(), w.double()))
    assert rel_err(gemm_bias_act(x, w, None, "gelu"), ref) < 2e-3


def _t(*shape):
    return torch.ones(*shape, device=DEVICE)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: gemm_bias_act(_t(4, 8), _t(3, 9), None), "does not match"),
        (lambda: gemm_bias_act(_t(4, 8), _t(3, 8), _t(4)), "bias must be"),
        (lambda: gemm_bias_act(_t(4, 8), _t(3, 8), None, "tanh"), "activation"),
        (lambda: dual_gemm_gated(_t(4, 8), _t(3, 8), _t(5, 8)), "must match"),
        (lambda: dual_gemm_gated(_t(4, 8), _t(3, 8), _t(3, 8), impl="cuda"), "impl"),
        (lambda: dual_gemm_gated(_t(8), _t(3, 8), _t(3, 8)), "2-D"),
    ],
)
def test_bad_input_one_line_error(call, match):
    with pytest.raises(ValueError, match=match) as exc:
        call()
    assert "\n" not in str(exc.value)


@pytest.mark.skipif(not ON_GPU, reason="CUDA tensors only")
def test_cpu_tensor_on_gpu_machine_is_refused():
    with pytest.raises(ValueError, match="CUDA tensors"):
        gemm_bias_act(torch.ones(4, 8), torch.ones(3, 8), None)


def test_interleaved_weight_cache_is_keyed_by_tensor_not_address():
    # On the H100 a test's fresh weights landed at the address of an earlier test's freed weights (the CUDA
    # caching allocator reuses blocks), the cache keyed on data_ptr + version returned the stale interleaved copy,
    # and the output was garbage (rel err 1.41). Same situation here, made deterministic with set_().
    owner = randn(24, 16, dtype=torch.float16, seed=31)
    wu = randn(24, 16, dtype=torch.float16, seed=32)

    def alias():
        return torch.empty(0, dtype=owner.dtype, device=owner.device).set_(
            owner.untyped_storage(), owner.storage_offset(), owner.shape, owner.stride()
        )

    wg = alias()
    hopper_gemm.cached_interleaved(wg, wu)
    del wg
    owner.copy_(randn(24, 16, dtype=torch.float16, seed=33))  # new contents at the same address
    wg_new = alias()
    assert torch.equal(_gate_rows(hopper_gemm.cached_interleaved(wg_new, wu)), owner)


def test_gelu_epilogue_matches_float64_erf_gelu():
    """The epilogue's GELU (kernels.ops.activations.gelu_erf_f32, an erfc fit instead of libdevice erf) against float64:
    x W^T with W = I in fp32 is x exactly, so the kernel's output is gelu(x) itself. Bound: 1e-5 relative on [-6, 10] (numpy model of the
    code: 4.7e-6 on [-6, -4], 2.2e-6 on [-4, -2], 9.5e-7 on [-2, 2]; eager's fp32 formula: 4.7e-4 on [-4, -2], 100%
    below -5); a wrong coefficient moves this by orders of magnitude."""
    x = torch.linspace(-6.0, 10.0, 64 * 127, device=DEVICE, dtype=torch.float32).reshape(127, 64)
    eye = torch.eye(64, device=DEVICE, dtype=torch.float32)
    out = gemm_bias_act(x, eye, None, "gelu", impl="pointer").double()
    xd = x.double()
    ref = 0.5 * xd * (1.0 + torch.erf(xd / 2**0.5))
    mask = ref.abs() > 1e-30
    rel = ((out - ref).abs() / ref.abs())[mask]
    assert float(rel.max()) < 1e-5, float(rel.max())
    eager = F.gelu(x).double()
    eager_rel = ((eager - ref).abs() / ref.abs())[mask & (xd > -2)]
    # where eager's formula is accurate (x > -2), ours is within a few fp32 ulps of it
    assert float(rel[(xd > -2)[mask]].max()) < max(4 * float(eager_rel.max()), 1e-6)


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu", "identity"])
def test_empty_k_gives_activation_of_bias(act):
    """K = 0: x W^T is all zeros, so every row is act(bias) (it was bias itself, the activation skipped)."""
    b = torch.linspace(-3, 3, 16, device=DEVICE, dtype=torch.float32)
    out = gemm_bias_act(torch.empty(5, 0, device=DEVICE), torch.empty(16, 0, device=DEVICE), b, act)
    want = {"gelu": F.gelu(b), "gelu_tanh": F.gelu(b, approximate="tanh"), "silu": F.silu(b), "identity": b}[act]
    assert torch.allclose(out, want.expand(5, 16), rtol=0, atol=1e-6)


@pytest.mark.skipif(ON_GPU, reason="the GPU test (test_kernels_gpu) counts the launcher's slow calls instead")
def test_every_wrapper_passes_arguments_the_launcher_can_cache():
    """On the GPU each kernel is launched from a cached launcher after its first call, which needs the wrapper to pass
    the kernel's runtime arguments first and exactly its constexprs after (kernels.ops.launch): checked here, under
    the interpreter, for every shipped kernel."""
    from kernels.ops import dual_gemm, gating, gemm_act
    from kernels.ops.gating import fused_gating

    x, (wg, wu) = _inputs(130, 72, 200, "bf16", seed=3, n_weights=2)
    b = randn(200, dtype=x.dtype, seed=4)
    dual_gemm_gated(x, wg, wu, "silu", impl="tma")
    dual_gemm_gated(x, wg, wu, "silu", impl="pointer")
    gemm_bias_act(x, wg, b, "gelu", impl="tma")
    gemm_bias_act(x, wg, b, "gelu", impl="pointer")
    fused_gating(F.linear(x, wg), F.linear(x, wu), "gelu_tanh")
    tuners = [hopper_gemm._gated_tuned, hopper_gemm._single_tuned, dual_gemm._dual_gemm_tuned]
    tuners += [gemm_act._gemm_act_tuned, gating._gating_kernel_tuned]
    assert {t.name: t.signature_ok for t in tuners} == {t.name: True for t in tuners}
