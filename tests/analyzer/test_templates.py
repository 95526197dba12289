"""Inductor GEMM templates on real H100 recordings: the HF GEGLU MLP under
torch.compile with every GEMM a Triton template (`compile-triton-gemm`), beside eager on the same GPU.

Independent truths: the eager run's cuBLAS GEMMs (aten::mm with [M,K]·[K,N] shapes) of the same problems, and
the template's own buffers as the profiler recorded them."""

from __future__ import annotations

import pytest

from analyzer.diff import diff_runs
from analyzer.summary import summarize
from tests.conftest import DATA, loaded_trace

T = DATA / "templates_h100"
FWD, TRAIN = T / "hf_geglu_templates_bf16", T / "geglu_train_templates_bf16"
M, D, H = 8192, 768, 3072  # tokens, model dim, hidden dim
DOWN = "triton_tem_fused__unsafe_view_gelu_mm_mul_t_view_2"


def _last_step(path):
    g = loaded_trace(path).gpu_ops
    return g[g["step"] == g["step"].max()]


def test_down_projection_template_gets_its_gemm_flops_and_bytes():
    """Bug 1: the down projection's template reads a 3-D input [64,128,3072] and the weight as [N,K] = [768,3072];
    it gets 2·M·N·K FLOPs and A + B + C bytes, the same as eager's aten::mm of that problem."""
    k = _last_step(FWD / "compile-triton-gemm.json.gz")
    down = k[k["name"] == DOWN].iloc[0]
    assert down["op_name"] == DOWN and down["input_dims"][:3] == [[64, 128, H], [D, H], [M, D]]
    eager = _last_step(FWD / "eager.json.gz")
    mm = eager[(eager["op_name"] == "aten::mm") & eager["input_dims"].map(lambda d: d[:2] == [[M, H], [H, D]])]
    assert len(mm) == 1
    assert down["flops"] == mm["flops"].iloc[0] == 2 * M * D * H
    assert down["bytes"] == mm["bytes"].iloc[0] == (M * H + D * H + M * D) * 2
    assert "M=8192 N=768 K=3072" in down["cost_basis"] and "[N,K] weight" in down["cost_basis"]
    assert 0 < down["pct_peak_flops"] < 100  # compared with the bf16 dense peak


def test_template_named_after_its_inputs_producers_is_a_plain_mm():
    """Bug 5: `…_gelu_mm_mul_t_view_2` names gelu and mul because its A is the gated product a separate Inductor
    kernel wrote; its buffers are A, B and the output only, so it computes the mm alone."""
    k = _last_step(FWD / "compile-triton-gemm.json.gz")
    assert set(k.loc[k["name"] == DOWN, "ops"]) == {"mm"}
    gated = k[k["name"] == "triton_poi_fused__unsafe_view_gelu_mul_1"]
    assert set(gated["ops"]) == {"gelu+mul"}  # the kernel that does compute them
    assert set(k.loc[k["name"].str.startswith("triton_tem"), "category"]) == {"gemm"}


@pytest.mark.parametrize("case", [FWD, TRAIN], ids=["forward", "training"])
def test_diff_matches_every_template_to_cublas(case):
    """Bug 1: the diff pairs each template with eager's cuBLAS GEMM of the same (M, N, K, dtype) — forward, and the
    backward's weight-gradient templates that read their activations transposed (x^T·dY) — instead of calling it
    a swap; and no template is credited with the gated product's gelu/mul."""
    base = summarize(loaded_trace(case / "eager.json.gz"))
    cand = summarize(loaded_trace(case / "compile-triton-gemm.json.gz"))
    cd = diff_runs(base, [cand]).candidates[0]
    templates = cand.kernels[cand.kernels["name"].str.startswith("triton_tem")]
    per_step = templates["count_per_step"].sum()
    matched = [g for g in cd.matched_gemms if g["candidate_kernel"].startswith("triton_tem")]
    assert sum(g["count_per_step"] for g in matched) == per_step
    assert not [r for r in (*cd.swaps, *cd.fusions, *cd.kernel_choices) if "triton_tem" in r.fused_kernel]
    problems = {(g["m"], g["n"], g["k"]) for g in matched}
    assert {(M, H, D), (M, D, H)} <= problems
    if case is TRAIN:
        assert {(D, H, M), (H, D, M)} <= problems  # dW = xᵀ·dY (gate/up) and hᵀ·dY (down)
    gated = [f for f in cd.fusions if f.fused_kernel == "triton_poi_fused__unsafe_view_gelu_mul_1"]
    assert len(gated) == 1 and set(gated[0].ops) == {"gelu", "mul"}
