"""The comparability check (analyzer.diff.comparability) on real recorded traces.

tests/data/comparability/h100_hf_geglu_run10: the runner's HF GEGLU forward on an H100 (run 10), variants recorded one
after the other. compile's cuBLAS GEMMs ran within 1.4% of eager's (comparable); liger's identical GEMMs ran 3.5%
slower than eager's (skewed: recorded under other conditions, the CUDA events say liger is as fast as compile).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from analyzer import summarize
from analyzer.diff import diff_runs
from analyzer.diff.comparability import MIN_TOLERANCE_PCT, _weighted_median, spread_pct, spread_range
from analyzer.diff.facts import attach_manifest
from analyzer.readers.load import load_trace
from tests.conftest import DATA, ROOT, TRACES

HF = DATA / "comparability" / "h100_hf_geglu_run10"


def _summary(path):
    t = load_trace(path)
    attach_manifest(t, path)
    return summarize(t)


@pytest.fixture(scope="module")
def hf():
    runs = {v: _summary(HF / f"{v}.json.gz") for v in ("eager", "compile", "liger")}
    return diff_runs(runs["eager"], [runs["compile"], runs["liger"]], labels=["eager", "compile", "liger"])


def test_comparable_pair_rests_on_the_identical_gemms(hf):
    c = hf.candidate("compile").comparability
    assert c.verdict == "comparable"
    assert c.factor == pytest.approx(1.0141, abs=5e-4) and abs(c.factor - 1) < 0.02
    # the three cuBLAS calls per step: gate/up projections (one kernel, 2 calls) and the down projection; the
    # Inductor-fused gelu*mul and eager's two pointwise kernels are not identical and stay out
    assert c.n_control_kernels == 2
    names = {k["name"] for k in c.control_kernels}
    assert names == {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT"}
    assert sorted(k["calls_per_step"][0] for k in c.control_kernels) == [1, 2]
    assert c.control_share == pytest.approx(0.655, abs=0.005)
    assert c.tolerance_pct == MIN_TOLERANCE_PCT  # both runs' own spreads are < 0.1%
    assert c.steps == [2, 2]


def test_skewed_pair_names_the_factor_and_normalises(hf):
    cd = hf.candidate("liger")
    c = cd.comparability
    assert c.verdict == "skewed"
    assert c.factor == pytest.approx(1.0353, abs=5e-4)
    assert "1.035× as long in liger" in c.reason and "beyond the ±3.0% tolerance" in c.reason
    h = cd.headline()
    assert h["comparability"] == "skewed" and h["condition_factor"] == pytest.approx(c.factor)
    # the control group is all GEMMs: their factor normalises liger's GEMMs; the Liger gating kernel (memory-bound,
    # no control kernel of its class) is taken at 1.0, bracketed by the overall factor
    assert c.class_factors == {"compute": pytest.approx(c.factor)}
    eff = cd.normalised["effective_factor"]
    assert 1.0 < eff < c.factor
    assert h["normalised_gpu_time_us_per_step"][1] == pytest.approx(h["gpu_time_us_per_step"][1] / eff)
    assert h["normalised_gpu_time_change_pct"] < h["gpu_time_change_pct"] < 0
    lo, hi = h["changed_kernels_saved_normalised_bounds_us_per_step"]
    assert lo == pytest.approx(h["changed_kernels_saved_normalised_us_per_step"]) and hi > lo
    # the sign agrees with the runner's CUDA events (liger faster than eager)
    ev_b, ev_c = h["cuda_event_time_us_per_step"]
    assert math.copysign(1, h["normalised_gpu_time_change_pct"]) == math.copysign(1, ev_c - ev_b)
    # liger's changed kernel (its GEGLU kernel for eager's gelu + mul) is memory-bound: at 1.0 it saved what was
    # recorded, 34.2 µs; had it slowed like the GEMMs, 36.0 µs (the upper bound)
    assert h["changed_kernels_saved_normalised_us_per_step"] == pytest.approx(h["changed_kernels_saved_us_per_step"])
    assert hi == pytest.approx(36.04, abs=0.05) and lo == pytest.approx(34.21, abs=0.01)


SKEW = DATA / "comparability" / "h100_hf_geglu_skew_round0"


@pytest.fixture(scope="module")
def skew():
    runs = {v: summarize(load_trace(SKEW / f"{v}.json.gz")) for v in ("eager", "compile", "compile_loaded")}
    return diff_runs(
        runs["eager"], [runs["compile"], runs["compile_loaded"]], labels=["eager", "compile", "compile_loaded"]
    ), diff_runs(runs["compile"], [runs["compile_loaded"]], labels=["compile", "compile_loaded"])


def test_same_variant_under_a_concurrent_load_is_skewed(skew):
    """compile recorded twice on an H100, the second time beside another process's 8192³ bf16 matmul loop: its
    cuBLAS GEMMs ran 17-22% longer, its memory-bound Inductor kernel did not (0.99×)."""
    cd = skew[1].candidates[0]
    c = cd.comparability
    assert c.verdict == "skewed" and c.factor == pytest.approx(1.171, abs=0.002)
    assert c.class_factors["compute"] == pytest.approx(1.171, abs=0.002)
    assert c.class_factors["memory"] == pytest.approx(0.990, abs=0.002)
    assert c.control_share > 0.98  # the same program: all but the memsets are identical
    h = cd.headline()
    assert h["gpu_time_change_pct"] > 12  # raw: the same code looks 14% slower
    assert abs(h["normalised_gpu_time_change_pct"]) < 2  # normalised per class: within 2%
    assert cd.spreads()["calls"]["changed_kernels_normalised"] == "tie"  # nothing changed, and the headline says so
    assert cd.lead_lines()[0].startswith("conditions: SKEWED — 3 kernels identical in both runs")


def test_drift_that_hides_a_fusion_is_undone_by_normalising(skew):
    """compile under load vs eager: the raw GPU time calls it a tie (-0.3%); normalised, compile's fusion is back:
    -13.6%, next to -12.6% for the two recorded under the same conditions."""
    clean, loaded = skew[0].candidate("compile"), skew[0].candidate("compile_loaded")
    assert clean.comparability.verdict == "comparable" and loaded.comparability.verdict == "skewed"
    assert loaded.spreads()["calls"]["gpu_time"] == "tie"
    assert loaded.spreads()["calls"]["gpu_time_normalised"] == "faster"
    hl, hc = loaded.headline(), clean.headline()
    assert hl["normalised_gpu_time_change_pct"] == pytest.approx(hc["gpu_time_change_pct"], abs=1.5)
    assert hl["changed_kernels_saved_normalised_us_per_step"] == pytest.approx(
        hc["changed_kernels_saved_us_per_step"], abs=1.0
    )


def test_changed_kernels_plus_control_is_the_kernel_time(hf):
    for cd in hf.candidates:
        c = cd.comparability
        assert cd.changed_kernels_us_per_step[0] + c.control_us_per_step[0] == pytest.approx(cd.base.kernel_time_us)
        assert cd.changed_kernels_us_per_step[1] + c.control_us_per_step[1] == pytest.approx(cd.run.kernel_time_us)


def test_a_run_against_itself_is_comparable_with_factor_one_and_ties():
    s = _summary(HF / "eager.json.gz")
    cd = diff_runs(s, [s], labels=["a", "b"]).candidates[0]
    assert cd.comparability.verdict == "comparable" and cd.comparability.factor == pytest.approx(1.0)
    sp = cd.spreads()
    assert sp["calls"]["gpu_time"] == "tie" and sp["calls"]["changed_kernels"] == "tie"
    assert cd.changed_kernels_saved_us_per_step == pytest.approx(0.0)


def test_same_program_on_other_dataloader_settings_is_comparable():
    """ResNet-50 with DataLoader workers 0 vs 4 (V100, pytorch/kineto): 287 identical kernels, same clocks."""
    d = diff_runs(summarize(load_trace(TRACES["legacy_resnet"])), [summarize(load_trace(TRACES["legacy_resnet_w4"]))])
    c = d.candidates[0].comparability
    assert c.verdict == "comparable" and abs(c.factor - 1) < 0.01
    assert c.n_control_kernels > 200 and c.control_share > 0.8
    assert c.steps == [5, 5] and c.within_run_spread_pct["base"] is not None


def test_unrelated_runs_are_not_checkable_and_say_so():
    d = diff_runs(summarize(load_trace(HF / "eager.json.gz")), [summarize(load_trace(TRACES["legacy_resnet"]))])
    cd = d.candidates[0]
    c = cd.comparability
    assert c.verdict == "not checkable" and c.factor is None
    assert "no kernel ran identically in both runs" in c.reason
    h = cd.headline()
    assert h["normalised_gpu_time_change_pct"] is None and h["changed_kernels_saved_normalised_us_per_step"] is None
    assert cd.lead_lines()[0].startswith("conditions: not checkable — no kernel ran identically")


def test_cli_json_carries_the_comparability_object():
    out = subprocess.run(
        [sys.executable, "-m", "analyzer", "diff", str(HF / "eager.json.gz"), str(HF / "liger.json.gz"), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    doc = json.loads(out.stdout)
    c = doc["candidates"][0]["comparability"]
    assert c["verdict"] == "skewed" and c["factor"] == pytest.approx(1.0353, abs=5e-4)
    assert c["factor_change_pct"] == pytest.approx(3.53, abs=0.05)
    assert {"within_run_spread_pct", "tolerance_pct", "control_kernels", "rule"} <= set(c)
    assert doc["comparability"]["verdict"] == "skewed"  # one candidate: also at top level
    sp = doc["candidates"][0]["spread"]
    assert sp["steps"] == [2, 2] and len(sp["gpu_time_us_per_step"]) == 2
    assert sp["calls"]["cuda_events"] == "faster"  # p10–p90 of 100 CUDA-event steps do not overlap


def test_cli_text_leads_with_conditions_and_changed_kernels():
    out = subprocess.run(
        [sys.executable, "-m", "analyzer", "diff", str(HF / "eager.json.gz"), str(HF / "liger.json.gz")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout.splitlines()
    i = next(n for n, line in enumerate(out) if line.startswith("liger vs eager"))
    assert out[i + 1].startswith("  conditions: SKEWED — 2 kernels identical in both runs")
    assert out[i + 2].startswith("  changed kernels saved") and "at equal conditions" in out[i + 2]


def test_report_shows_the_badge(hf):
    from analyzer.report import report_html, report_markdown

    html = report_html(hf)
    assert '<div class="badge bad"><b>SKEWED</b> GPU conditions of liger vs eager' in html
    assert '<div class="badge ok"><b>COMPARABLE</b> GPU conditions of compile vs eager' in html
    md = report_markdown(hf)
    assert "> **SKEWED** GPU conditions of liger vs eager" in md
    assert "GPU conditions: the kernels identical in both runs" in md


def test_spread_helpers():
    assert spread_range([3.0, 1.0, 2.0]) == (1.0, 3.0)
    assert spread_pct([100.0, 102.0]) == pytest.approx(2.0 / 101.0 * 100)
    v = np.r_[np.full(18, 100.0), 50.0, 500.0]  # 20 steps: one outlier each side does not set the spread
    assert spread_range(v) == (100.0, 100.0)
    assert spread_pct([5.0]) is None
    assert _weighted_median(np.array([1.0, 2.0]), np.array([1.0, 1.0])) == 1.5
    assert _weighted_median(np.array([1.0, 2.0, 9.0]), np.array([1.0, 3.0, 1.0])) == 2.0
