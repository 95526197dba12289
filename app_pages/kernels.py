"""Kernels: every distinct kernel of every run — sortable, filterable, exportable as (formula-safe) CSV."""

from __future__ import annotations

import streamlit as st

from analyzer.api import short_name
from analyzer.figures import kernels_table as kt
from app_core import ui

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

# What fits a 1280 px page beside the sidebar (every column of the table ran 2,000 px past the right edge); the
# others are one click away, and all of them go into the CSV.
# "ops" by default: four eager rows all read `vectorized_elementwise_kernel<…>` until their ops (mul, add, …) show.
DEFAULT_COLUMNS = ("run", "kernel", "ops", "time/step (µs)", "% of run", "GB/s (est.)", "% peak BW", "TFLOP/s (est.)")
# Short headers on the page (the CSV keeps kt.COLUMNS' full names): a header wider than its numbers was cut.
PAGE_NAMES = {
    "% of run's GPU time": "% of run",
    "% peak BW (est.)": "% peak BW",
    "% peak FLOP/s (est.)": "% peak FLOP/s",
}
shown = view.rename(columns=kt.COLUMNS).rename(columns=PAGE_NAMES)
# Streamlit's table prints an unknown number as "None" whatever the formatting (a Styler's na_rep is ignored), so
# the figures are shown as text ("—" when unknown), and sorting happens here, on the numbers.
NUM_FORMATS = {
    "time/step (µs)": "{:,.1f}", "GB/s (est.)": "{:,.0f}", "TFLOP/s (est.)": "{:,.1f}", "calls/step": "{:,.1f}",
    "median call (µs)": "{:,.2f}", "bytes/call (est.)": "{:.3e}", "DRAM bytes/call (predicted)": "{:.3e}",
    "FLOPs/call (est.)": "{:.3e}",
}  # fmt: skip
sort_cols = [c for c in ("time/step (µs)", "% of run", "GB/s (est.)", "TFLOP/s (est.)", "% peak BW", "% peak FLOP/s",
                         "calls/step", "bytes/call (est.)", "FLOPs/call (est.)") if c in shown]  # fmt: skip
s1, s2 = st.columns([3, 1], vertical_alignment="bottom")
by = s1.selectbox("Sort by", sort_cols, key="fl_kernels_sort", help="largest first; unknown figures last")
ascending = s2.toggle("smallest first", value=False, key="fl_kernels_ascending")
shown = shown.sort_values(by, ascending=ascending, na_position="last", kind="stable", ignore_index=True)
for c, f in NUM_FORMATS.items():
    if c in shown:
        shown[c] = shown[c].map(lambda v, f=f: ui.cell(v, f))
if "flags" in shown and "GB/s (est.)" in shown:  # above the HBM peak: marked where the figure is, not only in "flags"
    flagged = shown["flags"].map(lambda f: bool(f) and not isinstance(f, float) and str(f) not in ("", "—", "[]"))
    shown.loc[flagged, "GB/s (est.)"] = shown.loc[flagged, "GB/s (est.)"].astype(str) + " ⚠"
shown.insert(2, "full name", shown["kernel"])
shown["kernel"] = shown["kernel"].map(lambda n: short_name(n, 48))  # template arguments collapsed, whole name below
extra = st.multiselect(
    "More columns",
    [c for c in shown.columns if c not in DEFAULT_COLUMNS],
    placeholder="% peak FLOP/s, calls/step, op, shapes, dtypes, bytes, FLOPs, estimate basis, full name …",
    key="fl_kernels_columns",
)
order = [c for c in DEFAULT_COLUMNS if c in shown.columns] + [c for c in shown.columns if c in extra]
# The run column as wide as its longest label (~7.5 px a character at the table's 14 px font): "small" cut
# "layer_compile_bf16" to "layer_comp".
run_px = int(min(220, max(70, 7.5 * max((len(r.label) for r in runs), default=4) + 30)))
pct = lambda h: st.column_config.ProgressColumn(  # noqa: E731
    format="%.0f%%", min_value=0, max_value=100, help=h, width="small"
)
num = lambda h=None: st.column_config.TextColumn(help=(h or "") + " — = unknown")  # noqa: E731
st.dataframe(
    shown,
    hide_index=True,
    width="stretch",
    height=ui.table_height(max(len(view), 3)),
    column_order=order,
    column_config={
        "run": st.column_config.TextColumn(pinned=True, width=run_px),
        "ops": st.column_config.TextColumn(
            width="small", help="what the kernel computes, decoded from its name and op"
        ),
        # 240 px: with run, ops and the five figures the table fits 1280 px beside the sidebar ("large" is 400)
        "kernel": st.column_config.TextColumn(
            width=240, pinned=True, help="kernel name, C++ template arguments collapsed (full name: More columns)"
        ),
        "full name": st.column_config.TextColumn(width="large", help="kernel name as recorded by the profiler"),
        "calls/step": num("calls per steady-state step (median)"),
        "time/step (µs)": num("total duration per step (median over steps)"),
        "% of run": pct("share of this run's GPU time per step"),
        "median call (µs)": num(),
        "bytes/call (est.)": num(
            "ESTIMATED HBM bytes read + written per call, from shapes and dtypes (LOGICAL: every tensor once)"
        ),
        "DRAM bytes/call (predicted)": num(
            "PREDICTED DRAM traffic per call in sequence: what stays in L2 between kernels and the write-back of "
            "outputs (docs/COST_MODEL.md, 'DRAM model')"
        ),
        "flags": st.column_config.TextColumn(help="HBM flags from the byte model (analyzer.opinfo)"),
        "FLOPs/call (est.)": num("ESTIMATED floating-point operations per call"),
        "GB/s (est.)": num(
            "estimated bytes / measured duration; ⚠ = above the GPU's HBM peak: part of the traffic was served by L2, "
            "or the estimate counts too much ('flags' in More columns says which)"
        ),
        "TFLOP/s (est.)": num("estimated FLOPs / measured duration; — = no FLOP estimate (e.g. data movement)"),
        "% peak BW": pct("estimated GB/s as % of the GPU's peak HBM bandwidth (empty: GPU not in the peak table)"),
        "% peak FLOP/s": pct("estimated TFLOP/s as % of the GPU's dense peak for the op's dtype"),
        "estimate basis": st.column_config.TextColumn(help="what the byte/FLOP estimate rests on"),
        "DRAM prediction basis": st.column_config.TextColumn(help="what the DRAM prediction rests on"),
    },
)
st.caption(
    f"{len(view):,} of {len(df):,} kernels, sorted by {by} (*Sort by* above; — = unknown). Bytes, FLOPs and "
    "everything derived from "
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
