"""Roofline: achieved FLOP/s vs arithmetic intensity, one marker per kernel, against the GPU's roofs (pure).

x = FLOPs / HBM bytes per call (both ESTIMATES from shapes and dtypes), y = achieved TFLOP/s (estimated FLOPs over
the measured duration). The slanted roof is peak HBM bandwidth × intensity, the flat ones the dense tensor-core /
CUDA-core peaks of GpuSpec. A kernel far under its roof is where the rest of the time is. Pure data-movement
kernels (0 FLOPs) cannot sit on a log axis; `roofline_points` reports them so the page can say so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analyzer.figures.timeline import CATEGORY_COLORS
from analyzer.fmt import html_text
from analyzer.gpus import GpuSpec
from analyzer.opinfo import dtypes as dt

DODGE_DECADES = 0.05  # ±15 % in intensity per run: apart on screen, far below what would change a reading
MEASURED_ROOF_COLOR = "#D55E00"  # measured roofs: the theme's cost/attention-grabbing orange, dashed
MAX_GEMM_LABELS = 12  # more would cover the chart; the hover names every marker
SYMBOLS = ("circle", "diamond", "square", "triangle-up", "x", "star", "cross", "pentagon")
ROOF_DTYPES = ("fp8", "bf16", "fp16", "tf32", "fp32")
# x-axis byte figures: logical (every tensor once) or predicted DRAM traffic in sequence (analyzer.dram)
BYTES = {"bytes_per_call": "HBM byte (logical estimate)", "dram_bytes_per_call": "DRAM byte (predicted, L2-aware)"}


def roofline_points(
    tables: list[tuple[str, pd.DataFrame]], bytes_column: str = "bytes_per_call"
) -> tuple[pd.DataFrame, dict]:
    """Plottable kernels of every run (KERNEL_SUMMARY rows + run, ai, tflops) and counts of what was left out.
    bytes_column: the byte figure intensity divides by (BYTES)."""
    parts, skipped = [], {"no_estimate": 0, "zero_flops": 0}
    for label, k in tables:
        f, b, t = k["flops_per_call"], k[bytes_column], k["achieved_tflops"]
        ok = f.gt(0) & b.gt(0) & t.gt(0) & np.isfinite(f) & np.isfinite(b) & np.isfinite(t)
        skipped["zero_flops"] += int((f == 0).sum())
        skipped["no_estimate"] += int((~ok & (f != 0)).sum())
        p = k[ok].assign(run=label, ai=(f / b)[ok], tflops=t[ok])
        parts.append(p)
    pts = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return pts, skipped


def _hover(p: pd.DataFrame, bytes_column: str = "bytes_per_call") -> list[str]:
    per = "FLOP/byte (est.)" if bytes_column == "bytes_per_call" else "FLOP/DRAM byte (predicted)"
    out = []
    for run, name, op, shapes, ai, tf, gbps, pbw, pfl, t in p[
        [
            "run",
            "name",
            "op_name",
            "shapes",
            "ai",
            "tflops",
            "achieved_gbps",
            "pct_peak_bw",
            "pct_peak_flops",
            "time_us_per_step",
        ]
    ].itertuples(index=False, name=None):
        nm = str(name)
        nm = nm if len(nm) <= 100 else nm[:99] + "…"
        lines = [f"<b>{html_text(nm)}</b>", f"run {html_text(run)}"]
        if op:
            lines.append(f"op {html_text(op)} {html_text(shapes, 140)}")
        lines.append(f"{ai:,.1f} {per} · {tf:,.1f} TFLOP/s · {gbps:,.0f} GB/s")
        peaks = [f"{v:,.0f}% of peak {what}" for v, what in ((pfl, "FLOP/s"), (pbw, "BW")) if np.isfinite(v)]
        if peaks:
            lines.append(" · ".join(peaks))
        lines.append(f"{t:,.1f} µs per step")
        out.append("<br>".join(lines))
    return out


def roofline_figure(
    tables: list[tuple[str, pd.DataFrame]],
    gpu: GpuSpec | None,
    *,
    title: str = "",
    dtypes: tuple[str, ...] | None = None,
    template: str | None = None,
    bytes_column: str = "bytes_per_call",
    measured: dict | None = None,
) -> go.Figure:
    """The roofline of `tables` (label, Summary.kernels) on `gpu` (no roofs when None: unknown GPU).

    `measured`: roofs the runner measured on this GPU ({'copy_gbps', 'matmul_tflops', 'matmul_dtype'}, from the
    manifest's "ceilings"), drawn dashed in orange beside the datasheet roofs (what the card really reaches).

    `dtypes` picks the flat roofs to draw (default: the ones GpuSpec knows among bf16/fp16/fp32/tf32/fp8 that the
    kernels' dtypes use, else bf16 and fp32). Marker: symbol per run, colour per category, area ∝ time per step.
    """
    pts, skipped = roofline_points(tables, bytes_column)
    fig = go.Figure()
    if not pts.empty:
        _add_points(fig, pts, tables, bytes_column)
    ai = pts["ai"] if not pts.empty else pd.Series([1.0, 1000.0])
    x_lo = float(10 ** np.floor(np.log10(max(ai.min() / 3, 1e-3))))
    x_hi = float(10 ** np.ceil(np.log10(max(ai.max() * 3, 10.0))))
    if gpu is not None:
        _add_roofs(fig, gpu, dtypes, pts, x_lo, x_hi)
    if (measured or {}).get("copy_gbps") or (measured or {}).get("matmul_tflops"):
        _add_measured_roof(fig, measured, gpu, x_lo, x_hi)
    fig.update_xaxes(
        type="log",
        title_text=f"arithmetic intensity, FLOP per {BYTES.get(bytes_column, bytes_column)}",
        range=[np.log10(x_lo), np.log10(x_hi)],
    )
    fig.update_yaxes(type="log", title_text="achieved TFLOP/s (estimated FLOPs / measured time)")
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left") if title else None,
        height=620,
        template=template,
        hoverlabel=dict(align="left"),
        # A vertical legend right of the plot: runs (symbols), categories (colours), roofs, each under its title.
        legend=dict(
            orientation="v", x=1.01, xanchor="left", y=1.0, yanchor="top", groupclick="togglegroup", tracegroupgap=14
        ),
        margin=dict(l=70, r=20, t=70 if title else 30, b=60),
        meta={"points": int(len(pts)), **skipped, "gpu": gpu.name if gpu else None},
    )
    return fig


def _add_points(fig: go.Figure, pts: pd.DataFrame, tables: list, bytes_column: str) -> None:
    """Each run's kernels (symbol per run, colour per category, area ∝ time per step), the GEMMs named, and the
    legend: runs, then categories."""
    tmax = float(pts["time_us_per_step"].max()) or 1.0
    size = 9 + 26 * np.sqrt(pts["time_us_per_step"].fillna(0).clip(lower=0) / tmax)
    pts = pts.assign(_size=size, _hover=_hover(pts, bytes_column))
    gemm_pts: list[tuple[float, float, str]] = []
    for i, (label, _) in enumerate(tables):
        gemm_pts += _add_run(fig, pts, i, label, len(tables))
    _add_gemm_labels(fig, gemm_pts)
    _add_category_swatches(fig, pts)


def _add_run(fig: go.Figure, pts: pd.DataFrame, i: int, label: str, n_runs: int) -> list[tuple[float, float, str]]:
    """One run's markers and its legend entry; its GEMMs as (x, TFLOP/s, label) for the labels."""
    p = pts[pts["run"] == label]
    if p.empty:
        return []
    symbol = SYMBOLS[i % len(SYMBOLS)]
    group = f"run-{i}"
    # The same GEMM in every run sits on one spot (same intensity, similar TFLOP/s): each run's markers are
    # nudged DODGE_DECADES apart in x, and the GEMMs carry the run's name, so they can be told apart.
    # The hover still gives the true intensity.
    shift = 10 ** (DODGE_DECADES * (i - (n_runs - 1) / 2))
    gemm_pts = list(
        (float(a) * shift, float(t), f"{html_text(label)} · {u:,.0f} µs/step")
        for a, t, u in p.loc[p["category"] == "gemm", ["ai", "tflops", "time_us_per_step"]].itertuples(
            index=False, name=None
        )
    )
    fig.add_trace(
        go.Scatter(
            x=p["ai"] * shift,
            y=p["tflops"],
            mode="markers",
            name=html_text(label),
            legendgroup=group,
            showlegend=False,
            marker=dict(
                symbol=symbol,
                size=p["_size"],
                color=[CATEGORY_COLORS.get(c, CATEGORY_COLORS["other"]) for c in p["category"]],
                line=dict(color="#1F2933", width=1.2),
                opacity=0.9,
            ),
            hovertext=p["_hover"],
            hoverinfo="text",
        )
    )
    # The legend entry: the run's symbol in neutral grey (the markers' colours mean category, not run).
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=html_text(label),
            legendgroup=group,
            legendgrouptitle_text="run" if i == 0 else None,
            marker=dict(symbol=symbol, size=12, color="#CBD2D9", line=dict(color="#1F2933", width=1.2)),
        )
    )
    return gemm_pts


def _add_gemm_labels(fig: go.Figure, gemm_pts: list[tuple[float, float, str]]) -> None:
    # GEMM labels: stacked one above the other to the left of the cluster, each with an arrow to its marker, so
    # coinciding GEMMs of several runs are named (the markers alone sat on one spot, unlabelled).
    for k, (x, y, text) in enumerate(sorted(gemm_pts, key=lambda g: (-g[1], g[0]))[:MAX_GEMM_LABELS]):
        fig.add_annotation(
            x=float(np.log10(x)),
            y=float(np.log10(y)),
            text=text,
            showarrow=True,
            arrowhead=0,
            arrowwidth=1,
            arrowcolor="#9AA5B1",
            ax=-150,
            ay=10 + 20 * k,
            xanchor="right",
            font=dict(size=11, color="#52606D"),
            bgcolor="rgba(255,255,255,0.8)",
        )


def _add_category_swatches(fig: go.Figure, pts: pd.DataFrame) -> None:
    for j, cat in enumerate(sorted(pts["category"].unique())):  # legend-only swatches for the colours
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=html_text(cat),
                legendgroup="categories",
                legendgrouptitle_text="category" if j == 0 else None,
                marker=dict(symbol="square", size=12, color=CATEGORY_COLORS.get(cat, CATEGORY_COLORS["other"])),
            )
        )


def _add_roofs(fig: go.Figure, gpu: GpuSpec, dtypes, pts: pd.DataFrame, x_lo: float, x_hi: float) -> None:
    """The datasheet roofs: HBM bandwidth, and a flat roof per dtype from its ridge point on."""
    if dtypes is None:
        used = set()
        if not pts.empty and "dtypes" in pts:
            used = dt.peak_keys(pts["dtypes"].astype(str).unique())
        dtypes = tuple(d for d in ROOF_DTYPES if d in used and d in gpu.tflops) or tuple(
            d for d in ("bf16", "fp32") if d in gpu.tflops
        )
    xs = np.logspace(np.log10(x_lo), np.log10(x_hi), 200)
    peak_top = max([gpu.tflops[d] for d in dtypes if d in gpu.tflops] or [1.0])
    mem = gpu.hbm_gbps * xs / 1000.0  # GB/s × FLOP/B = GFLOP/s → TFLOP/s
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=np.minimum(mem, peak_top),
            mode="lines",
            name=f"HBM {gpu.hbm_gbps:,.0f} GB/s",
            line=dict(color="#1F2933", width=2),
            hoverinfo="skip",
            legendgroup="roofs",
            legendgrouptitle_text="roofs",
        )
    )
    dash = ("solid", "dash", "dot", "dashdot", "longdash")
    for i, d in enumerate(dtypes):
        peak = gpu.tflops.get(d)
        if not peak:
            continue
        ridge = peak * 1000.0 / gpu.hbm_gbps
        xr = xs[xs >= ridge]
        if xr.size == 0:
            continue
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([[ridge], xr]),
                y=np.full(xr.size + 1, peak),
                mode="lines",
                name=f"{d} peak {peak:,.0f} TFLOP/s (ridge {ridge:,.0f} FLOP/B)",
                line=dict(color="#52606D", width=1.6, dash=dash[i % len(dash)]),
                hoverinfo="skip",
                legendgroup="roofs",
            )
        )


def _add_measured_roof(fig: go.Figure, measured: dict, gpu: GpuSpec | None, x_lo: float, x_hi: float) -> None:
    """The roofs the runner measured on this GPU (copy bandwidth, matmul TFLOP/s), dashed in orange."""
    copy_gbps, mm_tflops = measured.get("copy_gbps"), measured.get("matmul_tflops")
    xs = np.logspace(np.log10(x_lo), np.log10(x_hi), 200)
    ys = np.full(xs.size, np.inf)
    parts = []
    if copy_gbps:
        ys = np.minimum(ys, copy_gbps * xs / 1000.0)
        parts.append(f"copy {copy_gbps:,.0f} GB/s")
    if mm_tflops:
        ys = np.minimum(ys, mm_tflops)
        parts.append(f"{html_text(measured.get('matmul_dtype') or '')} matmul {mm_tflops:,.0f} TFLOP/s")
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines",
            name="measured: " + ", ".join(parts),
            line=dict(color=MEASURED_ROOF_COLOR, width=2, dash="dash"),
            hoverinfo="skip",
            legendgroup="roofs",
            legendgrouptitle_text=None if gpu is not None else "roofs",
        )
    )
