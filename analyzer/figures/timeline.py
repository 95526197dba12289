"""GPU timeline of one step per run, runs stacked on one time scale (pure: DataFrames in, Plotly figure out).

Each run's step is re-based to its own start, so a baseline and its fused candidates line up at t = 0: the kernels
fusion removed and the shorter step are visible at a glance.

Why the server aggregates: a browser draws a few thousand SVG rectangles smoothly, not the 100k+ kernels of a real
training step. Above `max_bars` the kernels narrower than one horizontal "pixel bin" are merged per lane into one
bar that says how many kernels it holds; kernels wider than a bin always stay individual. Above `svg_limit` bars the
figure switches to WebGL line segments (go.Scattergl), which stay fluid at tens of thousands of bars. The default
`svg_limit` equals `max_bars`, so the page draws SVG: inside Streamlit's stretched chart the WebGL segments of a
stacked figure were drawn squashed at the foot of each lane (a 48-layer step, 2,496 ops), and SVG draws the same
5,472 bars in ~0.5 s in a software-rendered Chromium (0.7 s for WebGL).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analyzer.figures.theme import CATEGORY_COLORS as _THEME_COLORS
from analyzer.fmt import base_name, fmt_bytes, html_text, safe_text

# The theme's category colours (same category, same colour in every FuseLens chart) plus one for CPU-op lanes.
# CPU ops are violet: grey is memset's (and memcpy's), and a CPU lane must not read as a memset.
CATEGORY_COLORS = {**_THEME_COLORS, "cpu op": "#9F8FD0"}
CPU_COLOR = CATEGORY_COLORS["cpu op"]
LANE_PX = 34  # height of one lane: tall enough for a readable bar, short enough for 4 runs × 3 streams on a slide
# Sequence layout (one equal slot per GPU op, launch order): for steps of tens of kernels, where time-proportional
# bars leave the short ones (a layer's 1-14 µs norm/RoPE kernels beside 180 µs GEMMs) as slivers. Lanes are taller so
# a label fits across each slot, written vertically.
SEQUENCE_LANE_PX = 84
SEQUENCE_MAX_OPS = (
    400  # the page's default layout: beyond this a slot is under 3 px on a slide, the time layout reads better
)
# A vertical 10 px label needs ~12 px of slot; a slide's plot area is ~1,100-1,450 px wide, so slots get labels only
# while a run has at most this many (more would overprint into one unreadable band; the hover still names each op).
SEQUENCE_LABEL_SLOTS = 90
NAME_CHARS = 110  # kernel names can be 1 kB of C++ template; the hover shows the head


@dataclass(frozen=True)
class StepView:
    """One run's chosen step: the GPU ops (GPU_OPS rows) and, optionally, the CPU ops that launched them."""

    label: str
    step: int
    gpu: pd.DataFrame
    cpu: pd.DataFrame | None = None  # CPU_OPS rows (launching ops), or None when not shown
    origin_us: float = 0.0  # absolute ts_us that becomes t = 0

    @property
    def span_us(self) -> float:
        """GPU span of the step: first GPU op start → last GPU op end."""
        if self.gpu.empty:
            return 0.0
        return float(self.gpu["end_us"].max() - self.gpu["ts_us"].min())

    @property
    def extent_us(self) -> float:
        """Where the drawing ends: the last GPU op's end since the origin (t = 0; the CPU ops may start it earlier)."""
        if self.gpu.empty:
            return 0.0
        return float(np.nanmax((self.gpu["end_us"] - self.origin_us).to_numpy()))


def step_view(
    label: str, gpu_ops: pd.DataFrame, step: int, *, cpu_ops: pd.DataFrame | None = None, with_cpu: bool = False
) -> StepView:
    """The GPU ops of `step` (by GPU_OPS.step), re-based so the step's first shown activity is t = 0.

    With `with_cpu`, the innermost CPU ops that launched those kernels (GPU_OPS.op_index → CPU_OPS rows) come too,
    and the origin moves to the earliest of them: launch-bound steps show the CPU running ahead of (or behind) the GPU.
    """
    gpu = gpu_ops[gpu_ops["step"] == step]
    cpu = None
    if with_cpu and cpu_ops is not None and not gpu.empty:
        idx = gpu["op_index"]
        idx = idx[(idx >= 0) & idx.isin(cpu_ops.index)].unique()
        cpu = cpu_ops.loc[idx]
    starts = [gpu["ts_us"].min()] if not gpu.empty else []
    if cpu is not None and not cpu.empty:
        starts.append(cpu["ts_us"].min())
    origin = float(min(starts)) if starts else 0.0
    return StepView(label=label, step=int(step), gpu=gpu, cpu=cpu, origin_us=origin)


def _shapes(dims, types) -> str:
    if dims is None or (isinstance(dims, float) and np.isnan(dims)):
        return ""
    try:
        txt = ", ".join(
            "[" + ", ".join(str(x) for x in d) + "]" if isinstance(d, list | tuple) else str(d) for d in dims
        )
    except TypeError:
        txt = str(dims)
    if isinstance(types, list | tuple):
        kinds = sorted({str(t) for t in types if t})
        if kinds:
            txt += "  (" + ", ".join(kinds) + ")"
    return txt


def short_label(name: str, ops: str = "") -> str:
    """What fits inside a bar: the decoded ops ('gelu+mul'), else the kernel's base name without namespaces/templates."""
    if ops:
        return ops
    s = safe_text(base_name(name)).rsplit("::", 1)[-1]
    return s if len(s) <= 28 else s[:27] + "…"


def _kernel_hover(df: pd.DataFrame) -> list[str]:
    """One hover line block per kernel: name, op, shapes, duration, bytes (estimate) and achieved bandwidth."""
    out = []
    cols = df[
        [
            "name",
            "op_name",
            "input_dims",
            "input_types",
            "dur_us",
            "s",
            "bytes",
            "achieved_gbps",
            "category",
            "library",
            "stream",
        ]
    ].itertuples(index=False, name=None)
    # A model's step repeats each layer's kernels tens of times: the name/op/shape lines and the category line are
    # built once per distinct kernel (a 48-layer step of 2,496 ops has ~60), only duration, start and bytes per op.
    # Shape lists are keyed by identity: the decoder shares one list object per distinct shape, alive during the loop.
    heads: dict[tuple, tuple[str, str]] = {}
    for name, op, dims, types, dur, s, nbytes, gbps, cat, lib, stream in cols:
        key = (name, op, id(dims), id(types), cat, lib, stream)
        hit = heads.get(key)
        if hit is None:
            head = f"<b>{html_text(name, NAME_CHARS)}</b>"
            if op:
                shp = _shapes(dims, types)
                head += f"<br>op: {html_text(op, 60)}" + (f"  {html_text(shp, 140)}" if shp else "")
            tail = f"{html_text(cat, 30)}" + (f" · {html_text(lib, 30)}" if lib else "") + f" · stream {stream}"
            hit = heads[key] = (head, tail)
        head, tail = hit
        mid = f"duration {dur:,.1f} µs · start +{s:,.1f} µs"
        if np.isfinite(nbytes):
            bw = f" · {gbps:,.0f} GB/s achieved" if np.isfinite(gbps) else ""
            mid += f"<br>bytes {fmt_bytes(nbytes)} (estimate){bw}"
        out.append(f"{head}<br>{mid}<br>{tail}")
    return out


def _cpu_hover(df: pd.DataFrame) -> list[str]:
    out = []
    for name, dims, types, dur, s in df[["name", "input_dims", "input_types", "dur_us", "s"]].itertuples(
        index=False, name=None
    ):
        shp = _shapes(dims, types)
        lines = [f"<b>{html_text(name)}</b>"]
        if shp:
            lines.append(html_text(shp, 140))
        lines.append(f"CPU {dur:,.1f} µs · start +{s:,.1f} µs")
        out.append("<br>".join(lines))
    return out


# Only what a bar, its label and its hover need: copying 34 columns of 100k+ rows would cost more than drawing.
_GPU_COLS = ["name", "ops", "category", "library", "stream", "dur_us", "op_name", "input_dims", "input_types",
             "bytes", "achieved_gbps"]  # fmt: skip
_CPU_COLS = ["name", "dur_us", "input_dims", "input_types"]
_LANE_STRIDE = 1 << 10  # lane key = row * stride + lane index: integer group keys, no string building per op


def _merge_small(df: pd.DataFrame, bin_us: float) -> pd.DataFrame:
    """Merge ops narrower than `bin_us` that start in the same bin of the same lane into one bar.

    Input columns: lane_key, s, e, dur_us, category, name (+ hover-able ones). Output: the wide ops unchanged (n=1)
    and one row per non-empty (lane, bin) of the narrow ones, coloured by the category holding most of its busy
    time. A bin holding a single op keeps that op's own row (and hover). Grouping is on one int64 key per op.
    """
    dur = df["dur_us"].to_numpy()
    wide = df[dur >= bin_us].assign(n=1)
    narrow = df[dur < bin_us]
    if narrow.empty:
        return wide
    key = narrow["lane_key"].to_numpy(np.int64) << 32 | np.floor(narrow["s"].to_numpy() / bin_us).astype(np.int64)
    narrow = narrow.assign(_key=key)
    agg = narrow.groupby("_key", sort=False).agg(
        s=("s", "min"), e=("e", "max"), n=("s", "size"), busy=("dur_us", "sum"), lane_key=("lane_key", "first")
    )
    singles = narrow[narrow["_key"].map(agg["n"]).to_numpy() == 1].drop(columns="_key").assign(n=1)
    agg = agg[agg["n"] > 1]
    many = narrow[narrow["_key"].isin(agg.index)]
    # Dominant category by busy time inside each merged bar.
    cat = many.groupby(["_key", "category"], sort=False)["dur_us"].sum().reset_index()
    cat = cat.sort_values("dur_us", ascending=False, kind="stable").drop_duplicates("_key").set_index("_key")
    agg["category"] = cat["category"]
    # The three names holding most time inside a merged bar, for its hover.
    top = many.groupby(["_key", "name"], sort=False)["dur_us"].agg(["size", "sum"]).reset_index()
    top = top.sort_values("sum", ascending=False, kind="stable").groupby("_key", sort=False).head(3)
    top["t"] = top["size"].astype(str) + "× " + top["name"].map(lambda x: html_text(x, 70))
    agg["t"] = top.groupby("_key", sort=False)["t"].agg("<br>  ".join)
    agg["dur_us"] = agg["e"] - agg["s"]
    agg["hover"] = (
        "<b>" + agg["n"].astype(str) + f" ops merged</b> (each shorter than {bin_us:,.2f} µs at this zoom)<br>busy "
        + agg["busy"].map("{:,.1f}".format) + " µs of " + agg["dur_us"].map("{:,.1f}".format)
        + " µs · start +" + agg["s"].map("{:,.1f}".format) + " µs<br>mostly " + agg["category"].astype(str)
        + "; top:<br>  " + agg["t"].fillna("")
    )  # fmt: skip
    merged = agg.drop(columns=["t", "busy"]).reset_index(drop=True)
    return pd.concat([wide, singles, merged], ignore_index=True)


def bars_frame(
    views: list[StepView],
    *,
    max_bars: int = 6000,
    window: tuple[float, float] | None = None,
    sequence: bool = False,
) -> tuple[pd.DataFrame, dict]:
    """All bars to draw, one row each: row (run), lane (label), lane_y, s, e, category, n, hover, text.
    sequence: s/e are each GPU op's slot in launch order (i, i + 0.9) instead of µs; CPU ops are not drawn; the
    hover still gives the real start and duration.

    Returns (bars, info): info has 'kernels' (GPU ops in the views), 'bars', 'merged' (bool), 'bin_us', 'lanes'.
    """
    if sequence:
        views = [StepView(v.label, v.step, v.gpu, None, v.origin_us) for v in views]
        max_bars, window = max(max_bars, sum(len(v.gpu) for v in views) + 1), None
    parts, lane_names = _lane_parts(views)
    info = {"kernels": int(sum(len(v.gpu) for v in views)), "merged": False, "bin_us": 0.0, "lanes": lane_names}
    cols = ["row", "lane", "lane_y", "s", "e", "category", "n", "hover", "text"]
    if not parts:
        return pd.DataFrame(columns=cols), info | {"bars": 0, "total_before_merge": 0}
    df = pd.concat(parts, ignore_index=True, sort=False)
    df["lane_key"] = df["row"].to_numpy(np.int64) * _LANE_STRIDE + df["lane_y"].to_numpy(np.int64)
    if window is not None:
        lo, hi = window
        df = df[(df["e"] >= lo) & (df["s"] <= hi)]
    total = len(df)
    if total > max_bars:
        df, bin_us = _merged_bars(df, max_bars, window)
        info |= {"merged": True, "bin_us": bin_us}
    else:
        df = _single_bars(df)
    df["lane"] = [lane_names[int(r)][int(y)] for r, y in zip(df["row"], df["lane_y"], strict=True)]
    df["lane_y"] = df["lane_y"].astype(float)
    df["text"] = _bar_text(df)
    if sequence:  # slots in launch order within each run (hover computed above from real times)
        df = df.sort_values(["row", "s", "lane_y"], kind="stable")
        slot = df.groupby("row").cumcount().to_numpy(dtype=float)
        df["s"], df["e"] = slot, slot + 0.9
    info["bars"] = len(df)
    info["total_before_merge"] = total
    return df[cols], info


def _lane_parts(views: list[StepView]) -> tuple[list[pd.DataFrame], dict[int, list[str]]]:
    """(one frame of ops per run and side, lane names per run): CPU ops in lane 0 when shown, then one lane per
    stream."""
    parts = []
    lane_names: dict[int, list[str]] = {}
    for row, v in enumerate(views):
        names = []
        if v.cpu is not None and not v.cpu.empty:
            c = v.cpu[_CPU_COLS].assign(
                s=v.cpu["ts_us"] - v.origin_us, e=v.cpu["end_us"] - v.origin_us, category="cpu op", kind="cpu",
                row=row, lane_y=0,
            )  # fmt: skip
            parts.append(c)
            names.append("CPU ops")
        if not v.gpu.empty:
            streams = np.sort(v.gpu["stream"].unique())
            lane_y = len(names) + np.searchsorted(streams, v.gpu["stream"].to_numpy())
            g = v.gpu[_GPU_COLS].assign(
                s=v.gpu["ts_us"] - v.origin_us, e=v.gpu["end_us"] - v.origin_us, kind="gpu", row=row, lane_y=lane_y
            )
            parts.append(g)
            names += [f"stream {st}" if st >= 0 else "stream ?" for st in streams]
        lane_names[row] = names
    return parts, lane_names


def _merged_bars(df: pd.DataFrame, max_bars: int, window) -> tuple[pd.DataFrame, float]:
    """(bars, bin width in µs): ops shorter than a bin merged per lane so that at most about max_bars are drawn."""
    lo = window[0] if window else float(df["s"].min())
    hi = window[1] if window else float(df["e"].max())
    n_lanes = max(1, df["lane_key"].nunique())
    bins = int(np.clip(max_bars // (2 * n_lanes), 100, 3000))  # ≤ 2 bars per bin (one wide, one merged)
    bin_us = max((hi - lo) / bins, 1e-3)
    is_gpu = (df["kind"] == "gpu").to_numpy()
    out = []
    for part, hover in ((df[is_gpu], _kernel_hover), (df[~is_gpu], _cpu_hover)):
        if part.empty:
            continue
        m = _merge_small(part, bin_us)
        need = m["hover"].isna().to_numpy() if "hover" in m else np.ones(len(m), bool)
        if need.any():
            m.loc[need, "hover"] = hover(m[need])
        out.append(m)
    df = pd.concat(out, ignore_index=True, sort=False)
    df["row"] = df["lane_key"] // _LANE_STRIDE
    df["lane_y"] = df["lane_key"] % _LANE_STRIDE
    return df, bin_us


def _single_bars(df: pd.DataFrame) -> pd.DataFrame:
    """One bar per op, with its hover."""
    df = df.assign(n=1)
    gpu_mask = df["kind"] == "gpu"
    hover = pd.Series("", index=df.index, dtype=object)
    if gpu_mask.any():
        hover[gpu_mask] = _kernel_hover(df[gpu_mask])
    if (~gpu_mask).any():
        hover[~gpu_mask] = _cpu_hover(df[~gpu_mask])
    df["hover"] = hover
    return df


def _bar_text(df: pd.DataFrame) -> list[str]:
    """The label inside each bar: 'n×' for merged bars, else the op's short label."""
    names = df["name"].fillna("") if "name" in df else pd.Series("", index=df.index)
    ops = df["ops"].fillna("") if "ops" in df else pd.Series("", index=df.index)
    labels: dict[tuple, str] = {}  # one label per distinct (name, ops, category): names repeat layer after layer

    def label(n, nm, op, k) -> str:
        if n > 1:
            return f"{int(n)}×"
        key = (nm, op, k)
        if key not in labels:
            labels[key] = html_text(short_label(nm, "" if k == "cpu op" else op), 40)
        return labels[key]

    return [label(n, nm, op, k) for n, nm, op, k in zip(df["n"], names, ops, df["category"], strict=True)]


def timeline_figure(
    views: list[StepView],
    *,
    title: str = "",
    max_bars: int = 6000,
    svg_limit: int = 6000,
    label_limit: int = 400,
    webgl: bool | None = None,
    window: tuple[float, float] | None = None,
    template: str | None = None,
    sequence: bool = False,
) -> go.Figure:
    """Stacked step timelines (one subplot row per run, same x scale). `webgl=None` picks WebGL above `svg_limit` bars.
    sequence: one equal slot per GPU op in launch order (bars_frame), labels written vertically; hovers keep times.

    The figure's layout.meta carries what was drawn ({'kernels', 'bars', 'merged', 'bin_us', 'webgl'}), so the page can
    say "37,112 kernels shown as 5,812 bars" instead of silently aggregating. A run whose step has no GPU op (and no
    CPU op shown) gets no lane: an empty subplot would hold no axis and, at the bottom, take the shared x-axis with it;
    meta['empty_runs'] names those runs for the page to say so.
    """
    empty = [v.label for v in views if v.gpu.empty and (v.cpu is None or v.cpu.empty)]
    views = [v for v in views if not (v.gpu.empty and (v.cpu is None or v.cpu.empty))]
    bars, info = bars_frame(views, max_bars=max_bars, window=window, sequence=sequence)
    use_gl = (info["bars"] > svg_limit) if webgl is None else bool(webgl)
    unit, div = _x_unit(bars, sequence)
    lane_px = SEQUENCE_LANE_PX if sequence else LANE_PX
    lanes = info["lanes"]
    n_rows = max(1, len(views))
    heights = [max(1, len(lanes.get(i, []))) + 0.9 for i in range(n_rows)]
    titles = []
    for v in views:
        k = len(v.gpu)
        titles.append(f"<b>{html_text(v.label, 40)}</b> · step {v.step} · {k:,} GPU ops · GPU span {v.span_us:,.1f} µs")
    fig = make_subplots(
        rows=n_rows,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=min(0.12, 0.35 / n_rows),
        row_heights=[h / sum(heights) for h in heights],
        subplot_titles=titles or None,
    )
    label_bars = not use_gl and info["bars"] <= label_limit  # names inside bars: a screenshot explains itself
    _add_bars(fig, bars, use_gl=use_gl, text=label_bars and not sequence, div=div, lane_px=lane_px)
    _lane_axes(fig, lanes, n_rows)
    _step_ends(fig, views, sequence, div)
    fig.update_xaxes(showgrid=True, gridcolor="rgba(0,0,0,0.08)", zeroline=False)
    x_title = (
        "GPU ops in launch order, one equal slot each (hover for times)"
        if sequence
        else f"{unit} since the step's start (each run re-based to its own step)"
    )
    fig.update_xaxes(title_text=x_title, row=n_rows, col=1)
    if window is not None:
        fig.update_xaxes(range=[window[0] / div, window[1] / div])
    height = int(90 + sum(heights) * lane_px * 1.25 + 30 * n_rows)
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left") if title else None,
        barmode="overlay",
        height=height,
        # top LEFT: Plotly's toolbar appears at the top right on hover and covered a right-aligned legend
        legend=dict(orientation="h", yanchor="bottom", y=1.0 + 40 / height, x=0, xanchor="left", title=None),
        hoverlabel=dict(align="left", font_size=12),
        margin=dict(l=90, r=20, t=90 if title else 60, b=50),
        bargap=0.2,
        uniformtext=dict(minsize=9, mode="hide"),  # a label that does not fit its bar is hidden, never overflows
        template=template,
        meta={k: info[k] for k in ("kernels", "bars", "merged", "bin_us")}
        | {"webgl": use_gl, "unit": unit, "sequence": sequence, "empty_runs": empty},
    )
    for ann in fig.layout.annotations:  # subplot titles: left-aligned, like lane groups in Perfetto
        ann.update(x=0.0, xanchor="left", font=dict(size=13))
    if sequence:  # a vertical label in each slot (bar text cannot turn inside a horizontal bar), where slots fit one
        _sequence_labels(fig, bars)
    return fig


def _x_unit(bars: pd.DataFrame, sequence: bool) -> tuple[str, float]:
    """(unit, divisor of µs): µs for one forward, ms or s for a training step (hovers always say µs); GPU ops in
    sequence mode."""
    if sequence:
        return "GPU ops", 1.0
    x_max = float(bars["e"].max()) if len(bars) else 0.0
    return ("s", 1e6) if x_max >= 2e7 else ("ms", 1e3) if x_max >= 2e4 else ("µs", 1.0)


def _add_bars(fig: go.Figure, bars: pd.DataFrame, *, use_gl: bool, text: bool, div: float, lane_px: float) -> None:
    """One trace per (run, category), in category order, each category once in the legend: WebGL lines with hover
    markers, or SVG bars (with their names inside when `text`)."""
    shown_legend: set[str] = set()
    order = {c: i for i, c in enumerate(CATEGORY_COLORS)}
    groups = sorted(bars.groupby(["row", "category"], sort=False), key=lambda g: (order.get(g[0][1], 99), g[0][0]))
    for (row, cat), part in groups:
        color = CATEGORY_COLORS.get(cat, CATEGORY_COLORS["other"])
        show = cat not in shown_legend
        shown_legend.add(cat)
        common = dict(name=str(cat), legendgroup=str(cat), showlegend=show)
        if use_gl:
            _add_gl_part(fig, part, row, color, common, div, lane_px)
        else:
            _add_bar_part(fig, part, row, color, common, div, text)


def _add_gl_part(fig: go.Figure, part: pd.DataFrame, row: int, color: str, common: dict, div: float, lane_px) -> None:
    cat = common["name"]
    k = len(part)
    xs = np.empty(3 * k)
    ys = np.empty(3 * k)
    xs[0::3], xs[1::3], xs[2::3] = part["s"].to_numpy() / div, part["e"].to_numpy() / div, np.nan
    ys[0::3] = ys[1::3] = part["lane_y"].to_numpy()
    ys[2::3] = np.nan
    fig.add_trace(
        go.Scattergl(
            x=xs, y=ys, mode="lines", line=dict(color=color, width=lane_px * 0.55), hoverinfo="skip", **common
        ),
        row=row + 1,
        col=1,
    )
    # Hover targets at bar midpoints (WebGL lines hover only at vertices).
    fig.add_trace(
        go.Scattergl(
            x=((part["s"] + part["e"]) / 2 / div).to_numpy(),
            y=part["lane_y"].to_numpy(),
            mode="markers",
            marker=dict(color=color, size=4, opacity=0.01),
            hovertext=part["hover"].to_numpy(),
            hoverinfo="text",
            name=str(cat),
            legendgroup=str(cat),
            showlegend=False,
        ),
        row=row + 1,
        col=1,
    )


def _add_bar_part(fig: go.Figure, part: pd.DataFrame, row: int, color: str, common: dict, div: float, text) -> None:
    fig.add_trace(
        go.Bar(
            orientation="h",
            base=(part["s"] / div).to_numpy(),
            x=((part["e"] - part["s"]) / div).to_numpy(),
            y=part["lane_y"].to_numpy(),
            width=0.62,
            marker=dict(color=color, line=dict(width=0)),
            hovertext=part["hover"].to_numpy(),
            hoverinfo="text",
            text=part["text"].to_numpy() if text else None,
            textposition="inside",
            insidetextanchor="middle",
            textangle=0,
            constraintext="inside",
            **common,
        ),
        row=row + 1,
        col=1,
    )


def _lane_axes(fig: go.Figure, lanes: dict, n_rows: int) -> None:
    """Each run's lanes as y ticks, first lane on top."""
    for row in range(n_rows):
        names = lanes.get(row, [])
        fig.update_yaxes(
            tickmode="array",
            tickvals=list(range(len(names))),
            ticktext=names,
            range=[len(names) - 0.5, -0.5] if names else [0.5, -0.5],  # first lane on top
            showgrid=False,
            zeroline=False,
            fixedrange=True,  # zoom in time only; lanes stay put
            row=row + 1,
            col=1,
        )


def _step_ends(fig: go.Figure, views: list[StepView], sequence: bool, div: float) -> None:
    # Where each run's GPU work for the step ends: the shorter step is the point of the whole exercise.
    for row, v in enumerate(views):
        if v.gpu.empty:
            continue
        end = float(len(v.gpu)) if sequence else float(v.gpu["end_us"].max() - v.origin_us)
        fig.add_vline(x=end / div, line=dict(color="#444", width=1, dash="dot"), row=row + 1, col=1)


def _sequence_labels(fig: go.Figure, bars: pd.DataFrame) -> None:
    """A vertical label in each slot where the slots of the widest run fit one."""
    # The runs share one x-axis, so a slot is as narrow as the longest run makes it: a 76-op compile step under
    # a 246-op eager one has 246 slots' widths too, and its labels overprinted.
    widest = int(bars.groupby("row").size().max()) if len(bars) else 0
    fits = bars if widest <= SEQUENCE_LABEL_SLOTS else bars.iloc[0:0]
    # Plain dicts with explicit axis refs, set once: add_annotation(row=, col=) per label cost ~70 ms each
    # (a grid lookup and a full validation per call), 22 s for a 322-op step.
    extra = [
        dict(
            x=(b.s + b.e) / 2, y=b.lane_y, text=b.text if len(b.text) <= 18 else b.text[:17] + "…",
            textangle=-90, showarrow=False, font=dict(size=10, color="#1f1f1f"),
            xref="x" if b.row == 0 else f"x{int(b.row) + 1}", yref="y" if b.row == 0 else f"y{int(b.row) + 1}",
        )
        for b in fits.itertuples(index=False)
    ]  # fmt: skip
    if extra:
        fig.update_layout(annotations=[*fig.layout.annotations, *extra])
    fig.layout.meta = {**fig.layout.meta, "labels": len(extra)}
