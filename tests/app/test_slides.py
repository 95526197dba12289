"""The slide export's layout (app_core.export.for_slide) and the fusion-group chart's row labels: what a PNG pasted
into a review shows, checked on the figures the app exports (real traces, no browser)."""

from __future__ import annotations

from analyzer import diff_runs, load_trace, summarize
from analyzer.figures import compare as cf
from analyzer.figures import timeline as tl
from app_core import export
from tests.conftest import ROOT

LAYER = ROOT / "tests" / "data" / "layer_h100"
SUB = "NVIDIA H100 80GB HBM3 · Llama-style decoder layer · bf16"


def _layer():
    runs = {v: summarize(load_trace(LAYER / f"{v}.json.gz")) for v in ("eager", "sdpa", "compile")}
    return runs, diff_runs(runs["eager"], [runs["sdpa"], runs["compile"]], labels=["eager", "sdpa", "compile"])


def _px_from_top(fig, y_container: float) -> float:
    return (1.0 - y_container) * fig.layout.height


def test_timeline_slide_puts_the_legend_under_the_subtitle_and_above_the_plot():
    runs, _ = _layer()
    views = [tl.step_view(k, r.trace.gpu_ops, 3) for k, r in runs.items()]
    fig = export.for_slide(tl.timeline_figure(views, sequence=True), "GPU timeline, one step per run", SUB)
    title_block = export.TITLE_TOP_PX + export.TITLE_LINE_PX + export.SUBTITLE_PX
    legend_top = _px_from_top(fig, fig.layout.legend.y)
    assert fig.layout.legend.yref == "container" and fig.layout.legend.yanchor == "top"
    assert legend_top >= title_block  # not on the title or subtitle
    # the plot (and the subplot titles just above it) start below the legend's row
    assert fig.layout.margin.t >= legend_top + export.LEGEND_PX + export.SUBPLOT_TITLE_PX


def test_fusion_groups_slide_keeps_the_subplot_titles_off_the_subtitle():
    _, d = _layer()
    fig = export.for_slide(cf.fusion_groups_figure(d, "compile"), "Fusion groups of compile vs eager", SUB)
    title_block = export.TITLE_TOP_PX + export.TITLE_LINE_PX + export.SUBTITLE_PX
    assert fig.layout.margin.t >= title_block + export.SUBPLOT_TITLE_PX


def test_fusion_group_rows_name_what_the_group_computes():
    """Both RoPE groups' kernels are named after the attention op that follows them; the row says RoPE first."""
    _, d = _layer()
    fig = cf.fusion_groups_figure(d, "compile")
    rows = list(fig.data[0].y)
    patterns = [f.pattern for f in d.candidate("compile").fusions if f.pattern]
    assert patterns and all(any(r.startswith(f"<b>{p.split(' (')[0]}") for r in rows) for p in patterns), rows
    assert sum(r.startswith("<b>RoPE</b>") for r in rows) == 2, rows


def test_unknown_bytes_read_unknown_not_zero():
    """A group whose byte estimate is unknown (NaN: a kernel with no recorded shapes) gets the word, not an empty
    bar that reads as 0 B."""
    import dataclasses

    _, d = _layer()
    cd = d.candidate("compile")
    cd.fusions[0] = dataclasses.replace(cd.fusions[0], candidate_bytes_per_step=float("nan"))
    fig = cf.fusion_groups_figure(d, "compile")
    words = [t for t in fig.data if t.type == "scatter" and t.mode == "text"]
    assert len(words) == 1 and list(words[0].text) == ["unknown"]
    assert words[0].y[0] == fig.data[0].y[0]  # on that group's row


def test_kernel_order_labels_only_where_slots_fit():
    """Slot labels while the widest run has at most SEQUENCE_LABEL_SLOTS ops (the axis is shared): a one-layer
    step is labelled; the same runs with a 4× longer step get none, in every row."""
    runs, _ = _layer()
    views = [tl.step_view(k, r.trace.gpu_ops, 3) for k, r in runs.items()]
    fig = tl.timeline_figure(views, sequence=True)
    assert fig.layout.meta["labels"] == sum(len(v.gpu) for v in views)  # 52 + 45 + 17: every slot fits
    long = views[0].gpu
    import pandas as pd

    many = tl.StepView("long", 3, pd.concat([long] * 4, ignore_index=True), None, views[0].origin_us)
    fig = tl.timeline_figure([many, views[2]], sequence=True)  # 208 slots beside 17
    assert fig.layout.meta["labels"] == 0
