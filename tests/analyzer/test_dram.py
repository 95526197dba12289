"""The L2-aware DRAM model (analyzer.dram) pinned on Nsight Compute counters measured in sequence.

Measurements: `tests/data/ncu_warm_h100_round0/` — ncu `--cache-control none --clock-control none` over 3
steady-state forwards in a row on an H100 80GB HBM3 (tests/data/ncu_warm_h100_round0), the same code and kernels as the traces in
`sample_traces/hf_geglu_bf16` and `sample_traces/plain_8192tok_bf16`. The model is run on those traces' steady step
and compared per kernel (launch order) and per step. docs/COST_MODEL.md ("DRAM model") lists the misses below and
why; a change to the model that moves them fails here.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyzer import dram, load_trace, summarize
from analyzer.dram import device_of, hit_fraction, predict_step
from analyzer.gpus import SPECS
from kernels.runner import ncu
from tests.conftest import data_params

ROOT = Path(__file__).resolve().parents[2]
WARM = ROOT / "tests" / "data" / "ncu_warm_h100_round0"
RUNS = [("hf_geglu_bf16", "geglu", v) for v in ("eager", "compile", "liger", "fuselens-gating", "fuselens")] + [
    ("plain_8192tok_bf16", "plain", v) for v in ("eager", "compile", "fuselens")
]
# (case, variant, kernel index) -> the documented r+w error, %: kernels outside ±10% and why (COST_MODEL.md)
MISSES = {
    # the step's last GEMM also writes back the dirty tail the kernel before it left in L2 (10-16 MB); its operand
    # re-reads (the 4.7 MB weight read in each of its 2 waves, partly found in L2) are counted
    ("hf_geglu_bf16", "eager", 4): -15.6,
    ("hf_geglu_bf16", "compile", 3): -17.6,
    ("hf_geglu_bf16", "liger", 3): -14.4,
    ("hf_geglu_bf16", "fuselens-gating", 3): -19.6,
    ("hf_geglu_bf16", "fuselens", 1): -16.0,
    ("plain_8192tok_bf16", "eager", 2): -18.8,
    ("plain_8192tok_bf16", "compile", 2): -17.6,
    ("plain_8192tok_bf16", "fuselens", 1): -19.7,
    # the step's first GEMM leaves 11-18 MB of its output dirty for the next kernel to write back
    ("hf_geglu_bf16", "eager", 0): 16.5,
    ("hf_geglu_bf16", "liger", 0): 15.6,
    ("plain_8192tok_bf16", "eager", 0): 16.4,
    ("plain_8192tok_bf16", "fuselens", 0): 26.4,
    # ... and the kernel after a pointwise one inherits its tail; cuBLAS reads 8.4 MB more than its operands
    ("hf_geglu_bf16", "eager", 2): -13.2,
    # Inductor's in-place GELU rewrites fc1's output while part of it is still dirty: 8 MB of writes merge
    ("plain_8192tok_bf16", "compile", 1): 12.2,
}


def _run(case: str, prefix: str, variant: str):
    trace = load_trace(SAMPLES / case / f"{variant}.json.gz")
    s = summarize(trace)
    step = s.per_step["dram_step"]
    g = trace.gpu_ops[trace.gpu_ops["step"] == step].sort_values("ts_us")
    pred = predict_step(g, trace.gpu, device_of(trace))
    kernels = (g["kind"] == "kernel").to_numpy()
    per_kernel, block = ncu.warm_summary(ncu.parse_csv((WARM / f"{prefix}_{variant}_none.csv").read_text()), 3)
    return g[kernels], pred[kernels], per_kernel, block, s


SAMPLES = ROOT / "sample_traces"


@pytest.mark.parametrize("case, prefix, variant", RUNS, ids=[f"{c}/{v}" for c, _, v in RUNS])
def test_step_dram_within_10pct_of_warm_counters(case, prefix, variant):
    g, pred, meas, block, s = _run(case, prefix, variant)
    assert [str(n) for n in g["name"]][: len(meas)] and len(meas) == len(g)  # same kernels, launch order
    measured = block["step_dram_bytes_read"] + block["step_dram_bytes_write"]
    predicted = s.per_step["dram_bytes"]
    assert predicted == pytest.approx(float(pred["dram_bytes"].sum()) + 4 * s.per_step["memops"], abs=64)
    assert abs(predicted / measured - 1) <= 0.08, (predicted, measured)  # -7.0 .. -0.6% (GEMM re-reads counted)
    # every dirty byte of a steady step is written back once: writes are the logical writes, within 7%
    assert abs(s.per_step["dram_write_bytes"] / block["step_dram_bytes_write"] - 1) <= 0.07


@pytest.mark.parametrize("case, prefix, variant", RUNS, ids=[f"{c}/{v}" for c, _, v in RUNS])
def test_kernels_within_10pct_or_a_documented_miss(case, prefix, variant):
    g, pred, meas, _, _ = _run(case, prefix, variant)
    for i, (p, m) in enumerate(zip(pred["dram_bytes"], meas, strict=True)):
        err = 100 * (p / (m["warm_dram_bytes_read"] + m["warm_dram_bytes_write"]) - 1)
        doc = MISSES.get((case, variant, i))
        if doc is None:
            assert abs(err) <= 10, (i, g["name"].iloc[i], err)
        else:
            assert abs(err - doc) <= 2, (i, g["name"].iloc[i], err, doc)


def test_last_first_walk_reads_what_the_gemm_just_wrote():
    """FuseLens' gating kernel walks last-first: it finds the up projection's tail in L2 and leaves h's head there
    for the down GEMM. Measured: the gating kernel reads 10.4 MB less than its 100.7 MB of inputs, the down GEMM
    11.8 MB less than compile's; the model, from the cache size and launch order alone: 12.1 MB each."""
    _, pred, meas, _, _ = _run("hf_geglu_bf16", "geglu", "fuselens-gating")
    _, pred_c, meas_c, _, _ = _run("hf_geglu_bf16", "geglu", "compile")
    gating_hits = 2 * 50_331_648 - meas[2]["warm_dram_bytes_read"]
    down_saved = meas_c[3]["warm_dram_bytes_read"] - meas[3]["warm_dram_bytes_read"]
    assert 8e6 < gating_hits < 14e6 and 8e6 < down_saved < 14e6
    assert abs(pred["l2_hit_bytes"].iloc[2] - gating_hits) < 2.5e6
    assert abs(pred["l2_hit_bytes"].iloc[3] - down_saved) < 2.5e6
    # in-order readers of a 50 MB tensor written by the kernel before find (almost) nothing: measured < 2 MB
    assert float(pred_c["l2_hit_bytes"].sum()) == 0.0
    assert meas_c[2]["warm_dram_bytes_read"] > 0.98 * 2 * 50_331_648


def test_a_bigger_cache_never_predicts_more_dram():
    trace = load_trace(SAMPLES / "hf_geglu_bf16" / "fuselens-gating.json.gz")
    g = trace.gpu_ops[trace.gpu_ops["step"] == summarize(trace).per_step["dram_step"]].sort_values("ts_us")
    h100 = predict_step(g, SPECS["H100 SXM5 80GB"], device_of(trace))
    h200 = predict_step(g, SPECS["H200 SXM 141GB"], device_of(trace))
    assert (h200["dram_bytes"] <= h100["dram_bytes"] + 1e-6).all()
    assert h200["l2_hit_bytes"].sum() > h100["l2_hit_bytes"].sum()  # 60 MiB keeps more of the reversed reads


def test_hit_fraction_is_the_share_of_bytes_under_the_cache_size():
    a = np.array([10.0, 60.0, 10.0, 60.0, 40.0, 40.0])
    b = np.array([100.0, 100.0, -100.0, -100.0, 0.0, 0.0])
    got = hit_fraction(a, b, 50.0)
    f = np.linspace(0, 1, 200_001)
    want = [np.mean(x + y * f < 50.0) for x, y in zip(a, b, strict=True)]
    assert got == pytest.approx(want, abs=1e-4)
    assert list(hit_fraction(np.array([60.0]), np.array([0.0]), 50.0)) == [0.0]


def test_unknown_gpu_or_bytes_is_nan_with_a_reason():
    trace = load_trace(SAMPLES / "hf_geglu_bf16" / "eager.json.gz")
    g = trace.gpu_ops[trace.gpu_ops["step"] == summarize(trace).per_step["dram_step"]]
    out = predict_step(g, None)
    assert out["dram_bytes"].isna().all() and out["dram_basis"].str.startswith("unknown: GPU").all()
    nobytes = g.assign(bytes=np.nan)
    out = predict_step(nobytes, trace.gpu)
    assert out["dram_bytes"].isna().all() and out["dram_basis"].str.contains("no byte estimate").all()


def test_summary_json_gives_dram_bytes_for_every_kernel_with_shapes():
    for v in ("eager", "compile", "liger", "fuselens-gating", "fuselens"):
        doc = summarize(load_trace(SAMPLES / "hf_geglu_bf16" / f"{v}.json.gz")).to_json()
        for k in doc["kernels"]:
            assert k["dram_bytes_per_call"] is not None and k["dram_basis"].startswith("predicted"), (v, k["name"])
        assert doc["per_step"]["dram_bytes"] > 0 and "LOGICAL" in doc["dram_model"]


def _warm_sets():
    """Every sample case whose runner recorded in-sequence ncu counters (`warm` in <variant>.ncu.json)."""
    out = []
    for doc in sorted(SAMPLES.glob("*/*.ncu.json")):
        if '"warm"' in doc.read_text():
            out.append((doc.parent.name, doc.name.removesuffix(".ncu.json")))
    return out


def _structural_miss(i: int, n: int, names: list[str], err: float, gemm: bool = True) -> bool:
    """The documented misses (COST_MODEL.md, "DRAM model"), by where a kernel sits: the step's last kernel writes
    back the dirty tail its predecessor left (under-predicted by up to 25%); the first leaves its own tail to the
    next (over-predicted by up to 32%, H200) unless its tile order re-reads an operand (then down to -12%); a GEMM in the
    middle inherits a tail or re-reads operands (down to -20%); an in-place Inductor GELU merges writes (to +15%)."""
    if i == n - 1:
        return -25 <= err <= 0
    if i == 0:
        return -12 <= err <= 35
    if "triton_poi_" in names[i]:
        return 0 <= err <= 15
    return gemm and -20 <= err <= 0


@pytest.mark.parametrize(
    "case, variant", data_params(_warm_sets(), "no sample_traces/*/*.ncu.json with warm counters", 2)
)
def test_recorded_warm_sets(case, variant):
    """Every set the runner recorded with in-sequence counters (H100 and H200): step within ±8% (the issue asks
    ±10%; -7.0 .. +3.7% with GEMM operand re-reads counted, docs/COST_MODEL.md); for the MLP cases the issue names
    (HF GEGLU, plain), each kernel within ±10% or a documented miss."""
    import json

    trace = load_trace(SAMPLES / case / f"{variant}.json.gz")
    s = summarize(trace)
    doc = json.loads((SAMPLES / case / f"{variant}.ncu.json").read_text())
    block = doc["warm"]
    assert block.get("max_replay_passes") in (None, 1)  # one pass: no memory save/restore between kernels
    measured = block["step_dram_bytes_read"] + block["step_dram_bytes_write"]
    err = 100 * (s.per_step["dram_bytes"] / measured - 1)
    assert abs(err) <= 8, (case, variant, err)
    if block.get("l2_cache_bytes") and trace.gpu is not None:
        assert trace.gpu.cache_bytes == block["l2_cache_bytes"]  # the peak table's L2 is the device's own
    if not any(x in case for x in ("hf_geglu", "plain_")):
        return  # other sets (the Gemma decoder layer): the step only; per kernel see COST_MODEL.md
    g = trace.gpu_ops[trace.gpu_ops["step"] == s.per_step["dram_step"]].sort_values("ts_us")
    g = g[g["kind"] == "kernel"]
    pred = predict_step(g, trace.gpu, device_of(trace))["dram_bytes"].to_numpy()
    kernels = block.get("kernels") or doc["kernels"]
    names = [str(x) for x in g["name"]]
    gemm = (g["category"] == "gemm").tolist()
    assert len(kernels) == len(g)
    for i, (p, m) in enumerate(zip(pred, kernels, strict=True)):
        err = 100 * (p / (m["warm_dram_bytes_read"] + m["warm_dram_bytes_write"]) - 1)
        assert abs(err) <= 10 or _structural_miss(i, len(g), names, err, gemm[i]), (i, names[i], err)


def test_structural_misses_cover_the_round0_misses():
    for (case, variant, i), err in MISSES.items():
        trace = load_trace(SAMPLES / case / f"{variant}.json.gz")
        g = trace.gpu_ops[trace.gpu_ops["kind"] == "kernel"]
        n = int((g["step"] == g["step"].iloc[-1]).sum())
        names = [str(x) for x in g[g["step"] == g["step"].iloc[-1]].sort_values("ts_us")["name"]]
        assert _structural_miss(i, n, names, err), (case, variant, i, err)


@pytest.mark.parametrize(
    "case, variants",
    [
        ("hf_geglu_bf16", ("compile", "liger", "fuselens-gating", "fuselens")),
        ("h200_hf_geglu_bf16", ("compile", "liger", "fuselens-gating", "fuselens")),
        ("plain_8192tok_h8192_bf16", ("fuselens",)),
        ("h200_plain_8192tok_h8192_bf16", ("fuselens",)),
    ],
)
def test_predicted_saving_matches_the_measured_one(case, variants):
    """What fusion buys in DRAM, eager → candidate, predicted vs measured in sequence (the Compare headline):
    within 10% of the measured saving (H100 eager → compile: 100.7 predicted, 94.6 measured, 100.7 logical; the
    last-first gating kernel: 124.8 vs 123.1, more than its 100.7 logical)."""
    from analyzer import diff_runs
    from analyzer.runmeta import attach_manifest

    def run(v):
        t = load_trace(SAMPLES / case / f"{v}.json.gz")
        attach_manifest(t, SAMPLES / case / f"{v}.json.gz")
        return summarize(t)

    d = diff_runs(run("eager"), [run(v) for v in variants])
    for cd in d.candidates:
        t = cd.traffic_avoided()
        assert t["measured_dram_bytes_per_step"] > 50e6, cd.label
        assert abs(t["predicted_dram_bytes_per_step"] / t["measured_dram_bytes_per_step"] - 1) <= 0.10, (cd.label, t)
        assert "DRAM measured (Nsight Compute, in sequence)" in t["text"]


def _probe(folder: str):
    """Held-out GEMMs (tests/data/<folder>): trace kernels in launch order with ncu's flushed counters."""
    import json

    d = ROOT / "tests" / "data" / folder
    t = load_trace(d / "gemms.json.gz")
    meas = json.loads((d / "gemms.ncu.json").read_text())["kernels"]
    g = t.gpu_ops[(t.gpu_ops["kind"] == "kernel") & (t.gpu_ops["category"] == "gemm")].sort_values("ts_us")
    assert [str(x) for x in g["name"]] == [k["kernel"] for k in meas]
    return t, g, meas


# folder -> (FuseLens |error| at most, cuBLAS kernels within 10% at least, cuBLAS median |error| at most)
HELD_OUT = {"gemm_reread_h100": (0.05, 9, 0.13)}


@pytest.mark.parametrize("folder", sorted(HELD_OUT))
def test_gemm_rereads_at_held_out_shapes(folder):
    """DRAM bytes a GEMM reads, caches flushed (its own re-reads, nothing from kernels before), at 14 shapes no
    sample set holds (H100, GPU round s5-A). Operands counted once miss by -1 to -82%. With the re-read rule: the
    FuseLens GEMM + bias + GELU, whose tile walk is known (grouped, 128 x 256), within 5% at all 4 of its shapes
    (-3.4 .. -0.3%); cuBLAS, whose raster is taken from CUTLASS's heuristic, never further off than operands once,
    and within 10% at 9 of 28 (median |error| 12% against 51%)."""
    from analyzer.dram import operand_rereads
    from analyzer.opinfo.tiles import Schedule, problem, schedule

    own_tol, within, median = HELD_OUT[folder]
    t, g, meas = _probe(folder)
    errs, once = [], []
    for r, m in zip(g.itertuples(), meas, strict=True):
        gm = problem(r.op_name, r.input_dims, r.input_types)
        sc = schedule(r.name, r.grid, r.block, r.shared_memory_bytes, r.registers_per_thread, gm, device_of(t))
        assert isinstance(sc, Schedule), (r.name, sc)
        operands = (gm.m + gm.n) * gm.k * 2
        got = m["dram__bytes_read.sum"]
        rule = operands + operand_rereads(sc, t.gpu.cache_bytes, t.gpu.l2_partitions)
        e, e0 = rule / got - 1, operands / got - 1
        assert abs(e) <= abs(e0) + 0.005, (r.name, gm.dims(), e, e0)
        if r.name.startswith("fuselens"):
            assert abs(e) <= own_tol, (gm.dims(), e)
        else:
            errs.append(abs(e))
            once.append(abs(e0))
    assert len(errs) == 28 and sum(x <= 0.10 for x in errs) >= within
    assert np.median(errs) <= median and np.median(once) >= 0.45


def test_recorded_gemm_rereads_and_what_they_rest_on():
    """The plain MLP at h 8192, fuselens (H100): cuBLAS's down projection (4 x 64 tiles of 192 x 128, 2 waves of
    132) reads its 12.6 MB weight once per wave: 159.4 MB predicted, 163.6 measured (146.8 counted once). The
    FuseLens GEMM re-uses a weight panel a group (2 waves, ~33 MB touched) later: found if the partition serving the
    re-reading SM still holds it, between half the L2 and all of it, so partly: 20 MB re-read predicted, 35.8
    measured (H200, 60 MiB: 3.8 and 18.6). The basis says what each figure rests on."""
    trace = load_trace(SAMPLES / "plain_8192tok_h8192_bf16" / "fuselens.json.gz")
    s = summarize(trace)
    g = trace.gpu_ops[trace.gpu_ops["step"] == s.per_step["dram_step"]].sort_values("ts_us")

    p = predict_step(g, trace.gpu, device_of(trace))
    k = (g["kind"] == "kernel").to_numpy()
    reads, basis = p["dram_read_bytes"].to_numpy()[k], p["dram_basis"].to_numpy()[k]
    assert reads[1] == pytest.approx(146.8e6 + 12.58e6, rel=0.005)
    assert 10e6 < reads[0] - 25.17e6 < 30e6
    assert "re-read by its tile walk (tile 192x128 (N x M) from the name, CUTLASS raster along N" in basis[1]
    assert "persistent grid of 132" in basis[1] and "2 L2 partitions" in basis[1]
    assert "Triton grouped order (GROUP_M 8)" in basis[0]


def test_distinct_rows_keep_kernels_apart_past_int64_keys():
    """Five key columns of 2^16 distinct values each multiply past int64: the key is re-coded before it wraps, so
    a kernel that differs from another only by its name keeps its own row (a wrapped key shifted the name out)."""
    m = 1 << 16
    idx = np.arange(m)

    def col(values):
        return pd.Series(list(values), dtype=object)

    def again(values):  # the last row repeats row 0's value
        return np.append(values, values[0])

    df = pd.DataFrame(
        {
            "kind": col(["kernel"] * (m + 1)),
            "name": col([f"k{i}" for i in idx] + ["another_kernel"]),
            "op_name": col(again(np.array([f"op{i}" for i in idx], dtype=object))),
            "bytes": again(idx.astype(float)),
            "grid": col(again(np.array([f"{i},1,1" for i in idx], dtype=object))),
            "block": col(again(np.array([f"{i},2,1" for i in idx], dtype=object))),
            "shared_memory_bytes": again(idx.astype(float)),
            "category": col(["other"] * (m + 1)),
        }
    )
    codes, rows = dram._distinct_rows(df)
    assert codes[0] != codes[-1]
    assert len(rows) == m + 1
