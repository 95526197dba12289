"""The fusion diff on a whole decoder layer (Gemma-style, H100, tests/data/layer_h100): eager attention -> SDPA's
cuDNN kernel is one attention fusion with exact bytes; under compile the RMSNorm, RoPE and GEGLU groups come out
with exact bytes; no GEMM is claimed as fused and no chain goes into a neighbour by position."""

from __future__ import annotations

import pytest

from analyzer import diff_runs, summarize
from tests.conftest import DATA, SAMPLE_TRACES, loaded_trace

LAYER = DATA / "layer_h100"
SCORE = 8 * 2048 * 2048  # B·H·S_q·S_k elements of one score tensor
BF16_SCORE = SCORE * 2  # 67,108,864 B


@pytest.fixture(scope="module")
def layer_diff():
    runs = [summarize(loaded_trace(LAYER / f"{v}.json.gz")) for v in ("eager", "sdpa", "compile")]
    return diff_runs(runs[0], runs[1:], labels=["eager", "sdpa", "compile"])


def _attention(cd):
    (f,) = [f for f in cd.fusions if f.pattern.startswith("attention")]
    return f


def test_eager_to_sdpa_is_one_attention_fusion(layer_diff):
    sdpa = layer_diff.candidates[0]
    assert len(sdpa.fusions) == 1 and not sdpa.swaps
    f = _attention(sdpa)
    assert f.fused_kernel.startswith("cudnn_generated_fort_native_sdpa")
    assert f.fused_op == "aten::_cudnn_attention_forward"
    # QKᵀ bmm, ·scale, +mask, fp32 copy, softmax, bf16 cast, PV bmm, layout copy of O
    assert f.replaced_ops == [
        "aten::bmm", "aten::mul", "aten::add", "aten::copy_", "aten::_softmax", "aten::copy_", "aten::bmm",
        "aten::copy_",
    ]  # fmt: skip
    assert f.also_removed == ["Memset (Device)"]  # cuBLAS's workspace memset of the QKᵀ bmm
    # 4 bf16 scores (QKᵀ out, ·scale, +mask, cast P) + 2 fp32 (softmax in and out) each written and read once,
    # + the PV output [8,2048,256] bf16 before its layout copy
    assert f.bytes_avoided_per_step == 2 * (4 * BF16_SCORE + 2 * 2 * BF16_SCORE + 8 * 2048 * 256 * 2)
    assert f.bytes_avoided_per_step == 1_090_519_040 >= 2 * BF16_SCORE
    assert f.bytes_complete
    assert "= 1,090,519,040 B" in f.bytes_note and "4 × [1,8,2048,2048]/[8,2048,2048] bf16 67,108,864 B" in f.bytes_note
    assert f.time_saved_us_per_step > 300  # ~500 µs of eager kernels -> ~50 µs
    assert sdpa.hbm_bytes_avoided_per_step == f.bytes_avoided_per_step
    assert sdpa.unmatched_base == []


def test_fused_kernel_is_category_attention(layer_diff):
    t = loaded_trace(LAYER / "sdpa.json.gz")
    att = t.kernels[t.kernels["name"].str.startswith("cudnn_generated_fort_native_sdpa")]
    assert len(att) > 0 and (att["category"] == "attention").all() and (att["library"] == "cuDNN").all()


def test_matched_gemms_stay_matched(layer_diff):
    for cd in layer_diff.candidates:
        problems = {g["problem"] for g in cd.matched_gemms}
        # q/o projections, k/v projections (1 KV head), gate/up, down: all cuBLAS on both sides
        assert problems == {
            "M=2048 N=2048 K=2048 bf16", "M=2048 N=256 K=2048 bf16", "M=2048 N=16384 K=2048 bf16",
            "M=2048 N=2048 K=16384 bf16",
        }  # fmt: skip
        for f in cd.fusions + cd.swaps:
            if not f.pattern.startswith("attention"):
                assert "aten::mm" not in f.replaced_ops and "aten::bmm" not in f.replaced_ops, f.fused_kernel


def test_eager_to_compile_groups_with_exact_bytes(layer_diff):
    comp = layer_diff.candidates[1]
    by = {f.pattern: f for f in comp.fusions}
    assert set(by) == {
        "attention (QKᵀ, scale, mask, softmax, PV)", "RMSNorm", "RMSNorm + residual add", "GEGLU gating", "RoPE",
    }  # fmt: skip
    assert all(f.bytes_complete for f in comp.fusions) and comp.bytes_complete
    x32 = 2048 * 2048 * 4  # the normed activations in fp32
    small = 2048 * 4  # [1,2048,1] mean / +eps / rsqrt and the [2048] weight / 1 + w
    # x.float() -> pow, pow -> mean, x·rsqrt -> ·(1 + w), ·(1 + w) -> cast: 4 fp32 tensors, one read twice (x32 is
    # read by pow and by the x·rsqrt mul); 5 small ones
    rms = 2 * 4 * x32 + x32 + 2 * 5 * small
    assert by["RMSNorm"].bytes_avoided_per_step == rms == 151_076_864
    assert by["RMSNorm"].replaced_ops[:3] == ["aten::copy_", "aten::pow", "aten::mean"]
    # the residual add (o_proj out + x, bf16) feeding the second RMSNorm
    assert by["RMSNorm + residual add"].bytes_avoided_per_step == rms + 2 * 2048 * 2048 * 2
    assert by["GEGLU gating"].bytes_avoided_per_step == 2 * 2048 * 16384 * 2
    assert _attention(comp).bytes_avoided_per_step == 1_090_519_040
    rope = [f for f in comp.fusions if f.pattern == "RoPE"]
    q_rope = next(f for f in rope if "[1,8,2048,256]" in f.bytes_note)
    # q·cos, neg(q2), cat, rot·sin: 3 [1,8,2048,256] + 1 [1,8,2048,128] bf16, each written and read once
    assert q_rope.bytes_avoided_per_step == 2 * (3 * 8 * 2048 * 256 * 2 + 8 * 2048 * 128 * 2)
    assert q_rope.fused_kernel.startswith("triton_poi_fused__scaled_dot_product_cudnn_attention")


def test_no_position_claim_pulls_attention_into_a_neighbour(layer_diff):
    """The score chain goes to the attention kernel only: never to the RMSNorm reduction kernel beside it, whose
    name lists add, mul and copy, nor to the RoPE kernel whose name mentions the cuDNN attention op."""
    comp = layer_diff.candidates[1]
    for f in comp.fusions + comp.swaps:
        if f.pattern.startswith("attention"):
            continue
        assert "aten::_softmax" not in f.replaced_ops and "aten::bmm" not in f.replaced_ops, f.fused_kernel
    rope = [f for f in comp.fusions if f.pattern == "RoPE"]
    assert {op for f in rope for op in f.replaced_ops} == {"aten::mul", "aten::neg", "aten::cat", "aten::add"}
    assert all(f.ops == ["mul", "neg", "cat", "add"] for f in rope)


def test_layer_summary_classifies_every_kernel():
    for v in ("eager", "sdpa", "compile"):
        k = loaded_trace(LAYER / f"{v}.json.gz").kernels
        assert (k["category"] != "other").all(), k.loc[k["category"] == "other", "name"].unique()[:5]


def test_what_is_left_ranks_round_trips_by_time_at_the_roof(layer_diff):
    eager = layer_diff.base.remaining
    assert eager[0]["kind"] == "attention scores"  # the fp32 softmax copies lead
    times = [r["time_at_roof_us"] for r in eager]
    assert times == sorted(times, reverse=True)
    assert all(r["time_at_roof_us"] == pytest.approx(r["round_trip_bytes"] / 3350e3) for r in eager)
    # the compiled layer: the norm kernels still write their output for the projections to read back
    comp = layer_diff.candidates[1].run.remaining
    kinds = {r["kind"] for r in comp}
    assert "attention scores" not in kinds and "GEMM prologue" in kinds
    pro = [r for r in comp if r["kind"] == "GEMM prologue"]
    assert any(r["producer"].startswith("triton_red_fused") and len(r["readers"]) == 3 for r in pro)  # q, k, v


# --- the bundled set (sample_traces/gemma_layer_bf16: the runner on an H100, all four variants, ncu for eager, sdpa)
BUNDLED = SAMPLE_TRACES / "gemma_layer_bf16"


@pytest.fixture(scope="module")
def bundled_diff():
    from analyzer.runmeta import attach_manifest

    runs = []
    for v in ("eager", "sdpa", "compile", "compile-fuselens"):
        t = loaded_trace(BUNDLED / f"{v}.json.gz")
        attach_manifest(t, BUNDLED / f"{v}.json.gz")
        runs.append(summarize(t))
    return diff_runs(runs[0], runs[1:], labels=["eager", "sdpa", "compile", "compile-fuselens"])


def test_bundled_set_has_every_variant_and_its_backend():
    import json

    m = json.loads((BUNDLED / "manifest.json").read_text())
    assert m["workload"] == "gemma-layer" and m["gpu"]["name"].startswith("NVIDIA H100")
    v = {e["name"]: e for e in m["variants"]}
    assert set(v) == {"eager", "sdpa", "compile", "compile-fuselens"}
    assert all(e["status"] == "done" for e in v.values())
    assert v["eager"]["attention_backend"] == "none" and v["sdpa"]["attention_backend"] == "cudnn"
    assert v["eager"]["ncu"] and v["sdpa"]["ncu"]


def test_bundled_fusions(bundled_diff):
    sdpa, comp, fl = bundled_diff.candidates
    assert [f.pattern for f in sdpa.fusions] == ["attention (QKᵀ, scale, mask, softmax, PV)"]
    assert sdpa.hbm_bytes_avoided_per_step == 1_090_519_040
    by = {f.pattern: f.bytes_avoided_per_step for f in comp.fusions if f.pattern != "RoPE"}
    assert by == {
        "attention (QKᵀ, scale, mask, softmax, PV)": 1_090_519_040,
        "RMSNorm": 151_076_864,
        "RMSNorm + residual add": 167_854_080,
        "GEGLU gating": 134_217_728,
    }
    # compile + the FuseLens MLP: the dual GEMM takes the gate and up GEMMs, GELU and the gating mul, nothing else
    (dual,) = [f for f in fl.fusions if f.fused_kernel == "fuselens_dual_gemm_glu_kernel"]
    assert sorted(dual.replaced_ops) == ["aten::gelu", "aten::mm", "aten::mm", "aten::mul"]
    assert dual.bytes_avoided_per_step == 3 * 2 * 2048 * 16384 * 2  # gate out, GELU out, up out: 402,653,184
    rms = {f.pattern: f.bytes_avoided_per_step for f in fl.fusions if "RMSNorm" in f.pattern}
    assert rms == {"RMSNorm": 151_076_864, "RMSNorm + residual add": 167_854_080}
    for cd in (sdpa, comp, fl):
        for f in cd.fusions + cd.swaps:
            if f.pattern.startswith("attention") or f is dual:
                continue
            assert not {"aten::mm", "aten::bmm"} & set(f.replaced_ops), f.fused_kernel


def test_bundled_measured_bytes_back_the_attention_estimate(bundled_diff):
    """Nsight Compute (flushed, one forward): sdpa moved ~1 GB less DRAM than eager, the attention group's logical
    1.09 GB less what stayed in the 50 MB L2 anyway."""
    sdpa = bundled_diff.candidates[0]
    saved = sdpa.to_json()["measured_dram_bytes_saved_per_step"]
    assert 0.8e9 < saved < 1_090_519_040 * 1.05


def test_bundled_layer_classifies_every_kernel():
    for v in ("eager", "sdpa", "compile", "compile-fuselens"):
        k = loaded_trace(BUNDLED / f"{v}.json.gz").kernels
        assert (k["category"] != "other").all(), k.loc[k["category"] == "other", "name"].unique()[:5]
