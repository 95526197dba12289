"""Side-by-side charts of a Diff (pure: Diff in, Plotly figure out; analyzer.diff has the numbers).

    category_time_figure(diff)             GPU time per step by category (+ idle) for every run, baseline first
    fusion_groups_figure(diff, label)      per fusion group: baseline vs candidate time, and HBM bytes moved
    time_breakdown_figure(diff, label)     where a candidate's kernel time per step went (waterfall, sums exactly)

Every figure is in the FuseLens slide theme and titled with the GPU, workload, shapes and dtype it rests on.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analyzer.figures.theme import (
    BASELINE_COLOR,
    CATEGORY_COLORS,
    COST_COLOR,
    SAVED_COLOR,
    TEMPLATE,
    chart_title,
    label,
    run_color,
    wrap,
)
from analyzer.fmt import fmt_bytes, fmt_saved, fmt_us, html_text
from analyzer.runmeta import diff_context


def _title(diff, title: str) -> dict:
    return chart_title(title, **diff_context(diff))


def category_time_figure(diff) -> go.Figure:
    """One horizontal bar per run (baseline on top): GPU time per step split by kernel category, then idle time
    (gaps inside the step's GPU span) in light grey. µs per step, medians over steady-state steps."""
    cats = diff.categories()
    runs = [r.label for r in diff.runs]
    y = [html_text(r) for r in runs]
    fig = go.Figure()
    order = list(dict.fromkeys(cats["category"].tolist()))
    for cat in order:
        sub = cats[cats["category"] == cat].set_index("run")
        x = [float(sub["time_us"].get(r, 0.0)) if r in sub.index else 0.0 for r in runs]
        n = [float(sub["count"].get(r, 0.0)) if r in sub.index else 0.0 for r in runs]
        fig.add_bar(
            y=y,
            x=x,
            name=html_text(cat),
            orientation="h",
            marker_color=CATEGORY_COLORS.get(cat, CATEGORY_COLORS["other"]),
            customdata=[[c, fmt_us(v)] for c, v in zip(n, x, strict=True)],
            hovertemplate="%{y}<br>"
            + html_text(cat)
            + ": %{customdata[1]} per step, %{customdata[0]:.0f} GPU ops<extra></extra>",
        )
    idle = [r.idle_us_per_step if math.isfinite(r.idle_us_per_step) else 0.0 for r in diff.runs]
    fig.add_bar(
        y=y,
        x=idle,
        name="idle (gaps)",
        orientation="h",
        marker=dict(color=CATEGORY_COLORS["idle"], pattern=dict(shape="/", fgcolor="#9AA5B1")),
        hovertemplate="%{y}<br>idle: %{x:,.1f} µs per step<extra></extra>",
    )
    for r in diff.runs:
        total = r.gpu_time_us_per_step
        fig.add_annotation(
            y=html_text(r.label),
            x=(total if math.isfinite(total) else 0) + (r.idle_us_per_step if math.isfinite(r.idle_us_per_step) else 0),
            text=f"  {fmt_us(total)} · {r.kernels_per_step} kernels",
            showarrow=False,
            xanchor="left",
            font=dict(size=14),
        )
    fig.update_layout(
        template=TEMPLATE,
        barmode="stack",
        title=_title(diff, "GPU time per step by category"),
        xaxis_title="µs per step (median over steady-state steps)",
        yaxis=dict(autorange="reversed", automargin=True),
        legend=dict(traceorder="normal"),
        height=max(320, 140 + 70 * len(runs)),
        margin=dict(r=160),
    )
    return fig


def fusion_groups_figure(diff, label_: str | None = None, max_groups: int = 12) -> go.Figure:
    """Two panels per fusion group (and kernel swap) of one candidate: baseline vs candidate kernel time, and
    estimated HBM bytes moved (candidate = baseline minus the intermediates' round trips)."""
    cd = diff.candidate(label_) if label_ else diff.candidates[0]
    rows = (cd.fusions + cd.swaps)[:max_groups]
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=("kernel time per step (µs)", "HBM bytes per step (estimate)"),
    )
    if not rows:
        fig.add_annotation(
            text=f"no fusion groups: {html_text(cd.label)} runs the same kernels' work as {html_text(cd.base_label)}",
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            font=dict(size=16),
        )
    names = _group_names(rows)
    _add_group_bars(fig, diff, cd, rows, names)
    fig.update_layout(
        template=TEMPLATE,
        barmode="group",
        title=_title(
            diff,
            f"Fusion groups: {cd.label} vs {cd.base_label} — {fmt_bytes(cd.hbm_bytes_avoided_per_step)} HBM traffic "
            f"avoided, {fmt_saved(cd.time_saved_us_per_step)} per step"
            + (" (fusion groups and swaps)" if cd.swaps else ""),
        ),
        height=max(360, 170 + 80 * max(len(rows), 1)),
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    if not rows:  # nothing to scale: no '−1 µs' / '−1B' ticks around the empty plot
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    fig.update_yaxes(showticklabels=False, row=1, col=2)
    fig.update_xaxes(tickformat="~s", ticksuffix="B", row=1, col=2)  # '50MB', not a bare '50M'
    fig.update_xaxes(ticksuffix=" µs", row=1, col=1)
    return fig


def _group_names(rows) -> list[str]:
    """One distinct y label per group.

    Each row says what the group computes first (RoPE, RMSNorm, …), then the fused kernel: Inductor names two RoPE
    kernels after the attention op that follows them, so the kernel name alone read the same on both rows."""
    names = []
    for f in rows:
        kind = html_text(getattr(f, "pattern", "") or "", 40)
        n = f"{label(f.fused_kernel, 32 if kind else 44)}"  # the kind says what it is: the name can be shorter
        if f.count_per_step > 1:
            n += f" ({f.count_per_step} per step)"
        n = f"<b>{kind}</b><br>{n}" if kind else n
        while n in names:
            n += " "
        names.append(n)
    return names


def _add_group_bars(fig: go.Figure, diff, cd, rows, names: list[str]) -> None:
    """Baseline and candidate bars of each group: kernel time (left), estimated HBM bytes (right), "unknown" where a
    byte estimate is missing."""
    hover_rep = ["<br>".join(label(x, 70) for x in f.replaces) for f in rows]
    base_t = [f.base_time_us_per_step for f in rows]
    cand_t = [f.candidate_time_us_per_step for f in rows]
    base_b = [f.base_bytes_per_step for f in rows]
    cand_b = [f.candidate_bytes_per_step for f in rows]
    common = dict(orientation="h", y=names, customdata=hover_rep)
    fig.add_bar(
        x=base_t,
        name=html_text(cd.base_label),
        marker_color=BASELINE_COLOR,
        legendgroup="b",
        hovertemplate="%{y}<br>replaces:<br>%{customdata}<br>baseline: %{x:,.1f} µs<extra></extra>",
        row=1,
        col=1,
        **common,
    )
    fig.add_bar(
        x=cand_t,
        name=html_text(cd.label),
        marker_color=run_color(1 + diff.candidates.index(cd)),
        legendgroup="c",
        hovertemplate="%{y}<br>candidate: %{x:,.1f} µs<extra></extra>",
        row=1,
        col=1,
        **common,
    )
    fig.add_bar(
        x=[b if math.isfinite(b) else None for b in base_b],
        name=html_text(cd.base_label),
        marker_color=BASELINE_COLOR,
        legendgroup="b",
        showlegend=False,
        hovertemplate="%{y}<br>baseline: %{x:,.0f} B (estimate)<extra></extra>",
        row=1,
        col=2,
        **common,
    )
    fig.add_bar(
        x=[b if math.isfinite(b) else None for b in cand_b],
        name=html_text(cd.label),
        marker_color=run_color(1 + diff.candidates.index(cd)),
        legendgroup="c",
        showlegend=False,
        hovertemplate="%{y}<br>candidate: %{x:,.0f} B (estimate)<extra></extra>",
        row=1,
        col=2,
        **common,
    )
    # An unknown byte estimate has no bar, which reads as 0: write "unknown" where that bar would be.
    unknown = [
        (n, side) for n, b, c in zip(names, base_b, cand_b, strict=True) for side, v in ((0, b), (1, c))
        if not math.isfinite(v)
    ]  # fmt: skip
    if unknown:
        fig.add_scatter(
            x=[0] * len(unknown), y=[n for n, _ in unknown], mode="text", text=["unknown"] * len(unknown),
            textposition="middle right", textfont=dict(color="#7B8794", size=12), showlegend=False,
            hovertemplate="%{y}<br>no byte estimate (see the estimate basis)<extra></extra>", row=1, col=2,
        )  # fmt: skip


def time_breakdown_figure(diff, label_: str | None = None) -> go.Figure:
    """Waterfall from the baseline's kernel time per step to the candidate's: fusion groups, kernel choices,
    matched GEMMs, other matched kernels, removed and added kernels (positive = time saved)."""
    cd = diff.candidate(label_) if label_ else diff.candidates[0]
    tb = cd.time_breakdown
    # two-line category labels, upright: at page width (~700-1000 px for 8 bars) rotated one-line labels were cut
    # off at the bottom
    steps = [
        ("fusion<br>groups", tb["saved_by_fusion_groups_us"]),
        ("kernel<br>choices", tb["saved_by_kernel_choices_us"]),
        ("matched<br>GEMMs", tb["saved_on_matched_gemms_us"]),
        ("other<br>matched", tb["saved_on_other_matched_us"]),
        ("removed<br>kernels", tb["removed_kernels_us"]),
        ("added<br>kernels", tb["added_kernels_us"]),
    ]
    # run labels wrapped onto up to 3 lines, never cut ('geglu_compile_bf16' stays whole, on screen and in the PNG)
    x = [wrap(html_text(cd.base_label), 14)] + [s[0] for s in steps]
    x += [wrap(html_text(cd.label), 14)]
    if x[-1] == x[0]:
        x[-1] += " "  # a category axis merges equal labels
    y = [tb["base_kernel_time_us"]] + [-v for _, v in steps] + [tb["candidate_kernel_time_us"]]
    fig = go.Figure(
        go.Waterfall(
            x=x,
            y=y,
            measure=["absolute"] + ["relative"] * len(steps) + ["total"],
            decreasing=dict(marker_color=SAVED_COLOR),
            increasing=dict(marker_color=COST_COLOR),
            totals=dict(marker_color=BASELINE_COLOR),
            text=[fmt_us(abs(v)) for v in y],
            textposition="outside",
            connector=dict(line=dict(color="#9AA5B1")),
            hovertemplate="%{x}: %{y:,.1f} µs<extra></extra>",
        )
    )
    # The axis starts at 0: a baseline at 179-665 µs made a 5 % saving look like half the bar. The saved and added
    # amounts are labelled on their bars, so small steps stay readable.
    running = [y[0]]
    for v in y[1:-1]:
        running.append(running[-1] + v)
    hi_val = max([*running, y[-1], 0.0])
    fig.update_layout(
        template=TEMPLATE,
        title=_title(diff, f"Where {cd.label}'s kernel time per step went (vs {cd.base_label})"),
        yaxis=dict(range=[0, hi_val * 1.12], title=dict(text="µs per step", standoff=10), automargin=True),
        xaxis=dict(tickangle=0, automargin=True),
        showlegend=False,
        height=480,
        margin=dict(t=110, b=70),
    )
    return fig
