"""`analyzer.opportunities` on real recorded traces: the ranking, one hand-checked row per pattern, the predicted step
against the fused runs recorded beside each baseline, and the CLI as a user runs it.

Every expected figure below is worked by hand from the shapes in the trace (bf16 = 2 bytes); the durations are the
trace's own kernel medians, read from the plan's kernel list, never typed in."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache

import pytest

from analyzer.opportunities import takers as tk
from analyzer.opportunities.cli import load_plan
from tests.conftest import ROOT, SAMPLE_TRACES, TRACES, require_data

HF = SAMPLE_TRACES / "hf_geglu_bf16"
LAYER = SAMPLE_TRACES / "gemma_layer_bf16"
TRAIN = SAMPLE_TRACES / "geglu_train_bf16"
PLAIN = SAMPLE_TRACES / "plain_8192tok_bf16"
LLAMA_TRAIN = SAMPLE_TRACES / "h200_llama_model_train_bf16"  # 4-layer Llama, HF loss, AdamW foreach (H200)

pytestmark = pytest.mark.needs_data(HF / "manifest.json")

BF16_8192x3072 = 8192 * 3072 * 2  # 50,331,648 B: one [8192, 3072] bf16 tensor


@lru_cache(maxsize=8)
def plan(path) -> object:
    return load_plan(str(path))


def durs(o) -> list[float]:
    return [k["dur_us"] for k in o.kernels]


def row(p, pattern: str, nth: int = 0):
    return [o for o in p.opportunities if o.pattern == pattern][nth]


def test_layer_ranking_is_pinned():
    p = plan(LAYER / "eager.json.gz")
    assert [(o.pattern, o.shape) for o in p.opportunities] == [
        ("explicit attention (QKᵀ, mask, softmax, PV)", "[1, 8, 2048, 2048] fp32"),
        ("dual GEMM (gate + up GEMMs, gating)", "[2048, 16384] bf16"),
        ("RMSNorm", "[1, 2048, 2048] fp32"),
        ("residual add + RMSNorm", "[1, 2048, 2048] fp32"),
        ("RoPE", "[1, 8, 2048, 256] bf16"),
        ("GEGLU gating", "[1, 2048, 16384] bf16"),
        ("RoPE", "[1, 1, 2048, 256] bf16"),
        ("GEMM epilogue (add)", "[2048, 2048] bf16"),
    ]
    saved = [o.saved_us for o in p.opportunities]
    assert saved == sorted(saved, reverse=True)
    # the gating is inside the dual GEMM: listed as its alternative, never both in the plan
    assert row(p, "GEGLU gating").alternative_to == row(p, "dual GEMM (gate + up GEMMs, gating)").id
    assert row(p, "explicit attention (QKᵀ, mask, softmax, PV)").takers == [tk.SDPA]


def test_attention_row_by_hand():
    o = row(plan(LAYER / "eager.json.gz"), "explicit attention (QKᵀ, mask, softmax, PV)")
    assert [k["op"] for k in o.kernels] == [
        "aten::bmm", "aten::mul", "aten::add", "aten::copy_", "aten::_softmax", "aten::copy_", "aten::bmm",
        "aten::copy_",
    ]  # fmt: skip
    scores = 8 * 2048 * 2048  # B·H·S_q·S_k
    # QKᵀ out, scaled, masked, fp32 copy, softmax (fp32), bf16 copy: each written once and read once; PV out [8,2048,256]
    assert o.bytes_avoided == 2 * (4 * scores * 2 + 2 * scores * 4 + 8 * 2048 * 256 * 2) == 1_090_519_040
    # flash kernel = the QKᵀ and PV FLOPs (2 × 2·8·2048·2048·256) at these two GEMMs' own rate = their time
    d = durs(o)
    assert o.fused_us == pytest.approx(d[0] + d[6])
    assert o.saved_us == pytest.approx(sum(d) - d[0] - d[6])
    assert any("34.36 GFLOP" in line for line in o.arithmetic)
    assert any("causal is not recorded" in line for line in o.arithmetic)


def test_dual_gemm_and_gating_rows_by_hand():
    p = plan(HF / "eager.json.gz")
    assert [o.pattern for o in p.opportunities] == ["dual GEMM (gate + up GEMMs, gating)", "GEGLU gating"]
    assert p.roofs.gbps == 3026.8 and "manifest ceilings" in p.roofs.gbps_source  # the runner's measured copy roof
    dual, gating = p.opportunities
    # gate out → gelu, gelu out → mul, up out → mul: 3 × (write + read) of one [8192, 3072] bf16 tensor
    assert dual.bytes_avoided == 3 * 2 * BF16_8192x3072 == 301_989_888
    g1, gelu, g2, mul = durs(dual)
    assert dual.fused_us == pytest.approx(g1 + g2)  # 2 × 38,654,705,664 FLOP at the two GEMMs' own rate
    assert dual.saved_us == pytest.approx(gelu + mul)
    assert any("77.31 GFLOP" in line for line in dual.arithmetic)
    assert dual.takers == [tk.FL_DUAL]
    assert any("165.9 µs" in n and "kernels_h100_80gb_hbm3.json" in n for n in dual.taker_notes)  # bench/results
    # gating: gelu (read + write 100,663,296) + mul (2 reads + write 150,994,944); gelu's output round trip avoided
    assert gating.bytes == 2 * BF16_8192x3072 + 3 * BF16_8192x3072
    assert gating.bytes_avoided == 2 * BF16_8192x3072
    assert gating.fused_bytes == 3 * BF16_8192x3072 == 150_994_944
    assert gating.fused_us == pytest.approx(150_994_944 / 3026.8e3)  # 49.886 µs at 3,026.8 GB/s
    assert gating.saved_us == pytest.approx(gelu + mul - 150_994_944 / 3026.8e3)
    assert gating.takers == [tk.COMPILE, tk.LIGER, tk.FL_GATING] and gating.alternative_to == dual.id
    j = p.to_json()
    assert j["plan"] == [dual.id]
    assert j["predicted_gpu_busy_us_per_step"] == pytest.approx(j["gpu_busy_us_per_step"] - dual.saved_us)
    assert j["predicted_gpu_busy_us_per_step_by_taker"][tk.COMPILE] == pytest.approx(
        j["gpu_busy_us_per_step"] - gating.saved_us
    )


def _layer_roof(p) -> float:
    """The layer trace has no measured roof: its best memory-bound kernel is the gated product, [1,2048,16384] bf16 ×
    3 = 201,326,592 B."""
    gating = row(p, "GEGLU gating")
    t_mul = gating.kernels[1]["dur_us"]
    assert gating.kernels[1]["bytes"] == 201_326_592
    return 201_326_592 / t_mul / 1e3


def test_rmsnorm_and_residual_rows_by_hand():
    p = plan(LAYER / "eager.json.gz")
    assert p.roofs.gbps == pytest.approx(_layer_roof(p))
    norm = row(p, "RMSNorm")
    x32 = 2048 * 2048 * 4  # [1, 2048, 2048] fp32: 16,777,216 B
    # x.float() read twice (pow, mul), pow out once (mean), x·rsqrt once, ·(1+w) once → 9 × x32 moved inside;
    # mean, +eps, rsqrt ([1, 2048, 1] fp32) and the weight's copy and 1+w ([2048] fp32): 8,192 B × 2 each
    assert norm.bytes_avoided == 9 * x32 + 5 * 2 * 8192 == 151_076_864
    assert norm.fused_bytes == norm.bytes - norm.bytes_avoided
    assert norm.fused_us == pytest.approx(norm.fused_bytes / p.roofs.gbps / 1e3)
    res = row(p, "residual add + RMSNorm")
    # the residual sum [1, 2048, 2048] bf16 stays written (the stream goes on); its read by x.float() is avoided
    assert res.bytes_avoided == norm.bytes_avoided + 2048 * 2048 * 2 == 159_465_472
    assert res.takers == [tk.COMPILE, tk.LIGER]


def test_rope_row_by_hand():
    p = plan(LAYER / "eager.json.gz")
    q = row(p, "RoPE")
    assert [k["op"] for k in q.kernels] == ["aten::mul", "aten::neg", "aten::cat", "aten::mul", "aten::add"]
    t = 8 * 2048 * 256 * 2  # q [1, 8, 2048, 256] bf16: 8,388,608 B
    # q·cos (read by add), −q₂ (half: read by cat), cat (read by ·sin), cat·sin (read by add): write + read each
    assert q.bytes_avoided == 2 * (t + t // 2 + t + t) == 58_720_256
    assert q.fused_us == pytest.approx((q.bytes - q.bytes_avoided) / p.roofs.gbps / 1e3)


def test_epilogue_row_by_hand():
    p = plan(PLAIN / "eager.json.gz")
    (o,) = p.opportunities
    assert o.pattern == "GEMM epilogue (gelu)" and o.takers == [tk.FL_ACT, tk.AUTOTUNE]
    t_gemm, t_gelu = durs(o)
    # GELU reads the addmm output and writes its own: 2 × 50,331,648 B; in the GEMM's epilogue neither happens and
    # no other tensor is read, so the fused GEMM costs what the GEMM costs
    assert o.bytes_avoided == 2 * BF16_8192x3072
    assert o.fused_us == pytest.approx(t_gemm) and o.saved_us == pytest.approx(t_gelu)


def test_fuselens_gemm_taker_saves_what_the_bench_measured_at_that_problem():
    """The HF GEGLU eager trace (H100, 8192 × 768 → 3072 bf16): the dual GEMM taker saves the forward bench's eager
    − FuseLens at exactly that problem, read here from the bench file itself; the all-tools plan keeps the ideal."""
    p = plan(HF / "eager.json.gz")
    (o,) = [o for o in p.instances if tk.FL_DUAL in o.takers]
    bench = json.loads((ROOT / "bench" / "results" / "kernels_h100_80gb_hbm3.json").read_text())
    (r,) = [r for r in bench["shapes"] if r["id"] == "hf-geglu-bf16"]
    saving = r["variants"]["eager"]["us"] - r["variants"]["fuselens"]["us"]
    assert o.saved_us_by_taker == {tk.FL_DUAL: pytest.approx(saving)}
    assert o.saving_us({tk.FL_DUAL}) == pytest.approx(saving) and o.saving_us(None) == o.saved_us
    assert any("measured at this problem" in line and f"{saving:,.1f} µs saved" in line for line in o.arithmetic)
    only_dual = p.predicted_busy_us({tk.FL_DUAL})
    assert only_dual == pytest.approx(p.gpu_busy_us - saving)


def test_plain_mlp_quotes_only_a_plain_bench_row():
    """GEMM+act stands for the plain MLP: at 8192 × 768 → 3072 the bench's HF GEGLU row (same M, K, N, dtype) is a
    different MLP and is never quoted for it."""
    p = plan(PLAIN / "eager.json.gz")
    (o,) = p.opportunities
    (note,) = [n for n in o.taker_notes if n.startswith(tk.FL_ACT)]
    assert "geglu" not in note.lower() and "plain MLP" in note


def test_training_rows_by_hand():
    p = plan(TRAIN / "eager.json.gz")
    assert p.training
    assert [o.pattern for o in p.opportunities] == [
        "pointwise chain (forward + backward)",
        "dual GEMM (gate + up GEMMs, gating)",
        "gated activation backward",
        "GEGLU gating",
    ]
    bwd = row(p, "gated activation backward")
    assert [k["op"] for k in bwd.kernels] == ["aten::mul", "aten::mul", "aten::gelu_backward"]
    # grad·up → gelu_backward: one [8192, 3072] bf16 gradient written and read back; the other reads stay
    assert bwd.bytes == 3 * 3 * BF16_8192x3072 and bwd.bytes_avoided == 2 * BF16_8192x3072
    assert bwd.fused_us == pytest.approx(7 * BF16_8192x3072 / p.roofs.gbps / 1e3)
    assert bwd.takers == [tk.COMPILE, tk.LIGER]
    dual = row(p, "dual GEMM (gate + up GEMMs, gating)")
    assert dual.takers == [tk.FL_DUAL]  # the dual GEMM trains (fuselens::glu_mlp_train)
    assert dual.saved_us_by_taker == {}  # the forward bench measured inference: a training step keeps the ideal
    # the MSE loss and its gradient: fp32 copies of the [8192, 768] output
    loss = row(p, "pointwise chain (forward + backward)")
    assert [k["op"] for k in loss.kernels] == [
        "aten::copy_", "aten::pow", "aten::mean", "aten::div", "aten::mul", "aten::mul", "aten::copy_",
    ]  # fmt: skip
    assert loss.fused_bytes == loss.bytes - loss.bytes_avoided
    assert p.to_json()["predicted_gpu_busy_us_per_step_by_taker"] == pytest.approx(
        {
            tk.COMPILE: p.gpu_busy_us - loss.saved_us - row(p, "GEGLU gating").saved_us - bwd.saved_us,
            tk.LIGER: p.gpu_busy_us - row(p, "GEGLU gating").saved_us - bwd.saved_us,
            tk.FL_DUAL: p.gpu_busy_us - dual.saved_us,  # the dual GEMM takes the gating with its GEMMs
            "FuseLens (all kernels)": p.gpu_busy_us - dual.saved_us,
        }
    )


@pytest.mark.needs_data(LLAMA_TRAIN / "eager.json.gz")
def test_whole_model_training_rows_by_hand():
    p = plan(LLAMA_TRAIN / "eager.json.gz")
    assert [o.pattern for o in p.opportunities[:3]] == [
        "explicit attention (QKᵀ, mask, softmax, PV)",
        "explicit attention backward (dP, softmax, dQ, dK, dV)",
        "optimizer step (foreach)",
    ]
    # attention backward, one per layer: dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q, each 2·64·1024·1024·128 FLOP
    bwd = row(p, "explicit attention backward (dP, softmax, dQ, dK, dV)")
    assert bwd.count == 4 and bwd.takers == [tk.SDPA]
    ops = [k["op"] for k in bwd.kernels]
    assert ops.count("aten::bmm") == 4 and "aten::_softmax_backward_data" in ops
    t_gemms = sum(k["dur_us"] for k in bwd.kernels if k["op"] == "aten::bmm")
    assert any(f"{4 * 2 * 64 * 1024 * 1024 * 128 / 1e9:,.2f} GFLOP × 5/4" in line for line in bwd.arithmetic)
    first = next(line for line in bwd.arithmetic if "flash backward" in line)
    assert f"= {t_gemms * 5 / 4:,.1f} µs" in first  # the flash backward recomputes QKᵀ: 5 GEMMs' work at their rate
    # AdamW foreach: wd mul 2, lerp 3, mul 2, addcmul 3, sqrt 2, div 2, add 2, addcdiv 4 = 20 passes; fused: 7
    opt = row(p, "optimizer step (foreach)")
    assert opt.takers == [tk.FUSED_OPT, tk.COMPILE] and opt.count == 1
    assert opt.fused_us == pytest.approx(opt.time_us * 7 / 20)
    assert any("20 passes" in line for line in opt.arithmetic)
    # cross-entropy over the vocabulary: logits [4096, 32000] bf16 → fp32 → log_softmax → nll. What must still move:
    # the bf16 logits and the int64 labels in (the two label copies' [4, 1024] int64 are intermediates)
    ce = row(p, "cross-entropy")
    logits = 4096 * 32000
    assert [k["op"] for k in ce.kernels] == ["aten::copy_"] * 3 + ["aten::_log_softmax", "aten::nll_loss_forward"]
    assert ce.kernels[0]["bytes"] == logits * (2 + 4)  # the .float() copy
    assert ce.fused_bytes == logits * 2 + 4096 * 8 == 262_176_768
    assert ce.fused_us == pytest.approx(262_176_768 / p.roofs.gbps / 1e3)
    assert ce.takers == [tk.COMPILE, tk.LIGER]
    # its backward is a group of its own: the zero_ that clears the logits' gradient buffer writes it without reading
    # log_softmax's output (names.WRITE_ONLY_OPS), so nothing ties the two but autograd's saved tensor.
    # log_softmax_backward reads the gradient and the saved fp32 output and writes fp32, the cast writes bf16: the
    # fused kernel still reads both fp32 tensors and writes the bf16 gradient
    ceb = row(p, "cross-entropy backward")
    assert [k["op"] for k in ceb.kernels] == ["aten::_log_softmax_backward_data", "aten::copy_"]
    assert ceb.fused_bytes == logits * (4 + 4 + 2) == 1_310_720_000


def test_predictions_hold_on_the_hf_and_layer_pairs():
    from analyzer.opportunities.validate import pairs

    got = {(p.case, p.variant): p for p in pairs(SAMPLE_TRACES, ["hf_geglu_bf16", "gemma_layer_bf16"])}
    assert set(got) == {("hf_geglu_bf16", v) for v in ("compile", "liger", "fuselens", "fuselens-gating")} | {
        ("gemma_layer_bf16", v) for v in ("sdpa", "compile", "compile-fuselens")
    }
    assert all(p.ok for p in got.values()), {k: round(p.error_pct, 1) for k, p in got.items()}
    assert got[("gemma_layer_bf16", "compile")].takers == sorted({tk.COMPILE, tk.SDPA})


@pytest.mark.slow
def test_every_recorded_pair_within_15_percent():
    """Every eager / fused pair under sample_traces/ and the held-out H100 whole-model pairs within ±15%
    (docs/OPPORTUNITIES.md gives each error and its reason)."""
    from analyzer.opportunities.validate import pairs

    rows = pairs(SAMPLE_TRACES)
    assert len(rows) >= 34
    assert {p.case for p in rows} >= {"h200_llama_model_bf16", "h200_llama_model_train_bf16", "h200_gemma_model_bf16"}
    held_out = ROOT / "tests" / "data" / "opportunities_h100_llama"  # H100 whole-model pairs (SOURCE.md there)
    rows += pairs(held_out)
    assert {p.case for p in rows} >= {"h100_llama_model_bf16", "h100_llama_model_train_bf16"}
    bad = [(p.case, p.variant, round(p.error_pct, 1)) for p in rows if not p.ok]
    assert not bad


def test_h200_takes_the_h100_measurement_of_the_same_chip():
    """The H200 plain MLP (8192 × 768 → 3072 bf16): the H200 bench has no plain row there, so GEMM+act's saving is
    the H100 bench's (same dense tensor peaks), and the arithmetic says which GPU measured it."""
    p = plan(SAMPLE_TRACES / "h200_plain_8192tok_bf16" / "eager.json.gz")
    (o,) = p.opportunities
    bench = json.loads((ROOT / "bench" / "results" / "kernels_h100_80gb_hbm3.json").read_text())
    (r,) = [r for r in bench["shapes"] if r["id"] == "hf-plain-bf16"]
    saving = r["variants"]["eager"]["us"] - r["variants"]["fuselens"]["us"]
    assert o.saved_us_by_taker[tk.FL_ACT] == pytest.approx(saving)
    assert any("on the NVIDIA H100 80GB HBM3" in line for line in o.arithmetic)
    assert tk.AUTOTUNE not in o.saved_us_by_taker  # max-autotune keeps the ideal: nothing measured it
    assert p.predicted_busy_us({tk.AUTOTUNE}) == pytest.approx(p.gpu_busy_us - o.saved_us)
    # the plan page's "Do first" names the taker whose figure it quotes, and what the measured one saved
    assert o.lead_taker() == {
        "who": tk.AUTOTUNE,
        "saved_us_per_step": o.saved_us,
        "measured": False,
        "others_measured_us_per_step": {tk.FL_ACT: pytest.approx(saving)},
    }


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", "opportunities", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_cli_json_and_text():
    r = _cli(str(HF / "eager.json.gz"), "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert {"gpu_busy_us_per_step", "predicted_gpu_busy_us_per_step", "opportunities", "roofs"} <= set(j)
    assert j["opportunities"][0]["kernels_removed"][1]["op"] == "aten::gelu"
    t = _cli(str(HF / "eager.json.gz"))
    assert t.returncode == 0 and "dual GEMM" in t.stdout and "saved" in t.stdout and "GB/s" in t.stdout


def test_cli_bad_file_is_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("not a trace")
    r = _cli(str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "x.json" in r.stderr


def test_amd_gpu_gets_no_fuselens_taker():
    """TraceLens's MI300X Qwen trace: the dual GEMM is found, but FuseLens's kernels do not build on ROCm."""
    p = plan(ROOT / "tests" / "data" / "tracelens" / "mi300_qwen1.5-0.5b_eager.json.gz")
    dual = row(p, "dual GEMM (gate + up GEMMs, gating)")
    assert dual.takers == [] and any("NVIDIA only" in n for n in dual.taker_notes)
    assert not any(set(o.takers) & set(tk.FUSELENS) for o in p.opportunities)


def test_a_fill_writes_its_tensor_without_reading_what_was_there():
    """fill_(self, value) and the other write-only in-place ops (names.WRITE_ONLY_OPS) read no tensor: a later fill_
    of a same-sized buffer is no consumer of an earlier kernel's output. HTA's CUDA-graph training sample (A100)
    zeroes gradient buffers one after another; read as a chain, 24 fills and a mul "avoided" 825.5 MB in a group
    that moves 463.0 MB, and 12 other groups held 2-24 fills each."""
    from analyzer.opinfo.dataflow import tensor_io

    io = tensor_io("aten::fill_", [[2048, 512], []], ["float", "Scalar"])
    assert io.inputs == () and io.output.shape == (2048, 512)
    io = tensor_io("aten::zero_", [[64, 3, 7, 7]], ["float"])
    assert io.inputs == () and io.output.numel == 64 * 3 * 7 * 7
    require_data(TRACES["hta_cuda_graph"])
    p = load_plan(TRACES["hta_cuda_graph"])
    assert all(sum(k["op"] == "aten::fill_" for k in o.kernels) <= 1 for o in p.opportunities)
    assert all(o.bytes_avoided <= o.bytes for o in p.opportunities)


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(TRACES))
def test_no_group_keeps_more_on_chip_than_its_kernels_move(key):
    """On every public trace we ship: an opportunity never avoids more bytes than its kernels move (the fused kernel
    would move less than nothing); a group whose data flow says so is not predicted, and the plan's notes say why
    (HTA's sampled ranks: a copy into a cumsum whose first kernel, cub's scan init, the cost model gives 0 B)."""
    require_data(TRACES[key])
    p = load_plan(TRACES[key])
    assert all(o.bytes_avoided <= o.bytes * (1 + 1e-9) for o in p.opportunities if o.bytes == o.bytes)
    if key == "hta_filter_rank1":
        assert any("outweigh what its kernels move" in n for n in p.notes)


def test_an_empty_plan_on_a_trace_without_shapes_says_it_could_not_look():
    """HTA's df_index_resolver sample recorded no op shapes: 98% of its step's GPU time has no byte estimate, so
    nothing could be priced. The plan says that (record_shapes off?), not 'no fusible work found', which reads as a
    step with nothing left to fuse."""
    require_data(TRACES["hta_df_index"])
    j = load_plan(TRACES["hta_df_index"]).to_json()
    assert j["opportunities"] == [] and j["empty_reason"].startswith("98% of the step's GPU time has no byte estimate")
    assert "record_shapes off?" in j["empty_reason"]
    out = subprocess.run(
        [sys.executable, "-m", "analyzer", "opportunities", str(TRACES["hta_df_index"])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    ).stdout
    assert "could not be looked for" in out and "no fusible work found" not in out
    assert load_plan(SAMPLE_TRACES / "hf_geglu_bf16" / "eager.json.gz").empty_reason == ""


def test_a_roof_read_on_an_unknown_gpu_says_it_was_not_checked():
    """HTA's sampled ranks name no GPU the peak table knows: the plan's roof is the trace's best memory-bound kernel,
    2,581 GB/s, above an A100's or V100's HBM peak; with no peak to hold it against, the plan says it is unchecked."""
    require_data(TRACES["hta_filter_rank0"])
    r = load_plan(TRACES["hta_filter_rank0"]).roofs
    assert r.hbm_peak_gbps is None and round(r.gbps) == 2581
    assert "not checked against its HBM peak" in r.gbps_source
