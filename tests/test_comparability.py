"""The comparability check (analyzer.diff.comparability) on real recorded traces (tests/data/ATTRIBUTION.md).

- h100_hf_geglu_run10: the runner's HF GEGLU forward on an H100 (run 10, variants recorded one after the other).
- h100_hf_geglu_skew_round1: the interleaving runner, eager + compile recorded normally (normal/) and again while
  another process ran 8192³ bf16 matmuls (loaded/), with the runner's CUDA events and clock/power record.
- h100_hf_geglu_skew_round0: the same forward recorded normally and under load by an ad hoc script.
"""

from __future__ import annotations

import json
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
SKEW = DATA / "comparability" / "h100_hf_geglu_skew_round1"
SKEW0 = DATA / "comparability" / "h100_hf_geglu_skew_round0"
UP_DOWN = {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT"}


def _summary(path):
    t = load_trace(path)
    attach_manifest(t, path)
    return summarize(t)


@pytest.fixture(scope="module")
def hf():
    runs = {v: _summary(HF / f"{v}.json.gz") for v in ("eager", "compile", "liger")}
    return diff_runs(runs["eager"], [runs["compile"], runs["liger"]], labels=["eager", "compile", "liger"])


@pytest.fixture(scope="module")
def skew():
    """eager (normal) vs compile (normal), eager (under load), compile (under load): the runner, interleaved."""
    runs = [
        _summary(SKEW / "normal" / "eager.json.gz"),
        _summary(SKEW / "normal" / "compile.json.gz"),
        _summary(SKEW / "loaded" / "eager.json.gz"),
        _summary(SKEW / "loaded" / "compile.json.gz"),
    ]
    return diff_runs(runs[0], runs[1:], labels=["eager", "compile", "eager_loaded", "compile_loaded"])


def test_comparable_pair_rests_on_the_identical_gemms(hf):
    c = hf.candidate("compile").comparability
    assert c.verdict == "comparable"
    # the three cuBLAS calls per step: gate and up projections (one kernel, 2 calls) and the down projection; the
    # Inductor-fused gelu*mul and eager's two pointwise kernels are not identical and stay out
    assert c.n_control_kernels == 2 and c.n_control_calls == 3
    assert {k["name"] for k in c.control_kernels} == UP_DOWN
    assert sorted(k["calls_per_step"][0] for k in c.control_kernels) == [1, 2]
    assert c.factor == pytest.approx(0.9911, abs=5e-4)  # the down projection's call: the median of 3 calls
    assert c.control_share == pytest.approx(0.655, abs=0.005)
    assert c.tolerance_pct == MIN_TOLERANCE_PCT  # both runs' own spreads are < 0.1%
    assert c.steps == [2, 2]


def test_the_median_runs_over_calls_not_kernels(skew):
    """Interleaved, same GPU conditions: the up projection runs 5.8% longer in compile, where it follows the gate GEMM
    instead of eager's GELU kernel; per kernel that is a 1.023 ratio for the gate/up kernel, per call the median is
    the gate and down projections' ~0.99."""
    c = skew.candidate("compile").comparability
    assert c.verdict == "comparable"
    ratios = {k["name"]: k["ratio"] for k in c.control_kernels}
    assert ratios["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"] == pytest.approx(1.0233, abs=5e-4)
    assert c.class_ratio_ranges["compute"][1] == pytest.approx(1.0578, abs=5e-4)  # the up projection's call
    assert c.factor == pytest.approx(0.995, abs=5e-4) and abs(c.factor - 1) < 0.02


def test_skewed_pair_names_the_factor_and_its_normalised_sign_agrees_with_cuda_events(skew):
    """compile recorded under a concurrent matmul load vs eager recorded normally: the raw GPU time calls it a tie
    (-0.3%), the normalised one -8.0%, as the runner's CUDA events (-8.0%: eager normal vs compile loaded)."""
    cd = skew.candidate("compile_loaded")
    c = cd.comparability
    assert c.verdict == "skewed"
    assert c.factor == pytest.approx(1.1182, abs=5e-4)
    assert "1.118× as long in compile_loaded" in c.reason and "beyond the ±3.9% tolerance" in c.reason
    h = cd.headline()
    assert h["comparability"] == "skewed" and h["condition_factor"] == pytest.approx(c.factor)
    sp = h["spread"]
    assert sp["calls"]["gpu_time"] == "tie" and abs(h["gpu_time_change_pct"]) < 0.5
    assert sp["calls"]["gpu_time_normalised"] == "faster"
    ev_b, ev_c = h["cuda_event_time_us_per_step"]
    assert h["normalised_gpu_time_change_pct"] == pytest.approx(100 * (ev_c - ev_b) / ev_b, abs=1.0)
    assert sp["calls"]["cuda_events"] == "faster"
    # the control group is all GEMMs: their factor normalises compile's GEMMs; Inductor's gelu*mul kernel
    # (memory-bound, no control kernel of its class) is taken at 1.0, bracketed by the overall factor
    assert set(c.class_factors) == {"compute"}
    eff = cd.normalised["effective_factor"]
    assert 1.0 < eff < c.factor
    assert h["normalised_gpu_time_us_per_step"][1] == pytest.approx(h["gpu_time_us_per_step"][1] / eff)
    lo, hi = h["changed_kernels_saved_normalised_bounds_us_per_step"]
    assert lo == pytest.approx(h["changed_kernels_saved_normalised_us_per_step"]) and hi > lo
    # the runner's record of the GPU while each run was profiled, beside the verdict
    rec = cd.to_json()["comparability"]["recorded_conditions"]
    assert rec["base"]["power_w"]["median"] < 300 < rec["candidate"]["power_w"]["median"]
    assert rec["candidate"]["sm_clock_mhz"]["median"] < rec["base"]["sm_clock_mhz"]["median"]
    assert "runner's record while profiled: eager SM 1,980 MHz" in cd.lead_lines()[0]


def test_same_variant_under_a_concurrent_load_is_skewed_and_normalises_to_a_tie(skew):
    """eager recorded twice, the second time under the load: its GEMMs ran 12-13% longer, its memory-bound kernels
    1.00-1.06×; raw +9.0% slower, normalised a tie, and nothing changed — the headline says so."""
    cd = skew.candidate("eager_loaded")
    c = cd.comparability
    assert c.verdict == "skewed" and c.factor == pytest.approx(1.1193, abs=5e-4)
    assert c.class_factors["compute"] == pytest.approx(1.1315, abs=5e-4)
    assert c.class_factors["memory"] == pytest.approx(1.0, abs=5e-4)
    assert c.control_share > 0.99  # the same program: all but the memsets are identical
    h = cd.headline()
    assert h["gpu_time_change_pct"] > 8 and h["spread"]["calls"]["gpu_time"] == "slower"
    assert abs(h["normalised_gpu_time_change_pct"]) < 1 and h["spread"]["calls"]["gpu_time_normalised"] == "tie"
    assert h["spread"]["calls"]["changed_kernels_normalised"] == "tie"
    assert cd.lead_lines()[0].startswith("conditions: SKEWED — 4 kernels (5 calls) identical in both runs")


def test_round0_load_shows_the_same(skew):
    """The ad hoc round-0 pair (no runner): compile under load, GEMMs 1.13-1.22×, the pointwise kernel 0.99×."""
    base, cand = _summary(SKEW0 / "compile.json.gz"), _summary(SKEW0 / "compile_loaded.json.gz")
    cd = diff_runs(base, [cand], labels=["compile", "compile_loaded"]).candidates[0]
    c = cd.comparability
    assert c.verdict == "skewed" and c.factor == pytest.approx(1.1298, abs=5e-4)
    assert c.class_factors["memory"] == pytest.approx(0.9896, abs=5e-4)
    h = cd.headline()
    assert h["gpu_time_change_pct"] > 14 and abs(h["normalised_gpu_time_change_pct"]) < 2
    assert h["spread"]["calls"]["gpu_time_normalised"] == "tie"


def test_changed_kernels_plus_control_is_the_kernel_time(hf, skew):
    for cd in hf.candidates + skew.candidates:
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


def _cli(*args) -> str:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", "diff", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout


def test_cli_json_carries_the_comparability_object():
    doc = json.loads(_cli(SKEW / "normal" / "eager.json.gz", SKEW / "loaded" / "compile.json.gz", "--json"))
    c = doc["candidates"][0]["comparability"]
    assert c["verdict"] == "skewed" and c["factor"] == pytest.approx(1.1182, abs=5e-4)
    assert c["factor_change_pct"] == pytest.approx(11.82, abs=0.05)
    assert {"within_run_spread_pct", "tolerance_pct", "control_kernels", "class_factors", "rule"} <= set(c)
    assert c["n_control_calls"] == 3 and len(c["control_kernels"]) == 2
    assert doc["comparability"]["verdict"] == "skewed"  # one candidate: also at top level
    sp = doc["candidates"][0]["spread"]
    assert sp["steps"] == [15, 15] and len(sp["gpu_time_us_per_step"]) == 2  # 16 profiled, the first dropped


def test_cli_text_leads_with_conditions_and_changed_kernels():
    out = _cli(SKEW / "normal" / "eager.json.gz", SKEW / "loaded" / "compile.json.gz").splitlines()
    i = next(n for n, line in enumerate(out) if line.startswith("compile vs eager"))
    assert out[i + 1].startswith("  conditions: SKEWED — 2 kernels (3 calls) identical in both runs")
    assert out[i + 2].startswith("  changed kernels saved") and "at equal conditions" in out[i + 2]


def test_report_shows_the_badge(skew):
    from analyzer.report import report_html, report_markdown

    html = report_html(skew)
    assert '<div class="badge bad"><b>SKEWED</b> GPU conditions of compile_loaded vs eager' in html
    assert '<div class="badge ok"><b>COMPARABLE</b> GPU conditions of compile vs eager' in html
    md = report_markdown(skew)
    assert "> **SKEWED** GPU conditions of eager\\_loaded vs eager" in md
    assert "GPU conditions: the kernels identical in both runs" in md
    assert "GPU conditions while profiled (runner)" in md and "SM 1,935 MHz" in md


def test_spread_helpers():
    assert spread_range([3.0, 1.0, 2.0]) == (1.0, 3.0)
    assert spread_pct([100.0, 102.0]) == pytest.approx(2.0 / 101.0 * 100)
    v = np.r_[np.full(18, 100.0), 50.0, 500.0]  # 20 steps: one outlier each side does not set the spread
    assert spread_range(v) == (100.0, 100.0)
    assert spread_pct([5.0]) is None
    assert _weighted_median(np.array([1.0, 2.0]), np.array([1.0, 1.0])) == 1.5
    assert _weighted_median(np.array([1.0, 2.0, 9.0]), np.array([1.0, 3.0, 1.0])) == 2.0


def _interleaved_sets() -> list:
    from tests.conftest import SAMPLE_TRACES

    out = []
    for m in sorted(SAMPLE_TRACES.glob("*/manifest.json")):
        doc = json.loads(m.read_text())
        if (doc.get("profiler") or {}).get("interleaved"):
            out.append(m.parent)
    return out


@pytest.mark.parametrize("folder", _interleaved_sets(), ids=lambda p: p.name)
def test_bundled_sets_recorded_in_turns_are_comparable(folder):
    """Every bundled sample set the interleaving runner recorded: each candidate is comparable, its identical kernels
    within the tolerance of the baseline's (H100 round 1: 20 of 21 pairs within ±1.5%; past ±2%: plain 8192-token
    fuselens, one control call at 1.024, and on the H200 plain h8192 compile, two calls at 1.003 and 1.030)."""
    doc = json.loads((folder / "manifest.json").read_text())
    names = [v["name"] for v in doc["variants"] if v.get("status") == "done"]
    runs = [_summary(folder / f"{n}.json.gz") for n in names]
    d = diff_runs(runs[0], runs[1:], labels=names)
    checked = 0
    for cd in d.candidates:
        c = cd.comparability
        if c.verdict == "not checkable":  # e.g. every GEMM a Triton template: said plainly, no factor
            assert c.factor is None and c.reason
            continue
        assert c.verdict == "comparable", (cd.label, c.reason)
        assert abs(c.factor - 1) * 100 <= c.tolerance_pct, (cd.label, c.factor)
        assert cd.run.facts.get("conditions") and cd.base.facts.get("conditions")  # the runner's clock record
        checked += 1
    assert checked >= 1
