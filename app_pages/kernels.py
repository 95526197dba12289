"""Kernels: every distinct kernel of every run — sortable, filterable, exportable as (formula-safe) CSV."""

from __future__ import annotations

import streamlit as st

from analyzer.figures import kernels_table as kt
from app_pages import ui

st.title("Kernels")
ui.show_messages()
runs = ui.require_runs(1, "The kernel table")


@st.cache_data(max_entries=8, show_spinner=False)
def _view(keys: tuple[str, ...], labels: tuple[str, ...], _tables) -> object:
    """The stacked table, rebuilt only when the runs or their labels change (keyed on content digests)."""
    return kt.kernels_view(list(zip(labels, _tables, strict=True)))


df = _view(tuple(r.key for r in runs), tuple(r.label for r in runs), [r.summary.kernels for r in runs])

c1, c2, c3, c4 = st.columns([2, 2, 2, 3])
sel_runs = c1.multiselect("Runs", [r.label for r in runs], placeholder="all runs")
cats = c2.multiselect("Category", sorted(x for x in df["category"].unique() if x), placeholder="all categories")
libs = c3.multiselect("Library", sorted(x for x in df["library"].unique() if x), placeholder="all libraries")
text = c4.text_input("Kernel, op or shape contains", placeholder="e.g. gemm, gelu, 8192", max_chars=200)
view = kt.filter_view(df, runs=sel_runs, categories=cats, libraries=libs, text=text)

pct = lambda h: st.column_config.ProgressColumn(format="%.0f%%", min_value=0, max_value=100, help=h)  # noqa: E731
num = lambda f, h=None: st.column_config.NumberColumn(format=f, help=h)  # noqa: E731
st.dataframe(
    view.rename(columns=kt.COLUMNS),
    hide_index=True,
    width="stretch",
    height=min(640, 38 + 35 * max(len(view), 3)),
    column_config={
        "run": st.column_config.TextColumn(pinned=True),
        "kernel": st.column_config.TextColumn(
            width="medium", pinned=True, help="kernel name as recorded by the profiler"
        ),
        "calls/step": num("%.1f", "calls per steady-state step (median)"),
        "time/step (µs)": num("%.1f", "total duration per step (median over steps)"),
        "% of run's GPU time": pct("share of this run's GPU time per step"),
        "median call (µs)": num("%.2f"),
        "bytes/call (est.)": num(
            "%.3e", "ESTIMATED HBM bytes read + written per call, from shapes and dtypes (LOGICAL: every tensor once)"
        ),
        "DRAM bytes/call (predicted)": num(
            "%.3e",
            "PREDICTED DRAM traffic per call in sequence: what stays in L2 between kernels and the write-back of "
            "outputs (docs/COST_MODEL.md, 'DRAM model')",
        ),
        "FLOPs/call (est.)": num("%.3e", "ESTIMATED floating-point operations per call"),
        "GB/s (est.)": num("%.0f", "estimated bytes / measured duration"),
        "TFLOP/s (est.)": num("%.1f", "estimated FLOPs / measured duration"),
        "% peak BW (est.)": pct("of the GPU's peak HBM bandwidth (blank: GPU not in the peak table)"),
        "% peak FLOP/s (est.)": pct("of the GPU's dense peak for the op's dtype"),
        "estimate basis": st.column_config.TextColumn(help="what the byte/FLOP estimate rests on"),
        "DRAM prediction basis": st.column_config.TextColumn(help="what the DRAM prediction rests on"),
    },
)
st.caption(
    f"{len(view):,} of {len(df):,} kernels. Click a column header to sort. Bytes, FLOPs and everything derived from "
    "them are estimates from the launching op's shapes and dtypes (see 'estimate basis')."
)
st.download_button(
    "Download CSV",
    data=lambda: kt.csv_bytes(view),
    file_name="fuselens-kernels.csv",
    mime="text/csv",
    icon=":material/download:",
    on_click="ignore",
    key="fl_kernels_csv",
    help="The filtered rows. Text cells that a spreadsheet would run as a formula (=, +, -, @) are prefixed with '.",
)
