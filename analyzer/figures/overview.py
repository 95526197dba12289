"""GPU time per step by category, one horizontal stacked bar per run (pure: per-step dicts in, Plotly figure out).

Input is Summary.per_step['by_category'] ({category: {'count', 'time_us', 'bytes'}}, medians over steady-state
steps), so runs of different lengths compare per step. Idle time (gaps between GPU ops inside the step) is its own
light segment: launch-bound runs show it at once.
"""

from __future__ import annotations

import plotly.graph_objects as go

from analyzer.figures.timeline import CATEGORY_COLORS
from analyzer.fmt import html_text
from analyzer.schema import CATEGORIES

IDLE_COLOR = "#E4E7EB"
IDLE_DRAW_MAX = 20.0  # idle more than this many times a run's GPU op time is named, not drawn


def category_figure(runs: list[tuple[str, dict]], *, title: str = "", template: str | None = None) -> go.Figure:
    """`runs`: (label, Summary.per_step). Bars in the given order, top to bottom; segments in schema category order."""
    labels = [html_text(label) for label, _ in runs]
    present = [c for c in CATEGORIES if any((ps.get("by_category") or {}).get(c) for _, ps in runs)]
    extra = sorted({c for _, ps in runs for c in (ps.get("by_category") or {}) if c not in CATEGORIES})
    fig = go.Figure()
    for cat in present + extra:
        xs, counts = [], []
        for _, ps in runs:
            entry = (ps.get("by_category") or {}).get(cat) or {}
            xs.append(float(entry.get("time_us") or 0.0))
            counts.append(entry.get("count"))
        fig.add_trace(
            go.Bar(
                y=labels,
                x=xs,
                orientation="h",
                name=html_text(cat),
                marker=dict(color=CATEGORY_COLORS.get(cat, CATEGORY_COLORS["other"]), line=dict(width=0)),
                customdata=[[c if c is not None else float("nan")] for c in counts],
                hovertemplate=f"<b>%{{y}}</b> · {html_text(cat)}<br>%{{x:,.1f}} µs per step · %{{customdata[0]:,.0f}} ops<extra></extra>",
                text=[f"{x:,.0f}" if x > 0 else "" for x in xs],
                textposition="inside",
                insidetextanchor="middle",
            )
        )
    idle = [float(ps.get("idle_us") or 0.0) for _, ps in runs]
    op_time = [
        sum(float((e or {}).get("time_us") or 0.0) for e in (ps.get("by_category") or {}).values()) for _, ps in runs
    ]
    # idle far beyond the GPU time (a trace whose step waits on the host or data: TraceLens's MI300X normalization
    # sample, 1.0 ms of GPU work in a 1,068.8 ms step) would shrink every category to a sliver: left out of the bar,
    # and said beside it
    skipped = [i for i, (v, t) in enumerate(zip(idle, op_time, strict=True)) if t > 0 and v > IDLE_DRAW_MAX * t]
    for i in skipped:
        fig.add_annotation(
            y=labels[i],
            x=op_time[i],
            text=f"  idle {idle[i] / 1000:,.1f} ms not drawn ({idle[i] / op_time[i]:,.0f}× the GPU time)",
            showarrow=False,
            xanchor="left",
            font=dict(size=12, color="#52606D"),
        )
        idle[i] = 0.0
    if any(v > 0 for v in idle):
        fig.add_trace(
            go.Bar(
                y=labels,
                x=idle,
                orientation="h",
                name="idle (gaps)",
                marker=dict(color=IDLE_COLOR, line=dict(color="#9AA5B1", width=1)),
                hovertemplate="<b>%{y}</b> · GPU idle inside the step<br>%{x:,.1f} µs per step<extra></extra>",
            )
        )
    spans = [ps.get("span_us") if i not in skipped else None for i, (_, ps) in enumerate(runs)]
    if any(isinstance(v, (int, float)) and v > 0 for v in spans):
        # the step's span on each bar: op times on overlapping streams add up past it (HTA's A100 control sample:
        # 87,620 µs of op time and 10,198 µs idle in a 76,422 µs step), which the marker makes visible
        fig.add_trace(
            go.Scatter(
                y=labels,
                x=[float(v) if isinstance(v, (int, float)) else None for v in spans],
                mode="markers",
                name="step span",
                marker=dict(symbol="line-ns", size=26, line=dict(width=3, color="#1F2933")),
                hovertemplate="<b>%{y}</b> · step span (first GPU op start to last end)<br>%{x:,.1f} µs<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title=dict(text=title, x=0.01, xanchor="left") if title else None,
        height=max(220, 120 + 56 * len(runs)),
        template=template,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left", title=None, traceorder="normal"),
        margin=dict(l=10, r=20, t=80 if title else 50, b=50),
        uniformtext=dict(minsize=10, mode="hide"),
    )
    fig.update_xaxes(
        title_text="GPU op time per step by category, then idle, µs (steady-state medians; overlapping streams can pass "
        "the span)",
        gridcolor="rgba(0,0,0,0.08)",
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig
