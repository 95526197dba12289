"""Variant registry and workloads (kernels.models: variants, workloads, fused_mlp) on tiny models."""

import pytest

from tests.kernels._kernels_env import DEVICE, DTYPES, FULL, ON_GPU, rel_err, seed_of, torch

# isort: split
# kernels/ only after _kernels_env: it must set TRITON_INTERPRET before triton is imported
from kernels.models.variants import VARIANTS, VariantUnavailable, build  # noqa: E402
from kernels.models.workloads import GEGLUMLP, WORKLOADS, build_model, make_input, mlp_flops  # noqa: E402

F = torch.nn.functional
# torch.compile on the CPU needs a C++ toolchain and ~30 s per model: CI checks the compile variants on the GPU only.
CHECKED = [v for v in VARIANTS if ON_GPU or not v.startswith("compile")]
SIZES = [(1, 7, 40, 72), (2, 5, 48, 100)] + ([(64, 128, 768, 3072), (1, 1, 768, 3072)] if FULL else [])


def test_hf_geglu_module_is_the_posts_definition():
    m = GEGLUMLP(768, 3072)
    assert [n for n, _ in m.named_children()][:3] == ["gate_proj", "up_proj", "down_proj"]
    assert all(getattr(m, n).bias is None for n in ("gate_proj", "up_proj", "down_proj"))
    assert m.gate_proj.weight.shape == (3072, 768) and m.down_proj.weight.shape == (768, 3072)
    x = torch.randn(3, 768)
    ref = m.down_proj(F.gelu(m.gate_proj(x), approximate="tanh") * m.up_proj(x))
    torch.testing.assert_close(m(x), ref)
    assert mlp_flops("geglu", 8192, 768, 3072) == 3 * 2 * 8192 * 768 * 3072


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("dname", ["fp32", "bf16"] + (["fp16"] if FULL else []))
@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.slow  # the slow tier (README): a sweep or a heavy check, several seconds
def test_every_variant_computes_the_module(workload, dname, size):
    batch, seq, d, h = size
    model = build_model(workload, d, h, DTYPES[dname], DEVICE)
    x = make_input(batch, seq, d, DTYPES[dname], DEVICE)
    with torch.no_grad():
        ref = build_model(workload, d, h, torch.float64, DEVICE)(x.double())
        eager_err = rel_err(model(x), ref)
        for name in CHECKED:
            try:
                fn = build(name, model)
            except VariantUnavailable as exc:
                assert str(exc) and "\n" not in str(exc)
                continue
            y = fn(x)
            assert y.shape == (batch, seq, d), name
            err = rel_err(y, ref)
            assert err <= max(2 * eager_err, 1e-5), f"{name}: rel err {err:.2e} vs eager {eager_err:.2e}"


def test_unavailable_variants_say_why():
    plain = build_model("plain", 16, 32, torch.float32, DEVICE)
    with pytest.raises(VariantUnavailable, match="plain MLP"):
        build("liger", plain)
    with pytest.raises(VariantUnavailable, match="forward-only"):
        build("fuselens-gating", build_model("geglu", 16, 32, torch.float32, DEVICE), train=True)
    with pytest.raises(ValueError, match="unknown variant"):
        build("fastest", plain)
    with pytest.raises(ValueError, match="unknown workload"):
        build_model("moe", 16, 32, torch.float32, DEVICE)


@pytest.mark.parametrize("variant", ["fuselens", "fuselens-gating"])
def test_fuselens_variants_refuse_a_rocm_build(monkeypatch, variant):
    """On a ROCm torch, torch.cuda.is_available() is True, and our epilogues' inline PTX would fail to compile in
    the middle of a recording. The variant says why up front instead (the runner records it as skipped)."""
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    with pytest.raises(VariantUnavailable, match="ROCm build"):
        build(variant, build_model("geglu", 16, 32, torch.float32, DEVICE))
    assert build("eager", build_model("geglu", 16, 32, torch.float32, DEVICE)) is not None


@pytest.mark.parametrize(
    "workload, variant, op, dims",
    [
        ("geglu", "fuselens", "fuselens::dual_gemm_glu", [[130, 40], [72, 40], [72, 40], []]),
        ("plain", "fuselens", "fuselens::gemm_bias_act", [[130, 40], [72, 40], [72], []]),
        ("swiglu", "fuselens-gating", "fuselens::glu_gating", [[130, 72], [130, 72], []]),
    ],
)
def test_fuselens_kernels_show_in_traces_as_ops_with_shapes(workload, variant, op, dims):
    """The analyzer sizes a kernel from the CPU op around its launch: ours must be dispatcher ops with Input Dims."""
    from torch.profiler import ProfilerActivity, profile

    model = build_model(workload, 40, 72, torch.float32, DEVICE)
    x = make_input(1, 130, 40, torch.float32, DEVICE)
    from kernels.models import dispatch
    from kernels.models.fused_mlp import forced_forward

    fused = "dual_gemm" if workload == "geglu" else "gemm_act"
    # fuselens runs whichever path measured fastest (on a GPU, ATen can win at this tiny size): the op's dims are
    # checked on the fused path itself, and the trace label must name the path the variant chose
    fn = build(variant, model) if variant != "fuselens" else (lambda x: forced_forward(model, x, fused))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof, torch.no_grad():
        fn(x)
    recorded = [e.input_shapes for e in prof.events() if e.name == op]
    assert recorded == [dims]
    if variant == "fuselens":  # the trace names the dispatch path that ran (kernels.models.dispatch)
        fn = build(variant, model)
        with torch.no_grad():
            fn(x)  # the first call decides (a measurement on a GPU; the fused path on the CPU)
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                fn(x)
        chosen = (dispatch.decision_for(model, x) or {"path": fused})["path"]
        assert [e.name for e in prof.events() if e.name.startswith("fuselens::path=")] == [f"fuselens::path={chosen}"]


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("dname", ["fp32", "bf16"])
def test_every_dispatch_path_computes_the_module(workload, dname):
    """fuselens picks among its paths by speed only, so every path must compute the module's forward (odd shapes:
    77 tokens, d 40, h 72; 13 tokens, d 37 (rows not 16-byte aligned in any dtype: the pad_* paths pad), h 40; on the
    GPU also 1001 -> 3000)."""
    from kernels.models import dispatch

    shapes = [(77, 40, 72), (13, 37, 40)] + ([(77, 1001, 3000), (16, 4096, 1024)] if ON_GPU else [])
    for m, d, h in shapes:
        model = build_model(workload, d, h, DTYPES[dname], DEVICE)
        x = make_input(1, m, d, DTYPES[dname], DEVICE).reshape(m, d)
        with torch.no_grad():
            ref = build_model(workload, d, h, torch.float64, DEVICE)(x.double())
            eager_err = rel_err(model(x), ref)
            for path in dispatch.PATHS[dispatch.kind_of(model)]:
                err = rel_err(dispatch.run_path(path, model, x), ref)
                assert err <= max(2 * eager_err, 1e-5), (
                    f"{path} {m}x{d}->{h}: rel err {err:.2e} vs eager {eager_err:.2e}"
                )
        with pytest.raises(ValueError, match="does not apply"):
            dispatch.run_path("gating" if workload == "plain" else "gemm_act", model, x)


def test_dispatch_weight_copies_follow_the_weights():
    """cat_gating and pad_* run on weight copies (concatenated, padded), cached per weight: an in-place update of a
    weight (version counter) rebuilds them, and the copies of paths a probe did not choose are freed."""
    from kernels.models import dispatch

    model = build_model("swiglu", 37, 40, torch.float32, DEVICE)
    x = make_input(1, 13, 37, torch.float32, DEVICE).reshape(13, 37)
    with torch.no_grad():
        for path in ("cat_gating", "pad_dual_gemm", "pad_cat_gating"):
            dispatch.run_path(path, model, x)
            model.up_proj.weight.mul_(-0.5)  # in place: the next call must see it
            model.down_proj.weight.add_(0.25)
            assert rel_err(dispatch.run_path(path, model, x), model(x).double()) < 1e-5, path
        ids = {id(getattr(model, n).weight) for n in ("gate_proj", "up_proj", "down_proj")}
        assert {k[0] for k in dispatch._DERIVED if k[1] in ids} == {"cat", "pad_down", "pad_gate_up", "pad_cat"}
        dispatch._drop_unchosen(model, "pad_dual_gemm")
        assert {k[0] for k in dispatch._DERIVED if k[1] in ids} == {"pad_down", "pad_gate_up"}


def test_dispatch_key_buckets_tokens_and_names_everything_else():
    """One decision per (device, workload kind, activation, dtype, token bucket, d_model, hidden): a SwiGLU model
    never reuses a GEGLU decision of the same shape, nor fp16 a bf16 one."""
    from kernels.models import dispatch

    geglu = build_model("geglu", 40, 72, torch.float32, DEVICE)
    swiglu = build_model("swiglu", 40, 72, torch.float32, DEVICE)
    x = torch.zeros(77, 40, device=DEVICE)
    kg, ks = dispatch.decision_key(geglu, x), dispatch.decision_key(swiglu, x)
    assert kg != ks and kg[1:] == ("gated", "gelu_tanh", torch.float32, 128, 40, 72)
    assert dispatch.decision_key(geglu, torch.zeros(128, 40, device=DEVICE)) == kg  # same bucket
    assert dispatch.decision_key(geglu, torch.zeros(129, 40, device=DEVICE)) != kg
    assert dispatch.decision_key(geglu, torch.zeros(77, 40, device=DEVICE, dtype=torch.float16)) != kg


def test_bench_and_sweep_entry_points_reach_every_tuner():
    """kernels.bench's autotune_choices() runs after every timing, and a renamed tuner once crashed it there, at the
    end of a 4-minute GPU run. Without a GPU the caches are empty; the lookup itself must work. The sweep
    must name a config list for each TMA tuner it forces, and those lists must be the tuners' own."""
    from kernels.lab import forward_bench, sweep
    from kernels.ops import hopper_gemm

    choices = forward_bench.autotune_choices()
    tuners = {"gating", "gemm_act_pointer", "dual_gemm_pointer", "tma_dual", "tma_single", "tma_gated"}
    assert set(choices) == tuners | {"gated_triton_or_gluon"}
    assert hopper_gemm._single_tuned.configs == hopper_gemm.SINGLE_CONFIGS
    assert hopper_gemm._gated_tuned.configs == (
        hopper_gemm.GATED_CONFIGS + hopper_gemm.GATED_CONFIGS_FEW_ROWS + hopper_gemm.GATED_CONFIGS_LLM
    )
    if not ON_GPU:
        assert sweep.main([]) == 3  # no sm_90 GPU: a one-line error and exit code 3


def test_fuselens_ops_refuse_gradients_and_record_once():
    """The ops have no backward: with grad mode on and an input that requires grad they raise one clear error
    (PyTorch's fallback would otherwise run a backward with wrong gradients). Under no_grad each call is ONE
    `fuselens::` cpu_op with its input dims in a profiler trace (the Autograd kernel redispatches, not re-calls)."""
    from kernels.models import custom_ops as ops

    g = torch.randn(4, 8, device=DEVICE, requires_grad=True)
    u = torch.randn(4, 8, device=DEVICE)
    with pytest.raises(RuntimeError, match="inference-only"):
        ops.glu_gating(g, u, "gelu_tanh")
    with torch.profiler.profile(record_shapes=True) as prof, torch.no_grad():
        out = ops.glu_gating(g, u, "gelu_tanh")
    events = [e for e in prof.events() if e.name == "fuselens::glu_gating"]
    assert len(events) == 1 and events[0].input_shapes[:2] == [[4, 8], [4, 8]]
    ref = F.gelu(g.detach().double(), approximate="tanh") * u.double()
    assert rel_err(out, ref) < 1e-5


def test_fuselens_ops_under_torch_compile_and_fake_tensors():
    """The ops' Autograd kernels compute in the same Python call, and hand fake / functional tensors (torch.compile,
    FakeTensorMode) below autograd to the fake kernels: compiled with the aot_eager backend (fake tensors and
    functionalization, no C++ toolchain) each op is one graph node with the module's values, and an input that needs a
    gradient is refused there too (a compiled backward would otherwise skip the op's contribution)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from kernels.models import custom_ops as ops

    torch.manual_seed(0)
    x, w, w2, b = (torch.randn(s, device=DEVICE) for s in ((5, 24), (8, 24), (8, 24), (8,)))
    g, u = torch.randn(7, 9, device=DEVICE), torch.randn(7, 9, device=DEVICE)

    def f(x, w, w2, b, g, u):
        return ops.dual_gemm_glu(x, w, w2, "silu") + ops.gemm_bias_act(x, w, b, "gelu"), ops.glu_gating(g, u, "silu")

    xd, wd, w2d, bd = (t.double() for t in (x, w, w2, b))
    ref = (F.silu(xd @ wd.T) * (xd @ w2d.T) + F.gelu(xd @ wd.T + bd), F.silu(g.double()) * u.double())
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(f, backend="aot_eager", fullgraph=True)(x, w, w2, b, g, u)
    assert all(rel_err(a, r) < 1e-5 for a, r in zip(got, ref, strict=True))
    with FakeTensorMode() as mode, torch.no_grad():
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        out = ops.dual_gemm_glu(fx, fw, fw, "silu")
    assert isinstance(out, FakeTensor) and tuple(out.shape) == (5, 8)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="inference-only"):
        torch.compile(f, backend="aot_eager")(x, w.requires_grad_(), w2, b, g, u)


def test_fuselens_ops_enter_the_dispatcher_whenever_something_observes():
    """The wrappers skip the dispatcher only when nothing could see the op: a dispatch mode sees one fuselens op per
    call (and the values are the module's), the profiler records it (test above); unobserved, the same kernel runs
    directly (the same gradient refusal)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from kernels.models import custom_ops as ops

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    g, u = torch.randn(5, 9, device=DEVICE), torch.randn(5, 9, device=DEVICE)
    ref = F.silu(g.double()) * u.double()
    assert ops.unobserved()
    with torch.no_grad(), Seen() as seen:
        assert not ops.unobserved()
        out = ops.glu_gating(g, u, "silu")
    assert seen.ops.count("fuselens.glu_gating.default") == 1 and rel_err(out, ref) < 1e-5
    with torch.no_grad():
        assert rel_err(ops.glu_gating(g, u, "silu"), ref) < 1e-5
    with pytest.raises(RuntimeError, match="inference-only"):
        ops.glu_gating(g.requires_grad_(), u, "silu")


@pytest.mark.parametrize("dname", ["fp32", "fp16", "bf16"])
def test_fuselens_ops_compute_the_same_through_either_entry(dname, monkeypatch):
    """Each op through the dispatcher entry (what a profiled call takes) and without it (an unobserved call) gives the
    reference at odd shapes, every dtype; calls repeat so the op plans record and replay."""
    from kernels.models import custom_ops as ops

    dt = DTYPES[dname]
    torch.manual_seed(seed_of("entries", dname))
    x, wg, wu, b = (torch.randn(s, device=DEVICE, dtype=dt) for s in ((7, 40), (24, 40), (24, 40), (24,)))
    g, u = torch.randn(9, 33, device=DEVICE, dtype=dt), torch.randn(9, 33, device=DEVICE, dtype=dt)
    xd, wgd, wud, bd = (t.double() for t in (x, wg, wu, b))
    refs = (
        F.silu(xd @ wgd.T) * (xd @ wud.T),
        F.gelu(xd @ wgd.T + bd),
        F.gelu(g.double(), approximate="tanh") * u.double(),
    )
    tol = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.5e-2}[dname]
    for direct in (True, False):
        monkeypatch.setattr(ops, "OP_DIRECT", direct)
        with torch.no_grad():
            for _ in range(3):
                got = (
                    ops.dual_gemm_glu(x, wg, wu, "silu"),
                    ops.gemm_bias_act(x, wg, b, "gelu"),
                    ops.glu_gating(g, u, "gelu_tanh"),
                )
                assert all(rel_err(a, r) < tol for a, r in zip(got, refs, strict=True)), (dname, direct)


def test_bench_verdicts_on_the_committed_h100_results():
    """The committed run-10c bench (real H100 numbers) re-judged on the CPU: the HF targets are MET, and a gating
    'faster than' inside the pass-to-pass spread is a TIE, not a win or a miss (fp16 vs Inductor: 47.1 vs 47.2 us,
    spread 0.4); behind by more than the spread is MISSED (fp32 vs Inductor: 96.8 vs 96.2, spread 0.1)."""
    import json
    from pathlib import Path

    from kernels.lab import forward_bench

    res = json.loads((Path(__file__).parents[2] / "bench/results/kernels_h100_80gb_hbm3.json").read_text())
    verdicts = {text: ok for ok, text in forward_bench.targets(res)}

    def verdict(start):
        return next(ok for text, ok in verdicts.items() if text.startswith(start))

    assert verdict("HF GEGLU fuselens 163.7 us <= 1.15 x compute floor") is True
    assert verdict("gating gelu_tanh fp16: fuselens 47.1 us < inductor") == "tie"
    assert verdict("gating gelu_tanh fp32: fuselens 96.8 us < inductor") is False
    assert verdict("gating gelu_tanh bf16: fuselens 46.8 us < liger") is True
    rendered = forward_bench.to_markdown(res)
    assert "- TIE: gating gelu_tanh fp16" in rendered and "- MISSED: gating gelu_tanh fp32" in rendered


def test_shape_sweep_verdicts_and_merge():
    """The shape sweep's verdict (kernels/lab/shapes.py) against the fastest peer is three-way: a lead within the
    larger pass-to-pass spread is a TIE. Rows merge into an existing results file by id, other sections stay."""
    from kernels.lab import forward_bench, shapes

    def v(us, p0, p1):
        return {"us": us, "us_passes": [p0, p1], "spread_us": abs(p0 - p1)}

    row = {"id": "r", "what": "x", "workload": "geglu", "dtype": "bf16", "tokens": 77, "d_model": 1001}
    row |= {"hidden": 3000, "floor_us": 2.0, "floor_burst_us": 1.6}
    row["variants"] = {"eager": v(60.0, 59.0, 61.0), "compile": v(50.0, 49.9, 50.1), "liger": {"skipped": "no"}}
    row["variants"]["fuselens"] = v(50.3, 50.2, 50.4) | {"path": "aten", "rel_err": 1e-3}
    shapes.judge(row)
    assert (row["fastest_peer"], row["verdict"]) == ("compile", "LOSS")  # 0.3 us behind, spread 0.2
    row["variants"]["fuselens"] = v(50.1, 50.0, 50.2) | {"path": "aten"}
    shapes.judge(row)
    assert row["verdict"] == "TIE" and abs(row["x_floor"] - 25.05) < 1e-9 and abs(row["x_floor_burst"] - 31.3125) < 1e-9
    row["variants"]["fuselens"] = v(40.0, 40.0, 40.0) | {"path": "dual_gemm"}
    shapes.judge(row)
    assert row["verdict"] == "WIN" and row["x_compile"] == 0.8
    md = "\n".join(shapes.to_markdown([row], {"bf16": 790.0}))
    flop = 2 * 77 * 1001 * 3000 * 3  # the row's FLOPs: the duty and burst rates in the table are FLOPs / floor
    rates = f"| {flop / 2.0 / 1e6:.0f} / {flop / 1.6 / 1e6:.0f} |"
    assert "| **40.0** | dual_gemm | 0.80 | 0.80 (compile) | 20.00 | 25.00 " + rates in md and "| WIN |" in md
    old = {"gating": [1], "mlp": [2], "shapes": [{"id": "a"}, {"id": "r", "old": True}], "shape_ceilings_tflops": {}}
    new = {"shapes": [row], "shape_ceilings_tflops": {"bf16": 790.0}, "env": {"git_commit": "c"}, "created_utc": "t"}
    merged = forward_bench.merge_results(old, new)
    assert merged["gating"] == [1] and merged["mlp"] == [2]
    assert [r["id"] for r in merged["shapes"]] == ["a", "r"] and "old" not in merged["shapes"][1]
    assert merged["runs"][-1]["commit"] == "c"


def test_ceiling_is_timed_at_the_rows_duty_cycle():
    """The shape sweep's floor comes from the ceiling matmul timed as long back to back, and as long in all, as the
    row's forwards: a Llama-3-8B forward (3.9 ms, 51 calls, 25 between rests) against a 1.39 ms 8192³ matmul gets 70
    matmuls between rests and 143 in all; the HF forward (164 µs, 200 calls) 3 and 24; a tiny row at least 5."""
    from kernels.lab import shapes
    from kernels.ops.timing import QUEUE_CHUNK

    assert shapes.duty_matched(3900.0, 51, 1393.0) == (143, 70)
    assert shapes.duty_matched(164.0, 200, 1393.0) == (24, 3)
    assert shapes.duty_matched(30.0, 200, 1393.0) == (5, 1)
    for row_us, calls in ((3900.0, 51), (950.0, 200), (164.0, 200), (2500.0, 80)):
        n, chunk = shapes.duty_matched(row_us, calls, 1393.0)
        assert abs(chunk * 1393.0 - QUEUE_CHUNK * row_us) <= 1393.0 / 2  # as long between rests, within half a call
        assert abs(n * 1393.0 - calls * row_us) <= 1393.0 / 2  # as long in all


def test_merge_lists_only_runs_whose_figures_remain():
    """A bench file folded from several GPU commands lists the runs behind its figures: a run whose shape rows were all
    re-measured drops out; a run that measured another section (gating, mlp) stays; rows of unknown run keep all."""
    from kernels.lab import forward_bench

    def run(utc, sections, ids):
        res = {"created_utc": utc, "command": f"bench {utc}", "sections": sections, "env": {"git_commit": utc}}
        if ids:
            res |= {"shapes": [{"id": i, "run_utc": utc} for i in ids], "shape_ceilings_tflops": {}}
        return res

    full = run("t0", None, []) | {"gating": [1], "mlp": [2]}
    f = forward_bench.merge_results(full, run("t1", ["shapes"], ["a", "b"]))
    f = forward_bench.merge_results(f, run("t2", ["shapes"], ["b"]))
    assert [r["created_utc"] for r in f["runs"]] == ["t0", "t1", "t2"]
    f = forward_bench.merge_results(f, run("t3", ["shapes"], ["a"]))
    assert [r["created_utc"] for r in f["runs"]] == ["t0", "t2", "t3"]  # t1's rows are all re-measured
    assert {r["id"]: r["run_utc"] for r in f["shapes"]} == {"a": "t3", "b": "t2"}
    f = forward_bench.merge_results(f, run("t4", None, []) | {"gating": [3], "mlp": [4]})
    assert [r["created_utc"] for r in f["runs"]] == ["t2", "t3", "t4"]  # t0's sections were re-measured by t4
    legacy = {"created_utc": "u", "runs": [{"created_utc": "u0", "sections": ["shapes"]}, {"created_utc": "u"}]}
    legacy["shapes"] = [{"id": "a"}, {"id": "z"}]  # rows from before rows named their run
    f = forward_bench.merge_results(legacy, run("t5", ["shapes"], ["a"]))
    assert [r["created_utc"] for r in f["runs"]] == ["u0", "u", "t5"]


@pytest.mark.parametrize("gpu", ["h100_80gb_hbm3", "h200"])
def test_committed_shape_sweep_verdicts_recompute(gpu):
    """The committed shape sweeps (bench/results/kernels_<gpu>.json; the runs list names each run's commit) re-judged
    here: each row's verdict and fastest peer follow from its own timings, and no row is a LOSS on either card (each
    row's run_utc names its entry in the runs list). The two rows that once lost: fp32 HF SwiGLU runs
    cat_gating (H100 2507.9 vs compile 2510.8 us, H200 2466.3 vs liger 2469.4: thin wins), 77 x 1001 -> 3000 bf16 a
    padded path (H100 pad_dual_gemm 30.1 vs 62.2, H200 pad_cat_gating 28.9 vs 59.3)."""
    import copy
    import json
    from pathlib import Path

    from kernels.lab import shapes

    res = json.loads((Path(__file__).parents[2] / f"bench/results/kernels_{gpu}.json").read_text())
    rows = {r["id"]: r for r in res["shapes"]}
    assert {r[0] for r in shapes.SHAPE_SETS["llm-all"]} <= set(rows)
    for row in rows.values():
        again = copy.deepcopy(row)
        shapes.judge(again)
        assert (again["verdict"], again.get("fastest_peer")) == (row["verdict"], row.get("fastest_peer")), row["id"]
    assert [i for i, r in rows.items() if r["verdict"] == "LOSS"] == []
    assert rows["hf-swiglu-fp32"]["variants"]["fuselens"]["path"] == "cat_gating"
    assert rows["unaligned-bf16"]["variants"]["fuselens"]["path"].startswith("pad_")  # d_model 1001: padded to 1008
    shape_runs = {r["created_utc"] for r in res["runs"] if "shapes" in (r.get("sections") or ())}
    assert {r["run_utc"] for r in rows.values()} == shape_runs  # the runs listed for the sweep are the rows' runs
    assert rows["hf-geglu-bf16"]["variants"]["fuselens"]["path"] == "dual_gemm"


def test_readme_shape_sweep_claim_matches_the_committed_results():
    """The README says every shape-sweep row is a WIN on both Hopper cards: the committed results files hold all 16
    rows per card (8 issue rows, 8 other dtypes) with verdicts recomputed from their own timings."""
    import json
    from pathlib import Path

    from kernels.lab import shapes

    root = Path(__file__).parents[2]
    readme = " ".join((root / "README.md").read_text().split())
    assert "every row (HF, Llama-2-7B, Llama-3-8B, TinyLlama, BERT-large, odd, unaligned and decode shapes" in readme
    for gpu in ("h100_80gb_hbm3", "h200"):
        rows = json.loads((root / f"bench/results/kernels_{gpu}.json").read_text())["shapes"]
        # every LLM and dtype row on both cards; the plain HF MLP rows (--shapes hf-plain) where they were run
        ids = {r["id"] for r in rows}
        assert ids >= {r[0] for r in shapes.LLM_ROWS + shapes.DTYPE_ROWS}, gpu
        assert ids <= {r[0] for r in shapes.SHAPE_SETS["all"]}, gpu
        for r in rows:
            shapes.judge(r)
            assert r["verdict"] == "WIN", (gpu, r["id"], r["verdict"])


def test_training_step_flops_count_the_gemms_the_step_runs():
    """A gated MLP's step runs 9 GEMMs of 2·M·d·h FLOPs each (3 forward, dH, dW_down, dWg, dWu and dX's two) and 7
    without dX; the plain MLP's 6 and 5."""
    from kernels.models.workloads import train_step_flops

    unit = 2 * 4096 * 896 * 4864
    assert train_step_flops("swiglu", 4096, 896, 4864) == 9 * unit
    assert train_step_flops("geglu", 4096, 896, 4864, input_grad=False) == 7 * unit
    assert train_step_flops("plain", 4096, 896, 4864) == 6 * unit
    assert train_step_flops("plain", 4096, 896, 4864, input_grad=False) == 5 * unit


def test_training_bench_renders_its_results_files():
    """The committed training results (real H100 / H200 runs) render: one table line per row, with its dX column,
    and the floor cell 'duty / burst' (rows from before the duty floor: '– / burst')."""
    import json
    from pathlib import Path

    from kernels.lab import train_bench

    root = Path(__file__).resolve().parents[2] / "bench" / "results"
    for name in ("kernels_train_h100_80gb_hbm3.json", "kernels_train_h200.json"):
        res = json.loads((root / name).read_text())
        md = train_bench.to_markdown(res)
        for r in res["rows"]:
            line = next(ln for ln in md.splitlines() if ln.startswith(f"| {r['what']} | {r['dtype']} |"))
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert cells[3] == ("yes" if r["input_grad"] else "no")
            want = (
                f"{r['x_floor']:.3f} / {r['x_floor_burst']:.3f}" if "x_floor_burst" in r else f"– / {r['x_floor']:.3f}"
            )
            assert cells[9] == train_bench._floors(r) == want
            best_us = r["variants"][r["best_peer"]]["us"]
            assert cells[10] == train_bench.floor_over_best_peer(r) == f"{r['floor_us'] / best_us:.3f}"
    row = {"x_floor": 1.1234, "x_floor_burst": 1.2345}
    assert train_bench._floors(row) == "1.123 / 1.234" and train_bench._floors({}) == "–"
