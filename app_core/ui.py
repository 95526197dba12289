"""Small UI helpers every page uses: safe text (`esc`, the one escaper: app_core.text), messages, charts with
PNG/SVG export, run context, formatting."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from analyzer import api
from analyzer.api import MISSING, finite, fmt_pct, fmt_signed, no_neg_zero  # noqa: F401  (pages format through ui.fmt_*: one rule, analyzer.fmt)
from analyzer.figures import theme
from app_core import export, keys, share, state
from app_core.text import esc  # noqa: F401  (pages escape through ui.esc: the one escaper, app_core.text)

NONE = MISSING  # what a table cell shows for an unknown or not-recorded figure (the column's tooltip says why)


def cell(value, spec: str = "{:,.1f}") -> str:
    """A number as table text, or "—" when it is unknown (None/NaN/inf/not a number): never a raw "None" or "-0.0"."""
    if not finite(value):
        return NONE
    return no_neg_zero(spec.format(float(value)))


def fmt_us(us, missing: str = MISSING) -> str:
    """analyzer.fmt.fmt_us, "—" when unknown (a page shows a dash where the CLI says "unknown")."""
    return api.fmt_us(us, missing)


def fmt_bytes(n, missing: str = MISSING) -> str:
    """analyzer.fmt.fmt_bytes, "—" when unknown."""
    return api.fmt_bytes(n, missing)


def signed(value, spec: str = ",.1f", unit: str = "") -> str:
    """A change with its sign, "0.0" (never "-0.0" / "+0") when it rounds to zero: analyzer.fmt.fmt_signed."""
    return fmt_signed(value, spec, unit)


def signed_cell(value, spec: str = ",.1f") -> str:
    """A signed table figure ("+1.2", "-0.5", "0.0"), "—" when unknown."""
    return fmt_signed(value, spec)


def table_height(rows: int, cap: int = 640) -> int:
    """Pixel height of an st.dataframe that shows all `rows` without a vertical scrollbar (35 px a row + header), up
    to `cap`: Streamlit's default of ~10 rows hid the side-by-side table's last rows on a slide."""
    return min(cap, 38 + 35 * max(rows, 1) + 2)


def markdown_table(df) -> str:
    """A GitHub-flavoured Markdown table of a DataFrame's cells as shown (text), for design docs. Pipes and newlines
    in names are escaped so a kernel name cannot break the table."""

    def c(v) -> str:
        t = NONE if v is None or (isinstance(v, float) and not finite(v)) else str(v)
        return " ".join(t.split()).replace("\\", "\\\\").replace("|", "\\|")

    head = "| " + " | ".join(c(x) for x in df.columns) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(c(v) for v in row) + " |" for row in df.itertuples(index=False, name=None)]
    return "\n".join([head, sep, *body])


def copy_markdown(df_or_text, key: str, what: str) -> None:
    """A "Copy as Markdown" expander: the table (or text) as Markdown in a code block, whose copy button puts it on
    the clipboard (works offline; the page never reads the clipboard)."""
    text = df_or_text if isinstance(df_or_text, str) else markdown_table(df_or_text)
    with st.expander(f"Copy as Markdown: {what}", icon=":material/content_copy:"):
        st.code(text, language="markdown", wrap_lines=False)


def show_messages() -> None:
    """Load errors (one line each, naming the file) and notices, inline at the top of the page, until dismissed."""
    errs, notes = state.errors(), state.notes()
    for e in errs:
        st.error(esc(e), icon=":material/error:")
    for n in notes:
        st.info(esc(n), icon=":material/info:")
    if errs or notes:
        st.button("Dismiss messages", key="fl_dismiss", on_click=state.clear_messages, type="tertiary")
    missing = share.missing_runs()
    if missing:
        with st.container(key="fl_link_pending"):
            st.warning(
                f"This shared link shows {len(missing)} run(s) that are not loaded here: "
                + ", ".join(f"**{esc(m, 40)}**" for m in missing)
                + ". Uploaded traces stay in the sharer's session: upload the same files in the sidebar and the "
                "link's view (baseline, candidate, step) is applied.",
                icon=":material/link_off:",
            )
            st.button("Forget the link", key="fl_link_forget", on_click=share.dismiss_pending, type="tertiary")


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
    d = state.diff(compute=False)  # only a diff already computed: a subtitle never starts a slow diff
    if d is not None and not isinstance(d, str | state.DiffPending | state.DiffDeferred):
        return api.diff_context(d)
    base = state.baseline()
    if base is None:
        return {}
    facts = api.run_facts(base.trace.meta)
    ctx = api.workload_parts(facts)
    ctx["gpu"] = facts.get("gpu")
    return ctx


def subtitle() -> str:
    """Raw (unescaped) run context for chart subtitles: 'NVIDIA H100 80GB HBM3 · GEGLU MLP · 64×128 tokens … · bf16'.

    Users can override it in the sidebar: a review slide's wording is theirs. Escaping happens where it is placed
    (analyzer.figures.theme.chart_title)."""
    override = str(st.session_state.get(keys.SUBTITLE, "")).strip()
    if override:
        return override
    ctx = context()
    return " · ".join(str(ctx[k]) for k in ("gpu", "workload", "shapes", "dtype") if ctx.get(k))


def fit_to_container(fig: go.Figure) -> go.Figure:
    """Page-width fixes for any figure (analyzer.figures.theme.fit_layout, shared with the HTML report)."""
    return theme.fit_layout(fig)


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
