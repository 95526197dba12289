"""analyzer.diff on real traces: the GPU recordings in sample_traces/ (HF GEGLU eager / compile / Liger / FuseLens,
plain MLP, SwiGLU, a training step) with the issue's exact figures, and public traces (kineto ResNet-50 pair,
cross-hardware Qwen, self-diffs)."""

from __future__ import annotations

import copy
import functools
import json
import math

import pytest

from analyzer.diff import diff_runs
from analyzer.errors import DiffError
from analyzer.runmeta import attach_manifest
from analyzer.summary import summarize
from tests.conftest import SAMPLE_TRACES, TRACES, loaded_trace, require_data

INTERMEDIATE_8192x3072_BF16 = 8192 * 3072 * 2  # 50,331,648 B: one [64, 128, 3072] bf16 tensor
HF_AVOIDED = 2 * INTERMEDIATE_8192x3072_BF16  # written once + read back once = 100,663,296 B


def _sample(case: str, variant: str):
    path = SAMPLE_TRACES / case / f"{variant}.json.gz"
    require_data(path)
    return path


@functools.cache
def summary_of(path_str: str):
    trace = copy.copy(loaded_trace(path_str))  # the cached Trace is shared; meta.extra is ours to fill
    trace.meta = copy.copy(trace.meta)
    trace.meta.extra = dict(trace.meta.extra)
    attach_manifest(trace, path_str)
    return summarize(trace)


def sample_summary(case: str, variant: str):
    return summary_of(str(_sample(case, variant)))


def hf_diff(*variants: str):
    base = sample_summary("hf_geglu_bf16", "eager")
    return diff_runs(base, [sample_summary("hf_geglu_bf16", v) for v in variants])


def _is_gelu_kernel(name: str) -> bool:
    return "Gelu" in name


def _is_mul_kernel(name: str) -> bool:
    return "MulFunctor" in name


# --- the Hugging Face GEGLU MLP case -------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["compile", "liger", "fuselens-gating"])
def test_hf_gelu_mul_fusion_avoids_one_intermediate_round_trip(variant):
    cd = hf_diff(variant).candidates[0]
    assert cd.kernels_per_step == [5, 4]
    assert cd.hbm_bytes_avoided_per_step == HF_AVOIDED == 100_663_296
    assert cd.bytes_complete
    assert len(cd.fusions) == 1
    f = cd.fusions[0]
    assert f.count_per_step == 1
    assert len(f.replaces) == 2
    assert any(_is_gelu_kernel(n) for n in f.replaces) and any(_is_mul_kernel(n) for n in f.replaces)
    assert f.replaced_ops == ["aten::gelu", "aten::mul"]
    assert f.intermediates == [
        {
            "shape": [64, 128, 3072],
            "matrix": "8192×3072",
            "dtype": "bf16",
            "bytes": float(INTERMEDIATE_8192x3072_BF16),
            "reads": 1,
            "round_trip_bytes": float(HF_AVOIDED),
            "producer": f.replaces[0],
            "producer_op": "aten::gelu",
            "readers": [f.replaces[1]],
        }
    ]
    # the three GEMMs are the same problems on both sides, whatever cuBLAS picked
    assert sorted((g["problem"], g["count_per_step"]) for g in cd.matched_gemms) == [
        ("M=8192 N=3072 K=768 bf16", 2),
        ("M=8192 N=768 K=3072 bf16", 1),
    ]
    assert cd.unmatched_base == [] and cd.unmatched_candidate == []
    assert cd.swaps == [] and cd.kernel_choices == []
    # group time: the two eager kernels vs the one fused kernel, measured
    assert f.base_time_us_per_step > f.candidate_time_us_per_step > 0
    assert cd.time_saved_us_per_step == pytest.approx(f.time_saved_us_per_step)


def test_hf_fusion_evidence_names_its_source():
    compile_f = hf_diff("compile").candidates[0].fusions[0]
    assert compile_f.fused_kernel == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert all("named by kernel name" in e for e in compile_f.evidence)
    liger_f = hf_diff("liger").candidates[0].fusions[0]
    assert liger_f.fused_kernel == "_geglu_tanh_forward_kernel"
    assert liger_f.fused_op == "LigerGELUMulFunction"
    assert all("launching op LigerGELUMulFunction" in e for e in liger_f.evidence)


def test_hf_dual_gemm_avoids_gate_up_and_gelu_outputs():
    """FuseLens dual GEMM: gate GEMM, up GEMM, gelu and mul in one kernel. The rule counts three intermediates:
    the gate GEMM's output (read by gelu), gelu's output and the up GEMM's output (both read by mul)."""
    cd = hf_diff("fuselens").candidates[0]
    assert cd.kernels_per_step == [5, 2]
    assert cd.hbm_bytes_avoided_per_step == 3 * HF_AVOIDED == 301_989_888
    (f,) = cd.fusions
    assert f.fused_kernel == "fuselens_dual_gemm_glu_kernel"
    assert len(f.replaces) == 4
    assert [i["producer_op"] for i in f.intermediates] == ["aten::mm", "aten::gelu", "aten::mm"]
    assert {i["matrix"] for i in f.intermediates} == {"8192×3072"}
    assert [(g["problem"], g["count_per_step"]) for g in cd.matched_gemms] == [("M=8192 N=768 K=3072 bf16", 1)]
    # cuBLAS's workspace memsets of the two replaced GEMM calls leave with them, named, not hidden
    assert f.also_removed == ["Memset (Device)", "Memset (Device)"]
    assert cd.unmatched_base == [] and cd.unmatched_candidate == []


def test_hf_what_is_left_after_compile_is_the_gemm_epilogue():
    """compile and Liger still write both GEMM outputs and read them back in the gating kernel: a dual-GEMM
    epilogue would avoid 2 more round trips, which is exactly what the FuseLens dual GEMM adds over them."""
    d = hf_diff("compile", "liger", "fuselens")
    for cd in d.candidates[:2]:
        left = cd.run.remaining
        assert [x["kind"] for x in left] == ["GEMM epilogue"]
        assert left[0]["count_per_step"] == 2 and left[0]["round_trip_bytes"] == 2 * HF_AVOIDED
    fuselens = d.candidates[2]
    assert fuselens.run.remaining == []
    assert fuselens.hbm_bytes_avoided_per_step - d.candidates[0].hbm_bytes_avoided_per_step == 2 * HF_AVOIDED
    # the eager baseline: the full 3 round trips are on the table
    assert d.base.remaining_bytes_per_step == 3 * HF_AVOIDED


def test_n_candidates_side_by_side_in_one_view():
    d = hf_diff("compile", "liger", "fuselens-gating", "fuselens")
    assert d.labels == ["eager", "compile", "liger", "fuselens-gating", "fuselens"]  # from the runner's manifest
    sbs = d.side_by_side()
    assert sbs["run"].tolist() == d.labels
    assert sbs["kernels_per_step"].tolist() == [5, 4, 4, 4, 2]
    assert (sbs["gpu_time_us_per_step"] > 0).all()
    assert sbs["idle_us_per_step"].notna().all()
    assert sbs["launches_per_step"].tolist() == [5, 4, 4, 4, 2]
    cats = d.categories()
    assert set(cats["run"]) == set(d.labels)
    eager_gemm = cats[(cats["run"] == "eager") & (cats["category"] == "gemm")]
    assert eager_gemm["count"].tolist() == [3]
    assert [c.hbm_bytes_avoided_per_step for c in d.candidates] == [HF_AVOIDED] * 3 + [3 * HF_AVOIDED]


def test_measured_dram_bytes_from_the_runner_manifest():
    """Nsight Compute counted DRAM bytes per forward; the report shows them beside the estimate."""
    d = hf_diff("compile")
    manifest = json.loads((SAMPLE_TRACES / "hf_geglu_bf16" / "manifest.json").read_text())
    by_name = {v["name"]: v for v in manifest["variants"]}
    h = d.candidates[0].headline()
    want = [by_name[v]["dram_bytes_read"] + by_name[v]["dram_bytes_write"] for v in ("eager", "compile")]
    assert h["measured_dram_bytes_per_step"] == want
    assert h["measured_dram_bytes_saved_per_step"] == want[0] - want[1]
    assert d.base.facts["torch"] == manifest["torch"]


# --- plain MLP, SwiGLU, training step ------------------------------------------------------------------------------


def test_plain_mlp_compile_only_swaps_gelu_and_says_what_an_epilogue_would_avoid():
    base = sample_summary("plain_8192tok_bf16", "eager")
    d = diff_runs(base, [sample_summary("plain_8192tok_bf16", v) for v in ("compile", "fuselens")])
    comp, fl = d.candidates
    assert comp.kernels_per_step == [3, 3]
    assert comp.hbm_bytes_avoided_per_step == 0
    assert comp.fusions == []
    (swap,) = comp.swaps
    assert swap.kind == "swap" and swap.replaced_ops == ["aten::gelu"] and swap.bytes_avoided_per_step == 0
    # bias rides the cuBLAS epilogue in both runs: the GEMMs match as the same addmm problems
    assert {(g["problem"], g["base_op"], g["candidate_op"]) for g in comp.matched_gemms} == {
        ("M=8192 N=3072 K=768 bf16", "aten::addmm", "aten::addmm"),
        ("M=8192 N=768 K=3072 bf16", "aten::addmm", "aten::addmm"),
    }
    (left,) = comp.run.remaining
    assert left["kind"] == "GEMM epilogue" and left["producer_op"] == "aten::addmm"
    assert left["shape"] == [8192, 3072] and left["round_trip_bytes"] == HF_AVOIDED
    # ... and the FuseLens GEMM+bias+GELU epilogue kernel really avoids it
    assert fl.kernels_per_step == [3, 2]
    assert fl.hbm_bytes_avoided_per_step == HF_AVOIDED
    (f,) = fl.fusions
    assert f.fused_kernel == "fuselens_gemm_bias_act_kernel" and f.replaced_ops == ["aten::addmm", "aten::gelu"]
    assert fl.run.remaining == []


def test_plain_mlp_one_token():
    base = sample_summary("plain_1tok_bf16", "eager")
    d = diff_runs(base, [sample_summary("plain_1tok_bf16", v) for v in ("compile", "fuselens")])
    comp, fl = d.candidates
    one_row = 1 * 3072 * 2  # [1, 3072] bf16
    assert comp.hbm_bytes_avoided_per_step == 0
    assert [x["round_trip_bytes"] for x in comp.run.remaining] == [2 * one_row]
    assert fl.hbm_bytes_avoided_per_step == 2 * one_row == 12_288
    # cuBLASLt split-K: the GEMM and its reduction kernel; M, N, K belong to the GEMM kernel only
    problems = [g["problem"] for g in fl.matched_gemms]
    assert problems == ["M=1 N=768 K=3072 bf16"]


def test_swiglu_fp16():
    base = sample_summary("swiglu_fp16", "eager")
    d = diff_runs(base, [sample_summary("swiglu_fp16", v) for v in ("compile", "liger", "fuselens")])
    assert [c.kernels_per_step for c in d.candidates] == [[5, 4], [5, 4], [5, 2]]
    assert [c.hbm_bytes_avoided_per_step for c in d.candidates] == [HF_AVOIDED, HF_AVOIDED, 3 * HF_AVOIDED]
    assert d.candidates[0].fusions[0].intermediates[0]["dtype"] == "fp16"
    assert d.candidates[0].fusions[0].ops == ["silu", "mul"]


@pytest.mark.parametrize("variant", ["compile", "liger"])
def test_training_step_forward_and_backward_fusions(variant):
    """Forward gelu·mul and backward mul, mul, gelu_backward each become one kernel. Forward avoids gelu's output
    (written, read by the mul, and read again by the backward's grad·self, which the fused backward kernel no longer
    does: it recomputes gelu); backward avoids grad(gelu out) (mul -> gelu_backward). The two muls of MulBackward0
    are siblings, and gelu_backward's second input is the activation saved in the forward pass: neither is an
    intermediate."""
    base = sample_summary("geglu_train_bf16", "eager")
    cd = diff_runs(base, [sample_summary("geglu_train_bf16", variant)]).candidates[0]
    assert cd.kernels_per_step == [20, 17]
    t = INTERMEDIATE_8192x3072_BF16
    assert cd.hbm_bytes_avoided_per_step == 3 * t + 2 * t == 251_658_240
    assert len(cd.fusions) == 2
    by_n = sorted(cd.fusions, key=lambda f: len(f.replaces))
    assert by_n[0].replaced_ops == ["aten::gelu", "aten::mul"]
    assert by_n[1].replaced_ops == ["aten::mul", "aten::mul", "aten::gelu_backward"]
    assert [f.bytes_avoided_per_step for f in by_n] == [3 * t, 2 * t]  # forward: 1 write + 2 reads; backward: 1 + 1
    for f in cd.fusions:
        assert len(f.intermediates) == 1
    assert cd.unmatched_base == [] and cd.unmatched_candidate == []


def test_time_breakdown_sums_exactly():
    for v in ("compile", "liger", "fuselens"):
        tb = hf_diff(v).candidates[0].time_breakdown
        terms = [
            "saved_by_fusion_groups_us",
            "saved_by_kernel_choices_us",
            "saved_on_matched_gemms_us",
            "saved_on_other_matched_us",
            "removed_kernels_us",
            "added_kernels_us",
        ]
        total = sum(tb[t] for t in terms)
        assert total == pytest.approx(tb["base_kernel_time_us"] - tb["candidate_kernel_time_us"], abs=1e-6)


# --- public traces -------------------------------------------------------------------------------------------------


def test_kineto_resnet_num_workers_pair_has_no_fusion():
    """Same model, DataLoader workers 0 vs 4: cuDNN picks other algorithms for a few convolutions (same op, same
    shapes, other kernels) but nothing is fused: 0 bytes avoided."""
    d = diff_runs(summary_of(str(TRACES["legacy_resnet"])), [summary_of(str(TRACES["legacy_resnet_w4"]))])
    cd = d.candidates[0]
    assert cd.fusions == []
    assert cd.hbm_bytes_avoided_per_step == 0
    assert cd.kernels_per_step == [1462, 1478]
    assert all(k.bytes_avoided_per_step == 0 for k in cd.kernel_choices)
    assert all(k.replaced_ops[0].startswith("aten::cudnn_convolution") for k in cd.kernel_choices)
    assert cd.kernel_choices, "cuDNN picked other algorithms in the second run"
    # nothing silently dropped: every kernel is matched, in a group, or listed as unmatched
    n_b = (
        sum(g["count_per_step"] for g in cd.matched_gemms)
        + cd.matched_other["count"]
        + sum(len(f.replaces) * f.count_per_step for f in cd.fusions + cd.swaps + cd.kernel_choices)
        + sum(len(f.also_removed) * f.count_per_step for f in cd.fusions + cd.swaps)
        + sum(k["count_per_step"] for k in cd.unmatched_base)
    )
    assert n_b == cd.base.kernels_per_step + cd.base.memops_per_step


@pytest.mark.parametrize("name", ["h100_qwen", "mi300_triton", "h100_bert"])
def test_diff_against_itself_avoids_nothing(name):
    s = summary_of(str(TRACES[name]))
    cd = diff_runs(s, [s], labels=["a", "b"]).candidates[0]
    assert cd.kernels_per_step[0] == cd.kernels_per_step[1] > 0
    assert cd.fusions == [] and cd.swaps == [] and cd.kernel_choices == []
    assert cd.unmatched_base == [] and cd.unmatched_candidate == []
    assert cd.hbm_bytes_avoided_per_step == 0 and cd.time_saved_us_per_step == 0
    assert cd.time_breakdown["saved_on_matched_gemms_us"] == 0


def test_gemms_match_across_libraries_and_gpus():
    """Qwen1.5-0.5B eager on H100 (cuBLAS sm90_xmma) vs MI300X (Tensile Cijk_*): the same GEMM problems pair up by
    M, N, K, dtype whatever the kernel names; cuBLAS's workspace memsets have no MI300 twin and are listed."""
    d = diff_runs(
        summary_of(str(TRACES["h100_qwen"])), [summary_of(str(TRACES["mi300_qwen"]))], labels=["h100", "mi300"]
    )
    cd = d.candidates[0]
    mlp_up = [g for g in cd.matched_gemms if g["problem"] == "M=8944 N=2816 K=1024 bf16"]
    assert sum(g["count_per_step"] for g in mlp_up) == 48  # gate + up projection, 24 layers
    assert all(
        g["base_kernel"].startswith("sm90_xmma_gemm") and g["candidate_kernel"].startswith("Cijk_") for g in mlp_up
    )
    assert cd.fusions == [] and cd.hbm_bytes_avoided_per_step == 0
    assert {k["category"] for k in cd.unmatched_base} == {"memset", "memcpy"}  # every H100 kernel has a twin
    # MI300 runs 24 aten::fill_ kernels H100 does not: added work, listed, not hidden
    assert {(k["op"], k["count_per_step"]) for k in cd.unmatched_candidate if k["category"] != "memcpy"} == {
        ("aten::fill_", 24)
    }
    assert any("different GPUs" in n for n in d.notes)


# --- bad input -----------------------------------------------------------------------------------------------------


def test_errors_are_typed_and_one_line():
    s = summary_of(str(TRACES["h100_bert"]))
    with pytest.raises(DiffError, match="at least one candidate"):
        diff_runs(s, [])
    with pytest.raises(DiffError, match="2 labels given for 3 runs"):
        diff_runs(s, [s, s], labels=["a", "b"])
    with pytest.raises(DiffError, match="unique"):
        diff_runs(s, [s], labels=["x", "x"])
    with pytest.raises(DiffError, match="step 999"):
        diff_runs(s, [s], steps=[999, None])


def test_run_without_kernels_is_a_diff_error_naming_the_file():
    s = summary_of(str(TRACES["h100_bert"]))
    empty = copy.copy(s)
    empty.trace = copy.copy(s.trace)
    empty.trace.gpu_ops = s.trace.gpu_ops.iloc[0:0]
    with pytest.raises(DiffError) as err:
        diff_runs(s, [empty])
    msg = str(err.value)
    assert "h100_bert-small_eager.json.gz" in msg and "no GPU kernels" in msg and "\n" not in msg


def test_default_labels_are_unique_file_names():
    s = summary_of(str(TRACES["h100_bert"]))
    d = diff_runs(s, [s])
    assert d.labels == ["h100_bert-small_eager", "h100_bert-small_eager (2)"]


def test_json_is_strict_and_has_the_issue_keys():
    d = hf_diff("compile")
    doc = d.to_json()
    text = json.dumps(doc, allow_nan=False)  # NaN never reaches JSON
    assert "NaN" not in text
    for key in ("kernels_per_step", "gpu_time_us_per_step", "hbm_bytes_avoided_per_step", "fusions", "unmatched"):
        assert key in doc and key in doc["candidates"][0]
    assert doc["kernels_per_step"] == [5, 4]
    f = doc["fusions"][0]
    for key in ("fused_kernel", "replaces", "ops", "intermediates", "bytes_avoided_per_step", "time_saved_us_per_step"):
        assert key in f
    assert f["intermediates"][0]["shape"] == [64, 128, 3072] and f["intermediates"][0]["bytes"] == 50_331_648
    assert set(doc["unmatched"]) == {"base", "candidate"}
    assert math.isclose(doc["gpu_time_us_per_step"][0], d.base.gpu_time_us_per_step)


# --- when names say nothing: position and data flow; a GEMM epilogue; record_function ranges ------------------------


def _renamed(
    case: str,
    variant: str,
    renames: dict[str, str],
    drop: str | None = None,
    ops: dict | None = None,
    ranges: dict | None = None,
):
    """A recorded trace with some kernels renamed (and re-classified) or dropped, and launching ops renamed (`ops`):
    the INPUT changes, the code under test does not. Models a user's own @triton.jit kernel whose name names no op
    (launched bare: no custom op around it). `ranges`: record_function ranges renamed the same way."""
    from analyzer.opinfo.classify import classify_names

    path = _sample(case, variant)
    trace = copy.copy(loaded_trace(path))
    g = trace.gpu_ops.copy()
    g["name"] = g["name"].map(lambda n: next((v for k, v in renames.items() if k in n), n))
    cls = classify_names(g["name"])
    for col in ("category", "library", "ops"):
        g[col] = cls[col].to_numpy()
    if ops:
        g["op_name"] = g["op_name"].map(lambda o: ops.get(o, o))
    if drop:
        g = g[~g["name"].str.contains(drop, regex=False)]
    trace.gpu_ops = g
    if ranges:
        trace.annotations = trace.annotations.assign(name=trace.annotations["name"].map(lambda r: ranges.get(r, r)))
    return summarize(trace)


def test_opaque_user_kernel_found_by_position_and_data_flow():
    """The FuseLens gating kernel renamed 'user_kernel_0': it sits where mul was (position); gelu, before the up
    GEMM, feeds mul (data flow). Same figure as with a telling name."""
    cand = _renamed("hf_geglu_bf16", "fuselens-gating", {"_gating_kernel": "user_kernel_0"})
    cd = diff_runs(sample_summary("hf_geglu_bf16", "eager"), [cand]).candidates[0]
    assert cd.hbm_bytes_avoided_per_step == HF_AVOIDED
    (f,) = cd.fusions
    assert f.fused_kernel == "user_kernel_0"
    how = sorted(e.split(": ", 1)[1].split(":")[0] for e in f.evidence)
    assert how == ["data flow", "position"]


def test_opaque_dual_gemm_found_by_position():
    # the recordings launch it under the custom op fuselens::dual_gemm_glu and the range fuselens::path=dual_gemm,
    # which name 'gemm': a bare launch has neither
    cand = _renamed(
        "hf_geglu_bf16",
        "fuselens",
        {"fuselens_dual_gemm_glu_kernel": "k0"},
        ops={"fuselens::dual_gemm_glu": ""},
        ranges={"fuselens::path=dual_gemm": "user range"},
    )
    cd = diff_runs(sample_summary("hf_geglu_bf16", "eager"), [cand]).candidates[0]
    assert cd.kernels_per_step == [5, 2]
    assert cd.hbm_bytes_avoided_per_step == 3 * HF_AVOIDED
    assert all("position" in e for e in cd.fusions[0].evidence)


def test_gemm_epilogue_absorbs_the_pointwise_kernel():
    """A run whose fc1 GEMM kernel does GELU in its epilogue (a cuBLAS name spelling '_gelu'), and no separate
    GELU kernel: the matched GEMM pair becomes a fusion group and the fc1 output round trip is avoided."""
    cand = _renamed(
        "plain_8192tok_bf16",
        "eager",
        {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_gelu_bias"},
        drop="GeluCUDAKernelImpl",
    )
    cd = diff_runs(sample_summary("plain_8192tok_bf16", "eager"), [cand]).candidates[0]
    assert cd.kernels_per_step == [3, 2]
    (f,) = cd.fusions
    assert f.replaced_ops == ["aten::addmm", "aten::gelu"]
    assert f.bytes_avoided_per_step == HF_AVOIDED
    assert "epilogue" in f.evidence[1]
    assert [g["problem"] for g in cd.matched_gemms] == ["M=8192 N=768 K=3072 bf16"]  # fc1 left the matched list


def test_record_function_ranges_are_evidence():
    """mi300 normalization trace: kernels launched under record_function('RMSNorm affine=True') carry that range."""
    from analyzer.diff.align import sequence
    from analyzer.opinfo.names import text_ops

    seq = sequence(summary_of(str(TRACES["mi300_norm"])), "norm")
    ranges = {r for ctx in seq.rows["context"] for r in ctx}
    assert "RMSNorm affine=True" in ranges and "LayerNorm affine=True" in ranges
    assert not any(r.startswith("ProfilerStep#") for r in ranges)
    assert text_ops("RMSNorm affine=True") == {"rms_norm"}


def test_unrelated_runs_are_flagged():
    """BERT eager (H100) vs a compiled transformer block (MI300): almost nothing matches, and the diff says its
    groups are unreliable instead of presenting them as findings."""
    d = diff_runs(
        summary_of(str(TRACES["h100_bert"])), [summary_of(str(TRACES["mi300_triton"]))], labels=["bert", "blk"]
    )
    assert any("unreliable" in n for n in d.candidates[0].notes)
    acct = d.candidates[0].accounting
    assert acct.explained_time_share < 0.5 and not acct.reliable and acct.unexplained
    from analyzer.report import report_markdown

    assert f"- warning: only {acct.explained_time_share:.0%} of bert's GPU time per step is matched" in report_markdown(
        d
    )
    hf = diff_runs(sample_summary("hf_geglu_bf16", "eager"), [sample_summary("hf_geglu_bf16", "compile")])
    assert not any("unreliable" in n for n in hf.candidates[0].notes)


# --- manifest facts from a document (uploads) ------------------------------------------------------------------------


def test_manifest_document_gives_the_same_facts_as_the_file_beside_the_trace():
    from analyzer.runmeta import manifest_doc_facts, manifest_entry_facts, manifest_facts

    path = _sample("hf_geglu_bf16", "compile")
    doc = json.loads((path.parent / "manifest.json").read_text())
    from_file = manifest_facts(path)
    assert from_file and from_file["variant"] == "compile" and from_file["gpu"] == "NVIDIA H100 80GB HBM3"
    assert manifest_doc_facts(doc, "compile.json.gz") == from_file
    assert manifest_doc_facts(doc, "/some/upload/dir/compile.json.gz") == from_file  # the file name decides
    # the dashboard keeps the context without "variants" and the run's entry apart
    entry = next(v for v in doc["variants"] if v["trace"] == "compile.json.gz")
    context = {k: v for k, v in doc.items() if k != "variants"}
    assert manifest_entry_facts(context, entry) == from_file
    assert manifest_doc_facts(doc, "not-listed.json.gz") is None
    assert manifest_doc_facts(["not", "a", "manifest"], "compile.json.gz") is None
    # malformed facts are left out, never raised on
    broken = {**doc, "gpu": "H100", "shapes": [64, 128]}
    facts = manifest_doc_facts(broken, "compile.json.gz")
    assert "gpu" not in facts and "shapes" not in facts and facts["torch"] == doc["torch"]
    assert manifest_entry_facts(None, None) == {}
