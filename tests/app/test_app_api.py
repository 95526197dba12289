"""analyzer.api, the façade the dashboard imports, and the figures the pages used to compute themselves (the step a
Timeline shows, a step's op counts, Compare's measured-bytes step and ratios), on real H100 recordings."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analyzer import api
from analyzer.dram import device_of
from analyzer.figures import kernels_table as kt
from analyzer.figures import timeline as tl
from tests.conftest import SAMPLE_TRACES, TRACES

HF = SAMPLE_TRACES / "hf_geglu_bf16"


@pytest.fixture(scope="module")
def eager():
    trace = api.load_trace(HF / "eager.json.gz")
    return trace, api.summarize(trace)


def test_every_public_name_resolves_to_its_defining_module():
    """The façade only re-exports: each name is the very object its module defines (a move inside the analyzer
    changes one import in api.py, never a caller)."""
    from analyzer.diff import diff_runs
    from analyzer.opportunities import plan_opportunities
    from analyzer.pipeline import load_summary, load_trace
    from analyzer.summary import summarize

    missing = [n for n in api.__all__ if not hasattr(api, n)]
    assert not missing, missing
    assert api.load_trace is load_trace and api.load_summary is load_summary and api.summarize is summarize
    assert api.diff_runs is diff_runs and api.opportunities is plan_opportunities


def test_the_pipeline_through_the_facade_matches_the_cli_objects(eager):
    """load_summary (the cached path the dashboard takes) and summarize(load_trace) agree; diff and plan run."""
    trace, summary = eager
    cached = api.load_summary(HF / "eager.json.gz")
    assert cached.to_json() == summary.to_json()
    fused = api.summarize(api.load_trace(HF / "compile.json.gz"))
    d = api.diff_runs(summary, [fused], labels=["eager", "compile"])
    assert d.candidate("compile").hbm_bytes_avoided_per_step > 0
    plan = api.opportunities(summary)
    assert isinstance(plan, api.Plan) and plan.opportunities


def test_representative_step_is_the_lower_median_gpu_span_of_the_steady_steps(eager):
    trace, summary = eager
    used = list(summary.steps_used)
    assert len(used) == 15 and len(trace.steps) == 16  # the first recorded step is warm-up
    span = dict(zip(trace.steps["step"].astype(int), trace.steps["gpu_span_us"], strict=True))
    by_span = sorted(used, key=lambda s: (span[s], used.index(s)))  # plain-Python reference
    pick = api.pick_step(trace.steps, used, api.REPRESENTATIVE)
    assert pick == by_span[(len(used) - 1) // 2]
    assert pick != api.recorded_steps(trace.steps)[0]


def test_a_step_position_is_the_kth_recorded_step_and_stops_at_the_last(eager):
    trace, summary = eager
    recorded = api.recorded_steps(trace.steps)
    assert recorded == [int(s) for s in trace.steps["step"]]
    assert [api.pick_step(trace.steps, summary.steps_used, k) for k in (0, 3, 15)] == [
        recorded[0],
        recorded[3],
        recorded[15],
    ]
    assert api.pick_step(trace.steps, summary.steps_used, 99) == recorded[-1]


def test_an_even_count_and_a_step_without_span():
    """Lower median of an even count; a step with no span (NaN) sorts last instead of winning."""
    steps = pd.DataFrame({"step": [1, 2, 3, 4], "gpu_span_us": [40.0, 10.0, np.nan, 20.0]})
    assert api.pick_step(steps, [1, 2, 3, 4], api.REPRESENTATIVE) == 4  # 10, 20 | 40, NaN → 20
    assert api.pick_step(steps, [], api.REPRESENTATIVE) == 4  # no steady list: every recorded step
    assert api.pick_step(steps.drop(columns="gpu_span_us"), [1, 2, 3], api.REPRESENTATIVE) == 2  # middle by order


def test_a_trace_without_steps_shows_step_zero():
    empty = pd.DataFrame({"step": pd.Series([], dtype="int64")})
    assert api.recorded_steps(empty) == [0]
    assert api.pick_step(empty, [], api.REPRESENTATIVE) == 0 and api.pick_step(empty, [], 5) == 0


@pytest.mark.parametrize("name", ["h100_qwen", "hta_alexnet"])
def test_step_op_counts_against_the_step_table(name):
    """A step's op counts on public traces against a plain count of the step's GPU_OPS rows; busy = their summed
    durations, at least the union STEPS.gpu_busy_us (overlapping streams count twice here, once there)."""
    trace = api.load_trace(TRACES[name])
    step = api.pick_step(trace.steps, api.summarize(trace).steps_used, api.REPRESENTATIVE)
    view = tl.step_view(name, trace.gpu_ops, step)
    n = api.step_op_counts(view.gpu)
    row = trace.steps.set_index("step").loc[step]
    g = trace.gpu_ops[trace.gpu_ops["step"] == step]
    assert n["gpu_ops"] == len(g) and n["kernels"] == int((g["kind"] == "kernel").sum()) > 0
    assert n["busy_us"] == pytest.approx(float(g["dur_us"].sum()))
    assert n["busy_us"] >= float(row["gpu_busy_us"]) - 1e-6
    assert n["streams"] == g["stream"].nunique() >= 1
    assert api.step_op_counts(g.iloc[:0]) == {"gpu_ops": 0, "kernels": 0, "busy_us": 0.0, "streams": 0}
    # the Timeline's zoom slider ends where the drawing does: the last op's end since t = 0
    assert view.extent_us == pytest.approx(float(g["end_us"].max() - g["ts_us"].min())) == pytest.approx(view.span_us)
    assert tl.step_view(name, trace.gpu_ops.iloc[:0], step).extent_us == 0.0


def test_measured_bytes_of_a_run_are_its_last_steady_step_against_the_ncu_file(eager):
    """Compare's 'measured vs predicted' rows: the last steady-state step's kernels against the runner's ncu file,
    ratios from the totals (NaN where nothing divides)."""
    import orjson

    trace, summary = eager
    ncu = orjson.loads((HF / "eager.ncu.json").read_bytes())
    table, tot = kt.run_measured_bytes(trace, summary.steps_used, ncu)
    assert kt.measured_step(trace.steps, summary.steps_used) == summary.steps_used[-1]
    k = trace.kernels
    ref_table, ref = kt.measured_bytes(k[k["step"] == summary.steps_used[-1]], ncu, trace.gpu, device_of(trace))
    assert tot == ref  # the same step, the same figures as measured_bytes on it
    assert tot["predicted_dram_bytes"] > 0
    assert tot["measured / estimate"] == pytest.approx(tot["measured_bytes"] / tot["estimated_bytes"])
    assert 0.5 < tot["measured / estimate"] < 1.5  # the H100's DRAM counters against the logical estimate
    assert tot["measured / predicted"] == pytest.approx(tot["measured_bytes"] / tot["predicted_dram_bytes"])
    assert len(table) == len(ref_table)
    assert kt.measured_step(trace.steps, []) == int(trace.steps["step"].iloc[0])  # no steady steps: the first


def test_measured_ratios_are_nan_with_nothing_to_divide_by(eager):
    trace, summary = eager
    _, tot = kt.run_measured_bytes(trace, summary.steps_used, {"kernels": []})
    assert tot["kernels_measured"] == 0 and tot["measured_bytes"] == 0.0
    assert tot["measured / estimate"] == 0.0  # 0 measured over a real estimate
    k = trace.kernels
    _, none = kt.measured_bytes(k.iloc[:0], {"kernels": []})
    assert math.isnan(none["measured / estimate"]) and math.isnan(none["measured / predicted"])


def test_cache_use_is_what_the_cache_holds_within_its_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSELENS_CACHE_DIR", str(tmp_path))
    used0, bound = api.cache_use()
    api.load_summary(HF / "compile.json.gz")  # analysed once: its tables land in the cache
    used1, _ = api.cache_use()
    assert used0 == 0 and used1 > 0 and bound > used1


def test_plan_shares_on_a_real_plan(eager):
    """The Fusion plan page's and the CLI's shares of the step, from the plan's own times."""
    _, summary = eager
    j = api.opportunities(summary).to_json()
    sh = api.plan_shares(j)
    now, pred = j["gpu_busy_us_per_step"], j["predicted_gpu_busy_us_per_step"]
    assert now > pred > 0 and sh["saved_us"] == now - pred
    assert sh["change_pct"] == pytest.approx((pred - now) / now * 100) and sh["change_pct"] < 0
    assert set(sh["opportunities"]) == {o["id"] for o in j["opportunities"]}
    for o in j["opportunities"]:
        got = sh["opportunities"][o["id"]]
        assert got["pct_of_step"] == pytest.approx(100 * o["predicted_saved_us_per_step"] / now)
        assert got["kernels_replaced"] == o["n_kernels"] * o["count_per_step"] >= 2
    by = j["predicted_gpu_busy_us_per_step_by_taker"]
    assert [t["tool"] for t in sh["takers"]] == sorted(by, key=by.get)
    assert all(t["saved_us"] == now - t["busy_us"] >= 0 for t in sh["takers"])
    empty = api.plan_shares(j | {"gpu_busy_us_per_step": 0.0, "predicted_gpu_busy_us_per_step": 0.0})
    assert math.isnan(empty["change_pct"]) and all(math.isnan(t["pct_of_step"]) for t in empty["takers"])


def test_accounting_shares_of_the_baseline_time(eager):
    """Compare's 'where the baseline's GPU time went' shares: each bucket's time over the total, summing to 1."""
    _, summary = eager
    fused = api.summarize(api.load_trace(HF / "compile.json.gz"))
    acct = api.diff_runs(summary, [fused], labels=["eager", "compile"]).candidate("compile").accounting
    shares = acct.base_shares()
    total = sum(acct.base_time_us.values())
    assert list(shares) == ["matched", "fused", "replaced", "removed", "unexplained"]
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(shares[b] == pytest.approx(acct.base_time_us[b] / total) for b in shares)
    assert shares["fused"] > 0  # Inductor fused the GEGLU's elementwise kernels
