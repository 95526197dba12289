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
    spans = [ps.get("span_us") for _, ps in runs]
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
