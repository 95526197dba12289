"""analyzer.summary on real traces: steady-state steps, per-step medians, the kernel table and its JSON."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest

from analyzer.schema import names
from analyzer.summary import summarize
from tests.conftest import DATA, SAMPLE_TRACES, TRACES, loaded_trace, sample_trace_paths

HF = SAMPLE_TRACES / "hf_geglu_bf16"
M, D, H, BF16 = 8192, 768, 3072, 2


def _needs(path):
    return pytest.mark.needs_data(path)


def _summary(path):
    return summarize(loaded_trace(path))


@_needs(HF / "eager.json.gz")
def test_hf_eager_per_step():
    s = _summary(HF / "eager.json.gz")
    # 16 profiled steps (the interleaving runner: 8 rounds of 2 per variant), the first dropped as warm-up
    assert s.steps_used == [7, 33, 34, 45, 46, 57, 58, 69, 70, 81, 82, 108, 109, 120, 121]
    p = s.per_step
    assert p["kernels"] == 5 and p["launches"] == 5
    cats = p["by_category"]
    assert cats["gemm"]["count"] == 3 and cats["pointwise"]["count"] == 2
    assert cats["gemm"]["bytes"] == 3 * (M * D + D * H + M * H) * BF16
    assert cats["pointwise"]["bytes"] == 100_663_296 + 150_994_944
    g = loaded_trace(HF / "eager.json.gz").gpu_ops
    per_step_time = g[g["step"].isin(s.steps_used)].groupby("step")["dur_us"].sum()
    assert p["gpu_time_us"] == pytest.approx(float(np.median(per_step_time)))  # the median over the steady steps
    k = s.kernels.set_index("ops")
    assert k.loc["gelu", "bytes_per_call"] == 100_663_296
    assert k.loc["mul", "bytes_per_call"] == 150_994_944
    gate_up = s.kernels[s.kernels["count_per_step"] == 2].iloc[0]  # gate and up share one cuBLAS kernel
    assert gate_up["bytes_per_call"] == 67_633_152 and gate_up["flops_per_call"] == 38_654_705_664
    assert gate_up["achieved_gbps"] == pytest.approx(67_633_152 / gate_up["dur_us_median"] / 1e3)


@_needs(HF / "compile.json.gz")
def test_hf_compile_fuses_gelu_and_mul():
    p = _summary(HF / "compile.json.gz").per_step
    assert p["kernels"] == 4
    assert p["by_category"]["gemm"]["count"] == 3 and p["by_category"]["pointwise"]["count"] == 1


def test_first_step_dropped_when_it_carries_warm_up():
    t = loaded_trace(TRACES["hta_cuda_graph"])  # step 550: 2,247 GPU ops, the rest 1,375
    s = summarize(t)
    assert s.steps_used == [551, 552, 553, 554]
    assert any("dropped as warm-up" in w for w in s.warnings)
    k = t.gpu_ops[(t.gpu_ops["kind"] == "kernel") & t.gpu_ops["step"].isin(s.steps_used)]
    assert s.per_step["kernels"] == int(np.median(k.groupby("step").size()))
    assert s.per_step["gpu_time_us"] == pytest.approx(
        float(np.median(t.gpu_ops[t.gpu_ops["step"].isin(s.steps_used)].groupby("step")["dur_us"].sum()))
    )


def test_single_step_empty_step_and_whole_trace():
    assert _summary(TRACES["h100_bert"]).steps_used == [6]
    amd = _summary(TRACES["hta_amd"])  # steps 1 and 2; step 2 launched nothing
    assert amd.steps_used == [1] and any("no GPU op" in w for w in amd.warnings)
    assert _summary(TRACES["mi300_triton"]).steps_used == [0]  # no step markers: one step, 'whole trace'


@pytest.mark.parametrize("trace", ["h100_bert", "h100_qwen", "mi300_triton", "b200_vllm"])
def test_single_step_totals_add_up(trace):
    t = loaded_trace(TRACES[trace])
    s = summarize(t)
    g = t.gpu_ops[t.gpu_ops["step"].isin(s.steps_used)]
    p = s.per_step
    assert p["kernels"] == int((g["kind"] == "kernel").sum())
    assert p["memops"] == int((g["kind"] != "kernel").sum())
    assert p["gpu_time_us"] == pytest.approx(g["dur_us"].sum())
    assert s.kernels["time_us_per_step"].sum() == pytest.approx(g["dur_us"].sum())
    assert s.kernels["count_per_step"].sum() == len(g)
    for cat, v in p["by_category"].items():
        part = g[g["category"] == cat]
        assert v["count"] == len(part) and v["time_us"] == pytest.approx(part["dur_us"].sum())
        if part["bytes"].isna().any():
            assert v["bytes"] is None or np.isnan(v["bytes"])  # one unknown makes the total unknown, never 0
            assert v["ops_without_bytes"] == part["bytes"].isna().sum()
        else:
            assert v["bytes"] == pytest.approx(part["bytes"].sum())
    assert list(s.kernels.columns) == names("kernel_summary")
    assert s.kernels["time_us_per_step"].is_monotonic_decreasing


def test_unknown_bytes_stay_unknown_in_totals():
    """A training step's foreach optimizer kernels record no tensor shapes (TensorList inputs): their category's
    bytes, and the step's, are unknown, never a sum that leaves them out."""
    from tests.conftest import SAMPLE_TRACES

    s = _summary(SAMPLE_TRACES / "h200_llama_model_train_bf16" / "eager.json.gz")
    unknown = [v for v in s.per_step["by_category"].values() if v["ops_without_bytes"] >= 1]
    assert unknown and all(np.isnan(v["bytes"]) for v in unknown)
    assert np.isnan(s.per_step["bytes"])
    assert any("no byte estimate" in w for w in s.warnings)


@pytest.mark.parametrize("trace", ["h100_bert", "h100_qwen", "hta_cuda_graph", "legacy_resnet", "hta_filter_rank0"])
def test_json_is_plain_and_complete(trace):
    j = _summary(TRACES[trace]).to_json()
    text = orjson.dumps(j).decode()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))  # no NaN/Infinity ever
    json.dumps(j, allow_nan=False)  # and the dict itself holds none
    assert {"gpu", "steps", "per_step", "kernels", "source", "schema", "warnings", "estimates"} <= set(j)
    assert {"kernels", "gpu_time_us", "by_category"} <= set(j["per_step"])
    for v in j["per_step"]["by_category"].values():
        assert {"count", "time_us", "bytes"} <= set(v)
    need = {"name", "category", "library", "ops", "count_per_step", "time_us_per_step", "bytes_per_call"}
    need |= {"flops_per_call", "achieved_gbps"}
    for k in j["kernels"]:
        assert need <= set(k) and isinstance(k["ops"], list)
    assert j["steps"] == len(loaded_trace(TRACES[trace]).steps)


# every trace under tests/data (not the broken-input fixtures, reference CSV/JSON, manifests, ncu files or the
# gemm-reread step's calls.json, its list of launched GEMM problems)
_FLAG_TRACES = sorted(
    p
    for p in DATA.rglob("*")
    if p.name.endswith((".json", ".json.gz"))
    and p.name != "calls.json"
    and not any(x in p.as_posix() for x in ("/broken/", "reference", "manifest", ".ncu.", "_expected"))
)


@pytest.mark.parametrize(
    "path",
    _FLAG_TRACES + [p for p in sample_trace_paths() if not p.name.endswith(".ncu.json")],
    ids=lambda p: p.parent.name + "/" + p.name.split(".json")[0],
)
@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_no_rate_above_the_hbm_peak_goes_unflagged(path):
    """An estimated rate above the GPU's HBM peak is physically impossible for DRAM traffic alone; every
    such kernel row carries a flag that says so (and no other row does)."""
    s = summarize(loaded_trace(path))
    k = s.kernels
    gpu = s.trace.gpu
    flagged = k["flags"].map(len) > 0
    if gpu is None:
        assert not flagged.any()
        return
    above = (k["achieved_gbps"] > gpu.hbm_gbps) & k["pct_peak_bw"].notna()
    assert (flagged == above).all(), k.loc[flagged != above, ["name", "achieved_gbps", "flags"]]
    for f in k.loc[above, "flags"]:
        assert f[0].startswith("above HBM peak: ") and "likely served by L2" in f[0]
    js = s.to_json()["kernels"]
    assert [bool(r["flags"]) for r in js] == flagged.tolist()


@_needs(SAMPLE_TRACES / "geglu_train_bf16" / "eager.json.gz")
def test_training_elementwise_kernels_above_the_h100_peak_are_flagged():
    # eager training on the H100 (3,350 GB/s): the small [8192,768]/[8192,3072] backward elementwise kernels run at
    # ~3,600-3,750 GB/s by the no-reuse estimate: part of their inputs were still in the 50 MiB L2
    s = _summary(SAMPLE_TRACES / "geglu_train_bf16" / "eager.json.gz")
    k = s.kernels
    hot = k[k["flags"].map(len) > 0]
    assert len(hot) >= 2 and (hot["category"] == "pointwise").all()
    assert (hot["achieved_gbps"] > 3350).all() and (hot["pct_peak_bw"] > 100).all()


@_needs(SAMPLE_TRACES / "geglu_train_bf16" / "compile.json.gz")
def test_diff_rows_carry_the_same_flags():
    from analyzer.cost import hbm_flags
    from analyzer.diff import diff_runs

    base = _summary(SAMPLE_TRACES / "geglu_train_bf16" / "eager.json.gz")
    cand = _summary(SAMPLE_TRACES / "geglu_train_bf16" / "compile.json.gz")
    cd = diff_runs(base, [cand]).candidates[0]
    rows = [*cd.fusions, *cd.swaps, *cd.kernel_choices]
    assert rows
    peak = base.trace.gpu.hbm_gbps
    for r in rows:
        assert r.base_flags == hbm_flags([r.base_gbps], peak)[0]
        assert r.candidate_flags == hbm_flags([r.candidate_gbps], peak)[0]
        assert bool(r.candidate_flags) == (r.candidate_gbps > peak)
        assert r.to_json()["candidate_flags"] == r.candidate_flags
