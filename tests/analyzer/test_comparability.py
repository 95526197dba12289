"""The comparability check (analyzer.diff.comparability) on real recorded traces (tests/data/ATTRIBUTION.md).

- h100_hf_geglu_run10: the runner's HF GEGLU forward on an H100 (variants recorded one after the other).
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
from analyzer.diff import diff_runs, output_text
from analyzer.diff.comparability import MIN_TOLERANCE_PCT
from analyzer.diff.measures import spread_pct, weighted_median
from analyzer.pipeline import load_trace
from analyzer.runmeta import attach_manifest
from analyzer.steps import spread_range
from tests.conftest import DATA, ROOT, TRACES

HF = DATA / "comparability" / "h100_hf_geglu_run10"
SKEW = DATA / "comparability" / "h100_hf_geglu_skew_round1"
SKEW0 = DATA / "comparability" / "h100_hf_geglu_skew_round0"
PROBE = DATA / "comparability" / "probe_h100"
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


def test_comparable_pair_rests_on_the_identical_gemms_in_the_same_context(hf):
    """h100_hf_geglu_run10 (variants one after the other, 2 steady steps): of the three cuBLAS calls per step only the gate
    projection ran in the same context in both runs (after an idle GPU, the previous step's down projection last);
    the up projection ran behind the gate GEMM in compile and after eager's GELU kernel in eager (1.047×), the down
    projection behind Inductor's gelu*mul vs after eager's mul: both listed, not used. The Inductor-fused gelu*mul and eager's two pointwise kernels are not identical and stay out."""
    c = hf.candidate("compile").comparability
    assert c.verdict == "comparable" and c.source == "trace"
    assert c.n_control_kernels == 1 and c.n_control_calls == 1
    assert [k["name"] for k in c.control_kernels] == ["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"]
    assert c.control_kernels[0]["contexts"] == [
        "after an idle GPU, last behind nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT"
    ]
    ex = c.context_excluded
    assert ex["n_calls"] == 2 and {k["name"] for k in ex["calls"]} == UP_DOWN
    up = next(k for k in ex["calls"] if k["call"] == 1)
    assert up["context"][0].startswith("after an idle GPU, last behind void at::native::vectorized_elementwise_kernel")
    assert up["context"][1] == "behind nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
    assert up["ratio"] == pytest.approx(1.0466, abs=5e-4)
    assert c.factor == pytest.approx(0.9814, abs=5e-4) and c.trace_factor == c.factor
    assert c.control_share == pytest.approx(0.226, abs=0.005)
    assert c.tolerance_pct == MIN_TOLERANCE_PCT  # both runs' own spreads are < 0.1%
    assert c.steps == [2, 2]


def test_identical_calls_behind_other_kernels_are_listed_not_used(skew):
    """Interleaved, same GPU conditions: the up projection runs 5.8% longer in compile, where it follows the gate GEMM
    instead of eager's GELU kernel, and the down projection follows Inductor's gelu*mul instead of eager's mul (0.995):
    real effects of what ran before them, not of the GPU's conditions. The factor rests on the gate projection after
    an idle GPU: compile's host launches leave the GPU idle before nearly every step, eager's before each turn's first
    step (its other steps queue the gate GEMM behind the previous down projection: no counterpart in compile)."""
    c = skew.candidate("compile").comparability
    assert c.verdict == "comparable"
    assert c.n_control_calls == 1 and c.control_kernels[0]["contexts"] == [
        "after an idle GPU, last behind nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT"
    ]
    ex = {(k["name"], k["call"]): k for k in c.context_excluded["calls"]}
    up = ex["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", 1]
    assert up["ratio"] == pytest.approx(1.0578, abs=5e-4)
    assert up["context"][0].startswith("behind void at::native::vectorized_elementwise_kernel<8, at::native::Gelu")
    assert up["context"][1] == "behind nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
    down = ex["nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT", 0]
    assert down["context"][1] == "behind triton_poi_fused__unsafe_view_gelu_mul_0"
    assert (
        "2 identical calls left out, their context differs (e.g. nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT ran behind"
        in c.reason
    )
    assert c.factor == pytest.approx(0.9989, abs=5e-4) and abs(c.factor - 1) < 0.02


def test_skewed_pair_names_the_factor_and_its_normalised_sign_agrees_with_cuda_events(skew):
    """compile recorded under a concurrent matmul load vs eager recorded normally: the raw GPU time calls it a tie
    (-0.3%), the normalised one -8.5%, as the runner's CUDA events (-8.0%: eager normal vs compile loaded). The
    factor rests on the gate projection's two contexts (after an idle GPU 1.152×, behind the down projection 1.105×)."""
    cd = skew.candidate("compile_loaded")
    c = cd.comparability
    assert c.verdict == "skewed"
    assert c.factor == pytest.approx(1.1265, abs=5e-4)
    assert "1.126× as long in compile_loaded" in c.reason and "beyond the ±3.7% tolerance" in c.reason
    h = cd.headline()
    assert h["comparability"] == "skewed" and h["condition_factor"] == pytest.approx(c.factor)
    sp = h["spread"]
    assert sp["calls"]["gpu_time"] == "tie" and abs(h["raw_gpu_time_change_pct"]) < 0.5
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
    """eager recorded twice, the second time under the load: its GEMMs ran 11-15% longer, its memory-bound kernels
    1.00-1.06×; raw +9.0% slower, normalised -0.4%, a tie, and nothing changed — the headline says so."""
    cd = skew.candidate("eager_loaded")
    c = cd.comparability
    assert c.verdict == "skewed" and c.factor == pytest.approx(1.1230, abs=5e-4)
    assert c.class_factors["compute"] == pytest.approx(1.1322, abs=5e-4)
    assert c.class_factors["memory"] == pytest.approx(1.0232, abs=5e-4)  # between its two kernels' 1.000 and 1.057
    assert c.context_excluded["n_calls"] == 0  # the same program: every identical call in the same context
    assert c.control_share > 0.99  # the same program: all but the memsets are identical
    h = cd.headline()
    assert h["raw_gpu_time_change_pct"] > 8 and h["spread"]["calls"]["gpu_time"] == "slower"
    assert abs(h["normalised_gpu_time_change_pct"]) < 1 and h["spread"]["calls"]["gpu_time_normalised"] == "tie"
    assert h["spread"]["calls"]["changed_kernels_normalised"] == "tie"
    assert cd.lead_lines()[0].startswith(
        "conditions: SKEWED — 4 kernels (5 calls) identical in both runs and in the same context"
    )


def test_round0_load_shows_the_same(skew):
    """The h100_hf_geglu_skew_round0 pair (an ad hoc script, no runner): compile under load, GEMMs 1.13-1.22×, the pointwise kernel 0.99×."""
    base, cand = _summary(SKEW0 / "compile.json.gz"), _summary(SKEW0 / "compile_loaded.json.gz")
    cd = diff_runs(base, [cand], labels=["compile", "compile_loaded"]).candidates[0]
    c = cd.comparability
    assert c.verdict == "skewed" and c.factor == pytest.approx(1.1298, abs=5e-4)
    assert c.class_factors["memory"] == pytest.approx(0.9896, abs=5e-4)
    h = cd.headline()
    assert h["raw_gpu_time_change_pct"] > 14 and abs(h["normalised_gpu_time_change_pct"]) < 2
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


def test_a_slowdown_outside_both_runs_step_ranges_is_not_called_a_tie():
    """ResNet-50, DataLoader workers 0 vs 4 (V100): factor 1.000, recorded GPU time per step 100.5-100.7 ms against
    101.9-102.5 ms. The normalised figures' range is bounded by the middle 80% of the control time's call ratios, not
    by the two extreme calls (1 µs against 2 in these whole-µs timestamps: 0.5x and 2x, which spread the normalised
    step over 79.8-205.0 ms and called this +1.5% a tie)."""
    d = diff_runs(summarize(load_trace(TRACES["legacy_resnet"])), [summarize(load_trace(TRACES["legacy_resnet_w4"]))])
    cd = d.candidates[0]
    lo, hi = cd.comparability.class_ratio_ranges["compute"]
    assert 0.95 < lo <= 1.0 <= hi < 1.05
    sp = cd.spreads()
    assert sp["calls"]["gpu_time"] == "slower" and sp["calls"]["gpu_time_normalised"] == "slower"
    low, high = sp["changed_kernels_saved_normalised_us_per_step"]
    assert -3000 < low <= high < 0  # a cost of 1.3-2.6 ms per step: no more than the step itself moved
    assert cd.headline()["spread"]["calls"]["gpu_time_normalised"] == "slower"
    # a cost reads as a cost with its range: not 'cost 1,676.0 µs more (-2,620.1 to -1,302.7 µs …)'
    line = next(x for x in cd.lead_lines() if x.startswith("changed kernels"))
    assert line.startswith("changed kernels cost 1,676.0 µs more/step at equal conditions (1,30")
    assert "to 2,6" in line and "(-" not in line


def test_a_factor_too_uncertain_to_bound_gives_no_normalised_range():
    """HTA's trace_diff pair (A100, two versions of one program, the candidate under other conditions): the calls
    identical in both runs carry 4% of the time and their ratios spread 0.38-2.0x over the middle 80% of it. Divided
    by that, the change per step would span -247.6 to +3.4 ms in a ~150 ms step, so the normalised figures come with
    no range and no call, and the text says why."""
    d = diff_runs(summarize(load_trace(TRACES["hta_diff_control"])), [summarize(load_trace(TRACES["hta_diff_test"]))])
    cd = d.candidates[0]
    assert "too wide to bound" in cd.normalised["range_withheld"]
    sp = cd.spreads()
    assert "gpu_time_normalised" not in sp["calls"] and "changed_kernels_normalised" not in sp["calls"]
    assert "changed_kernels_saved_normalised_us_per_step" not in sp
    assert any("no range: the control kernels' ratios spread" in line for line in output_text.text_lines(d))


def test_two_ranks_of_one_program_are_comparable_without_their_collectives():
    """Held out (HTA's 2-rank training trace, one step each, A100-class cutlass/ampere kernels): the ranks run the
    same program on two GPUs. The NCCL SendRecv kernels take 60% of the identical kernels' time and read 0.39-1.46×
    between the ranks (waiting for the peer): they are never controls. The rest, in the same context: 1.0026."""
    d = diff_runs(
        summarize(load_trace(TRACES["hta_filter_rank0"])), [summarize(load_trace(TRACES["hta_filter_rank1"]))]
    )
    c = d.candidates[0].comparability
    assert c.verdict == "comparable" and c.factor == pytest.approx(1.0026, abs=5e-4)
    assert c.n_control_calls > 150 and not any("nccl" in k["name"].lower() for k in c.control_kernels)
    assert c.context_excluded["n_calls"] > 0  # identical calls behind other kernels: listed, not used


def test_unrelated_runs_are_not_checkable_and_say_so():
    d = diff_runs(summarize(load_trace(HF / "eager.json.gz")), [summarize(load_trace(TRACES["legacy_resnet"]))])
    cd = d.candidates[0]
    c = cd.comparability
    assert c.verdict == "not checkable" and c.factor is None
    assert "no kernel ran identically in both runs" in c.reason
    h = cd.headline()
    assert h["normalised_gpu_time_change_pct"] is None and h["changed_kernels_saved_normalised_us_per_step"] is None
    lead = cd.lead_lines()
    assert lead[0].startswith("NOT ONE PROGRAM: resnet50_num_workers_0.worker0.1623143089861 and eager share no GEMM")
    assert lead[1].startswith("conditions: not checkable — no kernel ran identically")
    assert cd.to_json()["different_work"] == lead[0].removeprefix("NOT ONE PROGRAM: ")


def test_two_versions_of_one_program_share_gemm_problems():
    """comparability.shared_work_note: eager vs compile of the HF GEGLU MLP, and the ResNet-50 DataLoader pair, run the
    same GEMM problems: no note. Their GEMM kernels may differ (cuBLAS vs Inductor's choice); the problems do not."""
    hf = diff_runs(summarize(load_trace(HF / "eager.json.gz")), [summarize(load_trace(HF / "compile.json.gz"))])
    resnet = diff_runs(
        summarize(load_trace(TRACES["legacy_resnet"])), [summarize(load_trace(TRACES["legacy_resnet_w4"]))]
    )
    for d in (hf, resnet):
        assert d.candidates[0].different_work == "" and d.candidates[0].to_json()["different_work"] is None
        assert not d.candidates[0].lead_lines()[0].startswith("NOT ONE PROGRAM")


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
    assert c["verdict"] == "skewed" and c["factor"] == pytest.approx(1.1265, abs=5e-4)
    assert c["factor_change_pct"] == pytest.approx(12.65, abs=0.05)
    assert {"within_run_spread_pct", "tolerance_pct", "control_kernels", "class_factors", "rule"} <= set(c)
    assert c["source"] == "trace" and c["probe"] is None and c["trace_factor"] == c["factor"]
    assert c["n_control_calls"] == 1 and len(c["control_kernels"]) == 1
    assert c["context_excluded"]["n_calls"] == 2 and len(c["context_excluded"]["calls"][0]["context"]) == 2
    assert doc["comparability"]["verdict"] == "skewed"  # one candidate: also at top level
    sp = doc["candidates"][0]["spread"]
    assert sp["steps"] == [15, 15] and len(sp["gpu_time_us_per_step"]) == 2  # 16 profiled, the first dropped


def test_cli_text_leads_with_conditions_and_changed_kernels():
    """After the headline (analyzer.diff.headline), the conditions' verdict and what the changed kernels saved."""
    out = _cli(SKEW / "normal" / "eager.json.gz", SKEW / "loaded" / "compile.json.gz").splitlines()
    assert out[0] == "headline: compile vs eager: -8.0% per step (CUDA events), faster"
    i = next(n for n, line in enumerate(out) if line.startswith("compile vs eager"))
    assert out[i + 1].startswith("  headline: the runner's CUDA events") and "SKEWED, factor 1.126" in out[i + 1]
    assert out[i + 2].startswith(
        "  conditions: SKEWED — 1 kernel (1 call) identical in both runs and in the same context"
    )
    assert out[i + 3].startswith("  changed kernels saved") and "at equal conditions" in out[i + 3]


def test_report_shows_the_badge(skew):
    from analyzer.report import report_html, report_markdown

    html = report_html(skew)
    assert '<div class="badge bad"><b>SKEWED</b> GPU conditions of compile_loaded vs eager' in html
    assert '<div class="badge ok"><b>COMPARABLE</b> GPU conditions of compile vs eager' in html
    md = report_markdown(skew)
    assert "> **SKEWED** GPU conditions of eager\\_loaded vs eager" in md
    assert "GPU conditions: the control group" in md and "Identical kernels left out: 2 call(s)" in md
    assert "GPU conditions while profiled (runner)" in md and "SM 1,935 MHz" in md


def test_spread_helpers():
    assert spread_range([3.0, 1.0, 2.0]) == (1.0, 3.0)
    assert spread_pct([100.0, 102.0]) == pytest.approx(2.0 / 101.0 * 100)
    v = np.r_[np.full(18, 100.0), 50.0, 500.0]  # 20 steps: one outlier each side does not set the spread
    assert spread_range(v) == (100.0, 100.0)
    assert spread_pct([5.0]) is None
    assert weighted_median(np.array([1.0, 2.0]), np.array([1.0, 1.0])) == 1.5
    assert weighted_median(np.array([1.0, 2.0, 9.0]), np.array([1.0, 3.0, 1.0])) == 2.0


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
    """Every bundled sample set the interleaving runner recorded: each checkable candidate is comparable with its
    factor within ±2% of 1.0. A pair whose identical kernels all ran behind other kernels (fuselens: the down
    projection behind the fused GEMM instead of eager's GELU, 1.000-1.024×) has no control in its traces: without
    the runner's control probe it is not checkable, and says which call was left out and why."""
    doc = json.loads((folder / "manifest.json").read_text())
    names = [v["name"] for v in doc["variants"] if v.get("status") == "done"]
    runs = [_summary(folder / f"{n}.json.gz") for n in names]
    d = diff_runs(runs[0], runs[1:], labels=names)
    checked = 0
    for cd in d.candidates:
        c = cd.comparability
        if c.verdict == "not checkable":  # said plainly, no factor
            assert c.factor is None and c.reason
            if c.context_excluded["n_calls"]:
                assert "in the same context" in c.reason and "context differs" in c.reason
            continue
        if len(cd.run.steps_used) < 8:
            # the 16- and 32-layer Llama training pairs (2-4 steps each, 100-200 ms per step held at the power
            # limit: SM 1,800-1,980 MHz) read 1.025 and 1.058: said as comparable or skewed, never hidden
            assert c.verdict in ("comparable", "skewed"), (cd.label, c.reason)
            checked += 1
            continue
        assert c.verdict == "comparable", (cd.label, c.reason)
        assert abs(c.factor - 1) <= 0.02, (cd.label, c.factor)
        assert cd.run.facts.get("conditions") and cd.base.facts.get("conditions")  # the runner's clock record
        checked += 1
    assert checked >= 1


PROBE_CASES = ["hf_geglu_bf16", "plain_8192tok_bf16", "plain_8192tok_h8192_bf16", "swiglu_fp16", "gemma_layer_bf16"]


@pytest.mark.parametrize("case", PROBE_CASES)
def test_sets_recorded_with_the_control_probe_are_all_checkable_and_comparable(case):
    """probe_h100 (H100, the runner with its control probe; 14 pairs): every pair is comparable within
    ±1% of 1.0. Where the traces have same-context calls of their own (≥ 2% of the step) they set the factor and the
    probe agrees within its tolerance; the fuselens pairs, whose only identical kernel (the down projection) runs
    behind the fused kernel, and the Gemma layer's compiled variants (under 2% of the step in the same context as
    eager) get their factor from the probe. The normalised change keeps the CUDA events' sign wherever they
    differ by 3% or more."""
    doc = json.loads((PROBE / case / "manifest.json").read_text())
    names = [v["name"] for v in doc["variants"]]
    runs = [_summary(PROBE / case / f"{n}.json.gz") for n in names]
    d = diff_runs(runs[0], runs[1:], labels=names)
    for cd in d.candidates:
        c = cd.comparability
        assert c.verdict == "comparable", (cd.label, c.reason)
        assert abs(c.factor - 1) <= 0.01, (cd.label, c.factor)
        assert c.probe["turns"] == 8 and set(c.probe["ratio"]) == {"gemm", "copy"}
        if c.source == "probe":  # no same-context control of their own, or under 2% of the step
            assert c.trace_factor is None or c.control_share < 0.02
            assert c.reason.startswith("the runner's control probe (a bf16 2048×2048×2048 GEMM")
            assert set(c.class_factors) == {"compute", "memory"}
        else:
            assert c.source == "trace" and c.factor == c.trace_factor and c.control_share >= 0.02
            assert "; the runner's control probe read " in c.reason
        if cd.label == "fuselens":  # the down projection runs behind the fused kernel: no control in the traces
            assert c.source == "probe" and c.trace_factor is None and c.context_excluded["n_calls"] >= 1
        h = cd.headline()
        ev_b, ev_c = h["cuda_event_time_us_per_step"]
        if abs(ev_c - ev_b) / ev_b >= 0.03:  # below that both read a tie (plain compile: -0.1% vs +0.9%)
            assert np.sign(h["normalised_gpu_time_change_pct"]) == np.sign(ev_c - ev_b)


SKEWP = DATA / "comparability" / "h100_hf_geglu_skew_probe"


def test_skewed_pair_recorded_with_the_probe():
    """h100_hf_geglu_skew_probe (H100, with the probe): compile recorded under a concurrent matmul load (SM 1,365 MHz,
    682 W) vs eager recorded normally. The raw GPU time calls it a tie (-0.9%); the same-context gate GEMM reads 1.200,
    the probe's GEMM 1.234 and its elementwise pass 1.031: skewed. Normalised: -14.0%, faster, as the CUDA events
    (-12.4%). The same pair recorded normally: comparable, 0.997 (probe 1.003 / 1.008)."""
    runs = [_summary(SKEWP / c / f"{v}.json.gz") for c, v in (("normal", "eager"), ("normal", "compile"))]
    runs.append(_summary(SKEWP / "loaded" / "compile.json.gz"))
    d = diff_runs(runs[0], runs[1:], labels=["eager", "compile", "compile_loaded"])
    ok = d.candidate("compile").comparability
    assert ok.verdict == "comparable" and ok.factor == pytest.approx(0.9972, abs=5e-4)
    assert ok.probe["ratio"]["gemm"] == pytest.approx(1.003, abs=1e-3)
    cd = d.candidate("compile_loaded")
    c = cd.comparability
    assert c.verdict == "skewed" and c.source == "trace" and c.factor == pytest.approx(1.2004, abs=5e-4)
    assert c.probe["ratio"]["gemm"] == pytest.approx(1.2335, abs=1e-3)
    assert c.probe["ratio"]["copy"] == pytest.approx(1.0310, abs=1e-3)
    h = cd.headline()
    assert h["spread"]["calls"]["gpu_time"] == "tie" and h["spread"]["calls"]["gpu_time_normalised"] == "faster"
    ev_b, ev_c = h["cuda_event_time_us_per_step"]
    assert h["spread"]["calls"]["cuda_events"] == "faster" and 100 * (ev_c - ev_b) / ev_b == pytest.approx(
        -12.4, abs=0.1
    )
    assert h["normalised_gpu_time_change_pct"] == pytest.approx(-14.0, abs=0.1)
    assert "the runner's control probe, between turns, read compute 1.234 against 1.200" in " ".join(c.notes)


def test_a_damaged_probe_record_is_ignored_and_the_traces_decide(tmp_path):
    """A hand-edited manifest (a probe time that is text, negative, or a turn missing a role) never yields a probe
    factor: the pair falls back to its traces, which for fuselens vs eager have no same-context call: only the
    identical down projection in another context, within its widened tolerance."""
    import shutil

    from analyzer.runmeta import recorded_probe

    src = PROBE / "plain_8192tok_h8192_bf16"
    doc = json.loads((src / "manifest.json").read_text())
    entry = next(v for v in doc["variants"] if v["name"] == "fuselens")
    assert recorded_probe(doc, entry)["us"][0][1] == pytest.approx(25.0, abs=0.5)
    for bad in ("abc", -1.0, None):
        e = json.loads(json.dumps(entry))
        e["control_probe"]["us"][3][1] = bad
        assert recorded_probe(doc, e) is None
    e = json.loads(json.dumps(entry))
    e["control_probe"]["us"][2] = e["control_probe"]["us"][2][:2]
    assert recorded_probe(doc, e) is None
    assert recorded_probe({**doc, "control_probe": {**doc["control_probe"], "error": "x"}}, entry) is None
    for name in ("eager", "fuselens"):
        shutil.copy(src / f"{name}.json.gz", tmp_path / f"{name}.json.gz")
    cd = diff_runs(_summary(src / "eager.json.gz"), [_summary(src / "fuselens.json.gz")]).candidates[0]
    assert cd.comparability.source == "probe" and cd.comparability.verdict == "comparable"
    entry["control_probe"]["us"][0][1] = "abc"
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    cd = diff_runs(_summary(tmp_path / "eager.json.gz"), [_summary(tmp_path / "fuselens.json.gz")]).candidates[0]
    # the traces alone: only the down projection is identical, behind the fused kernel (third tier, not normalised)
    c = cd.comparability
    assert c.source == "context" and c.tier == "other context" and c.verdict == "comparable" and not c.normalises
    assert c.probe is None and cd.normalised_gpu_time_us_per_step is None
