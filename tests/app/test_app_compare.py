"""Compare page (AppTest): the fusion diff of the bundled HF case, candidates, report, estimate vs measured bytes."""

from __future__ import annotations

import json
import time

import pytest

from app_core import export
from tests.conftest import TRACES
from tests.support import app_support as s

pytestmark = pytest.mark.needs_data(s.HF / "manifest.json")


@pytest.fixture(scope="module")
def at():
    return s.app("compare")


def test_headline_kernels_bytes_time(at):
    m = s.metric_values(at)
    assert m["Kernels per step"][0] == "5 → 4"
    assert m["HBM bytes avoided per step"][1] == "100,663,296 B (estimate)"
    assert m["Time saved by fusion per step"][0].endswith("µs")
    # every candidate side by side: one column each (fits a slide), one row per measure, text cells
    table = at.dataframe[0].value.set_index("vs eager")
    assert list(table.columns) == ["compile", "liger", "fuselens"]
    assert table.loc["kernels/step", "compile"] == "5 → 4"
    assert table.loc["HBM bytes avoided/step (est.)", "compile"] == "100.7 MB"
    assert table.loc["HBM bytes avoided/step (est.)", "fuselens"] == "302.0 MB"
    assert table.loc["speed-up (CUDA events)", "fuselens"].endswith("×")
    # copy as Markdown: the same table as a GitHub table, and the headline
    codes = [c.value for c in at.code]
    assert any(c.startswith("| vs eager | compile | liger | fuselens |") for c in codes), codes
    assert any("- HBM bytes avoided per step: 100.7 MB (100,663,296 B" in c for c in codes)


def test_fusion_group_card_names_the_fused_kernel_and_the_intermediate(at):
    md = " ".join(s.texts(at, "markdown"))
    assert "**GEGLU gating: triton_poi_fused__unsafe_view_gelu_mul_0** ← 2 kernels (gelu+mul)" in md
    assert "intermediate **8192×3072 bf16**, 50.3 MB" in md  # the GELU output, written then read back by mul
    assert "→ 100.7 MB of HBM traffic no longer made" in md
    captions = " ".join(s.texts(at, "caption"))
    assert "replaces at::native::vectorized_elementwise_kernel<…>" in captions  # fmt.short_name, as in the report


def test_charts_matched_gemms_and_measured_bytes(at):
    assert len(at.get("plotly_chart")) == 3  # fusion groups, time breakdown, categories
    gemm_tables = [d.value for d in at.dataframe if "GEMM (M×N×K dtype)" in d.value.columns]
    assert gemm_tables and len(gemm_tables[0]) == 2  # gate/up projections (×2) and down projection
    assert all(" → " in t for t in gemm_tables[0]["TFLOP/s"])
    measured = [d.value for d in at.dataframe if {"run", "measured / predicted"} <= set(d.value.columns)]
    assert measured, "the HF case carries Nsight Compute bytes"
    row = measured[0].set_index("run").loc["eager"]
    assert row["kernels paired"].startswith("5 measured, 5 estimated")
    assert 0.5 < float(row["measured / estimate"]) < 1.5


def test_other_candidate_and_downloads(at):
    at.selectbox(key="fl_compare_candidate").set_value("fuselens").run()
    m = s.metric_values(at)
    assert m["Kernels per step"][0] == "5 → 2"
    labels = {b.label for b in at.download_button}
    assert {"Download report", "Diff as JSON", "Fusion groups as CSV", "PNG", "SVG"} <= labels


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_report_and_exports_render_offline(at):
    """What the download buttons hand out: the diff's offline HTML report, and slide PNG/SVG via kaleido."""
    from analyzer import report

    at.run()
    d = at.session_state["fl_diffs"]
    diff = next(iter(d.values()))
    html = report.report_html(diff)
    assert "<html" in html.lower() and "100.7 MB" in html
    assert '<script src="http' not in html  # plotly.js inlined: opens offline
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    import plotly.graph_objects as go

    slide = export.for_slide(go.Figure(fig), "Fusion <groups>", "NVIDIA H100 · GEGLU MLP · bf16")
    assert slide.layout.width == 1600 and "&lt;groups&gt;" in slide.layout.title.text
    png = export.to_image(slide, "png")
    svg = export.to_image(slide, "svg")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert svg.lstrip().startswith(b"<svg") and b"GEGLU MLP" in svg


def test_single_trace_says_compare_needs_two():
    at = s.app()
    at = s.upload(at, TRACES["h100_bert"])
    s.goto(at, "compare")
    assert any("at least 2 traces" in t for t in s.texts(at, "info"))
    assert not at.exception


def test_big_steps_ask_first_and_diff_on_a_worker_thread(monkeypatch):
    """Above the size where the alignment takes minutes, Compare asks first; then the diff runs off the page thread."""
    from app_core import state

    monkeypatch.setattr(state, "DIFF_AUTO_MAX_OPS", 3)  # the HF steps (5 ops) count as "big" here
    monkeypatch.setattr(state, "DIFF_WAIT_S", 0.0)  # always show the pending state first
    monkeypatch.setattr(state, "_SAMPLE_DIFFS", {})  # as on a fresh server: no other session diffed the samples yet
    at = s.app("compare")
    assert any("GPU ops" in t and "takes a while" in t for t in s.texts(at, "info"))
    assert not at.metric  # nothing computed behind the user's back
    s.goto(at, "timeline")  # the other pages work meanwhile
    assert len(at.get("plotly_chart")) == 1
    s.goto(at, "compare")
    at.button(key="fl_force_diff_False").click().run()
    deadline = time.time() + 60
    while not at.metric and time.time() < deadline:
        at.run()
    assert s.metric_values(at)["Kernels per step"][0] == "5 → 4"


def test_conditions_badge_agrees_with_the_diff(at):
    """The Compare headline carries the comparability verdict of the candidate shown, as the Diff computes it."""
    at.selectbox(key="fl_compare_candidate").set_value("liger").run()
    d = next(iter(at.session_state["fl_diffs"].values()))
    c = d.candidate("liger").comparability
    badges = [m for m in s.texts(at, "markdown") if "GPU conditions:" in m]
    assert len(badges) == 1
    assert f"GPU conditions: {c.verdict} · factor {c.factor:.3f}" in badges[0]
    assert ("red-badge" if c.verdict == "skewed" else "green-badge") in badges[0]
    captions = s.texts(at, "caption")
    assert any(x.startswith(c.reason) for x in captions)  # the why, under the badge (then the runner's clocks)
    assert any(x.startswith("changed kernels ") for x in captions)
    m = s.metric_values(at)
    label = "GPU time per step (normalised)" if c.verdict == "skewed" else "GPU time per step (as recorded)"
    assert label in m  # a skewed pair shows the candidate at the baseline's conditions


def test_traffic_avoided_three_ways(at):
    """Compare states the saving logical vs predicted DRAM (vs measured where the runner recorded warm counters)."""
    md = " ".join(s.texts(at, "markdown"))
    assert "HBM traffic avoided per step: 100.7 MB logical, ≈" in md and "DRAM predicted" in md
    captions = " ".join(s.texts(at, "caption"))
    assert "Predicted DRAM: predicted DRAM traffic in sequence: an LRU cache of 50 MiB" in captions
    measured = [d.value for d in at.dataframe if {"run", "predicted DRAM"} <= set(d.value.columns)]
    assert measured and measured[0].set_index("run").loc["eager", "predicted DRAM"].endswith(" MB")


def test_a_saving_made_by_swaps_alone_says_so():
    """HTA's trace_diff pair has no fusion group, and its kernel swaps (one kernel for another) make the whole
    "time saved by fusion" figure (−16.0 ms). The card names the swaps beside the 0 groups, and the chart of groups
    and swaps says both are in its figure; a diff with neither draws no axis ticks around its note."""
    from analyzer import summarize
    from analyzer.diff import diff_runs
    from analyzer.figures.compare import fusion_groups_figure
    from analyzer.pipeline import load_trace
    from app_core.compare_view import _groups_text

    d = diff_runs(summarize(load_trace(TRACES["hta_diff_control"])), [summarize(load_trace(TRACES["hta_diff_test"]))])
    cd = d.candidates[0]
    assert not cd.fusions and cd.swaps
    text = _groups_text(cd, cd.headline())
    assert text.startswith("0 fusion group(s), ") and text.endswith(" swap(s)")
    fig = fusion_groups_figure(d, cd.label)
    assert "(fusion groups and swaps)" in fig.layout.title.text
    same = diff_runs(
        summarize(load_trace(TRACES["hta_diff_control"])), [summarize(load_trace(TRACES["hta_diff_control"]))]
    )
    empty = fusion_groups_figure(same, same.candidates[0].label)
    assert not same.candidates[0].fusions and not same.candidates[0].swaps and empty.layout.xaxis.visible is False
