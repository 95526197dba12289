"""A FuseLens kernel replaces no more GEMMs than its name says it runs (analyzer.opinfo.classify.gemm_capacity),
on real H100/H200 recordings: the down projection's GEMM kernel swaps one GEMM, the dual GEMM takes its two, and the
training dH kernel takes the one dH GEMM."""

from __future__ import annotations

from analyzer.diff import diff_runs
from analyzer.opinfo.classify import gemm_capacity
from tests.analyzer.test_diff import summary_of
from tests.conftest import DATA, SAMPLE_TRACES, require_data


def test_gemm_capacity_reads_the_classifier_table():
    assert gemm_capacity("fuselens_dual_gemm_glu_save_kernel") == 2
    assert gemm_capacity("fuselens_mlp_bwd_dh_kernel") == 1
    assert gemm_capacity("fuselens_gemm_bias_act_kernel") == 1
    assert gemm_capacity("fuselens_glu_gating_kernel") is None  # no GEMM in it
    assert gemm_capacity("nvjet_sm90_tst_128x160_64x5_2x4_h_bz_NTT") is None  # vendor: capped per op call


def test_llama_swiglu_forward_down_gemm_is_a_swap_not_a_two_gemm_fusion():
    """H200 Llama-2-7B SwiGLU MLP (tests/data/comparability/h200_llama_swiglu_trace_load): the dual GEMM replaces
    gate mm, up mm, silu and mul; the GEMM+act kernel (no activation here: the down projection) replaces one mm."""
    d = DATA / "comparability" / "h200_llama_swiglu_trace_load" / "normal"
    require_data(d / "eager.json.gz", d / "fuselens.json.gz")
    (cd,) = diff_runs(summary_of(str(d / "eager.json.gz")), [summary_of(str(d / "fuselens.json.gz"))]).candidates
    (dual,) = [g for g in cd.fusions if g.fused_kernel.startswith("fuselens_dual_gemm")]
    assert sorted(dual.replaced_ops) == ["aten::mm", "aten::mm", "aten::mul", "aten::silu"]
    act = [g for g in cd.fusions + cd.swaps if g.fused_kernel.startswith("fuselens_gemm_bias_act")]
    assert [len(g.replaces) for g in act] == [1]


def test_training_dh_kernel_takes_one_gemm():
    """The H100 HF GEGLU training step (sample_traces/geglu_train_fuselens_bf16): the dH kernel's group holds one
    GEMM (dH = dY · W_down) with the GELU backward's pointwise kernels, never a weight-gradient GEMM beside it."""
    d = SAMPLE_TRACES / "geglu_train_fuselens_bf16"
    require_data(d / "eager.json.gz", d / "fuselens.json.gz")
    (cd,) = diff_runs(summary_of(str(d / "eager.json.gz")), [summary_of(str(d / "fuselens.json.gz"))]).candidates
    (dh,) = [g for g in cd.fusions if g.fused_kernel.startswith("fuselens_mlp_bwd_dh")]
    assert sum(op == "aten::mm" for op in dh.replaced_ops) == 1
