"""Timeline: the page (AppTest on the bundled HF case) and the pure figure builder on real and 100k+-op steps."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from analyzer.figures import timeline as tl
from tests.conftest import TRACES, loaded_trace
from tests.support import app_support as s


def _spec(chart) -> dict:
    return json.loads(chart.proto.spec)


@pytest.mark.needs_data(s.HF / "manifest.json")
def test_page_stacks_every_run_on_one_time_scale():
    at = s.app("timeline")
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    fig = _spec(charts[0])
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert [t.split("</b>")[0].removeprefix("<b>") for t in titles] == ["eager", "compile", "liger", "fuselens"]
    # every bar of every run is drawn (tiny steps: no merging), eager's 5 kernels and compile's 4 among them
    table = at.dataframe[0].value.set_index("run")
    assert table.loc["eager", "kernels"] == 5 and table.loc["compile", "kernels"] == 4
    # the sum of op durations is not called 'busy' (Overview's busy is their union: HTA's control sample read busy
    # 78,284 µs in a 76,422 µs span), and no phase column claims to be this row's step
    assert "GPU op time (µs)" in table.columns and "busy (µs)" not in table.columns
    assert not [
        c for c in table.columns if c.split(" (")[0] in ("forward", "backward", "optimizer") and "median" not in c
    ]
    n_bars = sum(len(t["hovertext"]) for t in fig["data"] if t["type"] == "bar")  # x/base are base64 typed arrays
    assert n_bars == int(table["GPU ops"].sum())
    hover = " ".join(h for t in fig["data"] for h in t.get("hovertext", []))
    assert "triton_poi_fused__unsafe_view_gelu_mul_0" in hover and "(estimate)" in hover and "GB/s" in hover
    # CPU lanes on demand
    at.toggle[0].set_value(True).run()
    fig = _spec(at.get("plotly_chart")[0])
    ticks = [t for k, ax in fig["layout"].items() if k.startswith("yaxis") for t in ax.get("ticktext", [])]
    assert "CPU ops" in ticks
    # another step position re-draws without error
    at.selectbox[0].set_value(0).run()
    assert not at.exception and len(at.get("plotly_chart")) == 1


@pytest.mark.needs_data(s.HF / "manifest.json")
def test_views_are_rebased_and_fusion_is_visible():
    import analyzer

    eager = analyzer.load_trace(s.HF / "eager.json.gz")
    comp = analyzer.load_trace(s.HF / "compile.json.gz")
    views = [  # each run's own last step (the interleaving runner numbers them per run)
        tl.step_view("eager", eager.gpu_ops, int(eager.steps["step"].iloc[-1])),
        tl.step_view("compile", comp.gpu_ops, int(comp.steps["step"].iloc[-1])),
    ]
    bars, info = tl.bars_frame(views)
    assert not info["merged"]
    for row in (0, 1):
        assert bars[bars["row"] == row]["s"].min() == pytest.approx(0.0)  # each step re-based to its own start
    texts = set(bars["text"])
    assert {"gelu", "mul"} <= texts  # eager's two pointwise kernels…
    assert "gelu+mul" in texts  # …become compile's one fused kernel
    assert views[1].span_us < views[0].span_us  # and the compiled step is shorter
    assert tl.timeline_figure(views).layout.meta["unit"] == "µs"


def _big_gpu_ops(copies: int = 5) -> pd.DataFrame:
    """A real 22k-op V100 training trace laid end to end: one 100k+-op step (the timeline's worst case)."""
    g = loaded_trace(TRACES["hta_df_index"]).gpu_ops
    span = float(g["end_us"].max()) + 1000.0
    parts = [g.assign(ts_us=g["ts_us"] + k * span, end_us=g["end_us"] + k * span, step=0) for k in range(copies)]
    return pd.concat(parts, ignore_index=True)


def test_100k_ops_are_aggregated_without_losing_any():
    big = _big_gpu_ops()
    assert len(big) > 100_000
    t0 = time.perf_counter()
    view = tl.step_view("big", big, 0)
    fig = tl.timeline_figure([view], max_bars=6000)
    build_s = time.perf_counter() - t0
    meta = fig.layout.meta
    assert meta["merged"] and meta["bars"] <= 6000 + 2 * len(big["stream"].unique())
    assert meta["unit"] in ("ms", "s")  # a multi-second step is not labelled in millions of µs
    bars, info = tl.bars_frame([view], max_bars=6000)
    assert int(bars["n"].sum()) == len(big)  # every op is in exactly one bar
    merged = bars[bars["n"] > 1]
    assert (merged["hover"].str.contains(" ops merged")).all()
    assert len(fig.to_json()) < 3_000_000  # what the browser receives stays small
    assert build_s < 10, build_s  # generous for CI; the measured figure is in docs/DASHBOARD.md


def test_window_reaggregates_at_finer_resolution_and_webgl_above_the_svg_limit():
    big = _big_gpu_ops(2)
    view = tl.step_view("big", big, 0)
    _, full = tl.bars_frame([view], max_bars=4000)
    lo, hi = 0.0, float(big["end_us"].max()) / 50
    bars, win = tl.bars_frame([view], max_bars=4000, window=(lo, hi))
    assert win["bin_us"] < full["bin_us"] / 10
    assert (bars["e"] >= lo).all() and (bars["s"] <= hi).all()
    fig = tl.timeline_figure([view], max_bars=20000, svg_limit=1000)
    assert fig.layout.meta["webgl"] and {t.type for t in fig.data} == {"scattergl"}
    fig = tl.timeline_figure([view], max_bars=20000, webgl=False)
    assert not fig.layout.meta["webgl"] and {t.type for t in fig.data} == {"bar"}


def test_names_are_escaped_in_hover_and_labels():
    g = loaded_trace(TRACES["h100_bert"]).gpu_ops.copy()
    g["name"] = "<img src=x onerror=alert(1)>" + g["name"]
    step = int(g["step"].max())
    fig = tl.timeline_figure([tl.step_view("<b>run</b>", g, step)])
    text = " ".join(s.strings(json.loads(fig.to_json())))
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "<b>run</b>" not in text and "&lt;b&gt;run&lt;/b&gt;" in text


def test_a_layer_step_reads_in_kernel_order():
    """A decoder layer's 49-52 GPU ops (tests/data/layer_h100): one equal slot each in launch order, a vertical label
    in every slot, hovers with the real µs; the compiled layer's 17 ops end where its slots end."""
    from tests.conftest import DATA

    views = []
    for name in ("eager", "compile"):
        t = loaded_trace(DATA / "layer_h100" / f"{name}.json.gz")
        views.append(tl.step_view(name, t.gpu_ops, int(t.steps["step"].iloc[-1])))
    bars, info = tl.bars_frame(views, sequence=True)
    for row, v in enumerate(views):
        mine = bars[bars["row"] == row].sort_values("s")
        assert mine["s"].tolist() == [float(i) for i in range(len(v.gpu))]  # every GPU op, one slot each
        assert (mine["e"] - mine["s"]).round(6).eq(0.9).all()
    assert {"softmax", "rsqrt", "neg", "cat", "sdpa"} <= set(bars["text"])
    fig = tl.timeline_figure(views, sequence=True)
    assert fig.layout.meta["sequence"] and fig.layout.meta["unit"] == "GPU ops"
    labels = [a for a in fig.layout.annotations if a.textangle == -90]
    assert len(labels) == len(bars)
    hover = " ".join(h for t in fig.data for h in t.hovertext)
    assert "µs" in hover  # real times stay in the hover
    # the time layout is unchanged for the same views
    assert not tl.timeline_figure(views).layout.meta["sequence"]
