"""The FuseLens chart look: light, high-contrast, large type — readable on screen and pasted into a slide.

    fig.update_layout(template=TEMPLATE)                       # or apply_slide_theme(fig)
    fig.update_layout(title=chart_title("GPU time per step", gpu="NVIDIA H100 80GB HBM3",
                                        workload="GEGLU MLP", shapes="64×128 tokens, d=768 → 3072", dtype="bf16"))
    label(name)                                                # a kernel name made short and inert for a chart

Every chart that leaves the app (PNG/SVG for a review, the HTML report) says what it shows: chart_title() puts
the GPU, workload, shapes and dtype in a subtitle line under the title.
"""

from __future__ import annotations

import re

import plotly.graph_objects as go
import plotly.io as pio

from analyzer.fmt import fmt_bytes, fmt_us, html_text, short_name  # noqa: F401  (re-exported: charts read like the report)

FONT = "Inter, Helvetica Neue, Helvetica, Arial, sans-serif"
INK = "#1F2933"  # text: near-black, softer than #000 on a projector
MUTED = "#52606D"  # subtitles, axis titles
GRID = "#E4E7EB"

# Okabe-Ito based, colour-blind safe; the same category has the same colour in every FuseLens chart.
CATEGORY_COLORS = {
    "gemm": "#0072B2",
    "attention": "#CC79A7",
    "pointwise": "#E69F00",
    "reduction": "#009E73",
    "normalization": "#56B4E9",
    "communication": "#D55E00",
    "memcpy": "#7F7F7F",
    "memset": "#B0B0B0",
    "other": "#8C6D31",
    "idle": "#E4E7EB",
}
BASELINE_COLOR = "#7B8794"  # the baseline is grey: the candidates are what the eye should follow
CANDIDATE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C6D31")
SAVED_COLOR = "#009E73"
COST_COLOR = "#D55E00"


def run_color(i: int) -> str:
    """Colour of run i in a side-by-side chart: 0 is the baseline."""
    return BASELINE_COLOR if i == 0 else CANDIDATE_COLORS[(i - 1) % len(CANDIDATE_COLORS)]


TEMPLATE = go.layout.Template(
    layout=go.Layout(
        font=dict(family=FONT, size=15, color=INK),
        title=dict(font=dict(size=21, color=INK), x=0.0, xanchor="left", xref="paper", y=0.97, yanchor="top"),
        paper_bgcolor="white",
        plot_bgcolor="white",
        colorway=list(CANDIDATE_COLORS),
        margin=dict(l=70, r=30, t=100, b=60),
        legend=dict(bgcolor="rgba(255,255,255,0.85)", font=dict(size=14), orientation="h", y=-0.15, x=0),
        xaxis=dict(
            gridcolor=GRID, zerolinecolor="#CBD2D9", linecolor="#9AA5B1", ticks="outside", title_font=dict(color=MUTED)
        ),
        yaxis=dict(
            gridcolor=GRID, zerolinecolor="#CBD2D9", linecolor="#9AA5B1", ticks="outside", title_font=dict(color=MUTED)
        ),
        hoverlabel=dict(font=dict(family=FONT, size=13), bgcolor="white"),
        bargap=0.25,
    )
)
pio.templates["fuselens"] = TEMPLATE


def subtitle_text(
    gpu: str | None = None, workload: str | None = None, shapes: str | None = None, dtype: str | None = None
) -> str:
    """'NVIDIA H100 80GB HBM3 · GEGLU MLP · 64×128 tokens, d=768 → 3072 · bf16' (missing facts left out; each
    escaped: they can come from an uploaded file)."""
    parts = [str(p) for p in (gpu, workload, shapes, dtype) if p]
    return " · ".join(html_text(p) for p in parts)


def chart_title(
    title: str,
    *,
    gpu: str | None = None,
    workload: str | None = None,
    shapes: str | None = None,
    dtype: str | None = None,
    subtitle: str | None = None,
) -> dict:
    """A layout.title dict: the title, and under it the facts the chart rests on (or an explicit subtitle)."""
    sub = subtitle if subtitle is not None else subtitle_text(gpu, workload, shapes, dtype)
    out = {"text": wrap(html_text(title), 72), "x": 0.0, "xanchor": "left", "xref": "paper"}
    if sub:
        out["subtitle"] = {
            "text": html_text(sub) if subtitle is not None else sub,
            "font": {"size": 14, "color": MUTED},
        }
    return out


def apply_slide_theme(fig: go.Figure, title: str | None = None, **facts) -> go.Figure:
    """Put `fig` in the FuseLens look (in place; returns it). title + facts (gpu, workload, shapes, dtype,
    subtitle) replace its title when given."""
    fig.update_layout(template=TEMPLATE)
    if title is not None:
        fig.update_layout(title=chart_title(title, **facts))
    return fig


def wrap(text: str, width: int, max_lines: int = 3) -> str:
    """Break already-escaped text into lines of about `width` characters at spaces, '_', '-' or '/' (Plotly does
    not wrap): a title or tick label is then shown whole instead of cut at the chart's edge ("…79.8 µs saved per",
    "geglu_compile_b…"). Beyond `max_lines`, the last line ends in '…'."""
    lines, cur = [], ""
    for tok in re.findall(r"[^\s_\-/]+[\s_\-/]*|[\s_\-/]+", str(text)):
        while len(tok) > width:  # one long token: hard-break it
            if cur:
                lines.append(cur.rstrip())
                cur = ""
            lines.append(tok[:width])
            tok = tok[width:]
        if cur and len(cur) + len(tok.rstrip()) > width:
            lines.append(cur.rstrip())
            cur = ""
        cur += tok
    if cur.strip():
        lines.append(cur.rstrip())
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [lines[max_lines - 1][: max(width - 1, 1)] + "…"]
    return "<br>".join(lines)


def label(name: str, max_chars: int = 60) -> str:
    """short_name, HTML-escaped: Plotly renders a subset of HTML in labels, so a name holding '<script>' or
    '<img onerror=…>' must reach it as text."""
    return html_text(short_name(name, max_chars))


def fit_layout(fig: go.Figure) -> go.Figure:
    """Width fixes for any figure, in the app and in the HTML report: tick labels grow the margins instead of being
    clipped, a long title is anchored to the figure's left edge, and a legend under the plot sits at the figure's
    bottom edge, below the x-axis title rather than on top of it (in place; returns fig)."""
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    if fig.layout.title and fig.layout.title.text:  # long y labels push a plot-anchored title off the right edge
        fig.update_layout(title=dict(xref="container", x=0.005, xanchor="left"))
        # a title wrapped onto more lines (theme.wrap) needs the room above the plot, or its first line is cut
        extra = fig.layout.title.text.count("<br>")
        if extra:
            # Plotly centres an 'auto' title in the top margin: each extra line needs ~2 line heights more margin
            # or the first line leaves the figure (yanchor='top' misplaces multi-line titles with a subtitle)
            top = fig.layout.margin.t if fig.layout.margin.t is not None else TEMPLATE.layout.margin.t
            # Plotly hangs a multi-line title from its LAST line: with the template's y=0.97/top the first lines
            # left the figure. Lower the anchor by the extra lines (in container units of this figure's height;
            # Streamlit draws an unsized figure 450 px tall).
            height = fig.layout.height or 450
            fig.update_layout(
                title=dict(yref="container", yanchor="top", y=1.0 - (10 + 27 * extra) / height),
                margin=dict(t=max(top or 100, 112 + 34 * extra)),
            )
    leg = fig.layout.legend
    y = leg.y if leg.y is not None else (TEMPLATE.layout.legend.y or 1.0)
    if y < 0 and leg.yref != "container":
        fig.update_layout(legend=dict(yref="container", y=0.0, yanchor="bottom"))
        fig.update_layout(margin=dict(b=(fig.layout.margin.b or 60) + 44))
    return fig
