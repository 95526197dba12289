"""Small UI helpers every page uses: safe text, messages, charts with PNG/SVG export, run context, formatting.

Why `esc`: Streamlit renders Markdown in st.markdown, st.caption, st.error, metric labels … and trace names, file
names and labels come from files users upload. Escaping every Markdown/HTML character keeps
`<img onerror=…>`, `[link](javascript:…)` or `![](http://tracker)` in a kernel name inert text.
"""

from __future__ import annotations

import re

import plotly.graph_objects as go
import streamlit as st

from analyzer.figures import theme
from analyzer.fmt import MISSING, finite, fmt_bytes, fmt_us, no_neg_zero  # noqa: F401  (pages format through ui.fmt_*: one rule, analyzer.fmt)
from app_pages import export, state

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&\"'])")


def esc(text: object, limit: int = 300) -> str:
    """Text from a trace or a user, made inert for Markdown: every special character backslash-escaped, one line."""
    t = " ".join(str(text).split())
    if len(t) > limit:
        t = t[: limit - 1] + "…"
    return _MD_SPECIAL.sub(r"\\\1", t)


NONE = MISSING  # what a table cell shows for an unknown or not-recorded figure (the column's tooltip says why)


def cell(value, spec: str = "{:,.1f}") -> str:
    """A number as table text, or "—" when it is unknown (None/NaN/inf/not a number): never a raw "None" or "-0.0"."""
    if not finite(value):
        return NONE
    return no_neg_zero(spec.format(float(value)))


def show_messages() -> None:
    """Load errors (one line each, naming the file) and notices, inline at the top of the page, until dismissed."""
    errs, notes = state.errors(), state.notes()
    for e in errs:
        st.error(esc(e), icon=":material/error:")
    for n in notes:
        st.info(esc(n), icon=":material/info:")
    if errs or notes:
        st.button("Dismiss messages", key="fl_dismiss", on_click=state.clear_messages, type="tertiary")


def require_runs(n: int = 1, what: str = "this view") -> list[state.Run]:
    """The session's runs, or an explanation and st.stop() when fewer than n are loaded."""
    runs = state.runs()
    if len(runs) < n:
        need = "a trace" if n == 1 else f"at least {n} traces (a baseline and a candidate)"
        st.info(
            f"{what} needs {need}. Upload `.json` / `.json.gz` PyTorch profiler traces in the sidebar, "
            "load a bundled sample set, or record new ones on the **Profile** page.",
            icon=":material/upload_file:",
        )
        st.stop()
    return runs


def context() -> dict:
    """{'gpu', 'workload', 'shapes', 'dtype'} of the loaded runs, for chart subtitles: the diff's context (manifest
    facts, else the trace's GPU and main GEMM) when there is a comparison, else the baseline's facts."""
    from analyzer.diff.facts import diff_context, run_facts, workload_parts

    d = state.diff(compute=False)  # only a diff already computed: a subtitle never starts a slow diff
    if d is not None and not isinstance(d, str | state.DiffPending | state.DiffDeferred):
        return diff_context(d)
    base = state.baseline()
    if base is None:
        return {}
    facts = run_facts(base.trace.meta)
    ctx = workload_parts(facts)
    ctx["gpu"] = facts.get("gpu")
    return ctx


def subtitle() -> str:
    """Raw (unescaped) run context for chart subtitles: 'NVIDIA H100 80GB HBM3 · GEGLU MLP · 64×128 tokens … · bf16'.

    Users can override it in the sidebar: a review slide's wording is theirs. Escaping happens where it is placed
    (analyzer.figures.theme.chart_title)."""
    override = str(st.session_state.get(state.K_SUBTITLE, "")).strip()
    if override:
        return override
    ctx = context()
    return " · ".join(str(ctx[k]) for k in ("gpu", "workload", "shapes", "dtype") if ctx.get(k))


def fit_to_container(fig: go.Figure) -> go.Figure:
    """Page-width fixes for any figure: tick labels grow the margins instead of being clipped, and a legend under
    the plot sits at the container's bottom, below the x-axis title rather than on top of it."""
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    if fig.layout.title and fig.layout.title.text:  # long y labels push a plot-anchored title off the right edge
        fig.update_layout(title=dict(xref="container", x=0.005, xanchor="left"))
    leg = fig.layout.legend
    y = leg.y if leg.y is not None else (theme.TEMPLATE.layout.legend.y or 1.0)
    if y < 0 and leg.yref != "container":
        fig.update_layout(legend=dict(yref="container", y=0.0, yanchor="bottom"))
        fig.update_layout(margin=dict(b=(fig.layout.margin.b or 60) + 44))
    return fig


def chart(fig: go.Figure, name: str, title: str, *, key: str, caption: str | None = None) -> None:
    """Show a figure, then PNG and SVG download buttons (rendered lazily on click, in the slide theme).

    `title` is raw text (escaped by the theme when the export is titled)."""
    fig.update_layout(template=theme.TEMPLATE)  # the same look on screen as on the slide
    fit_to_container(fig)
    st.plotly_chart(
        fig,
        width="stretch",
        theme=None,  # what you see is what you export: no Streamlit restyling of the figure
        key=key,
        config={"displaylogo": False, "toImageButtonOptions": {"format": "svg", "filename": name}},
    )
    sub = subtitle()

    def render(fmt: str):
        return lambda: export.to_image(export.for_slide(fig, title, sub), fmt)

    cols = st.columns([1, 1, 6], vertical_alignment="center")
    cols[0].download_button(
        "PNG", render("png"), file_name=f"{name}.png", mime="image/png", key=f"{key}_png",
        icon=":material/image:", on_click="ignore",
    )  # fmt: skip
    cols[1].download_button(
        "SVG", render("svg"), file_name=f"{name}.svg", mime="image/svg+xml", key=f"{key}_svg",
        icon=":material/image:", on_click="ignore",
    )  # fmt: skip
    if caption:
        cols[2].caption(caption)
