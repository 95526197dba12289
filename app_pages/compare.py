"""Compare: the fusion diff of the baseline against every candidate (analyzer.diff), plus its offline report."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from analyzer import api
from analyzer.api import BYTES_RULE, ESTIMATES
from analyzer.figures import compare as cf
from analyzer.figures import kernels_table as kt
from app_core import compare_view as cv
from app_core import keys, params, state, ui

st.title("Compare")
ui.show_messages()
ui.require_runs(2, "The fusion diff")
d = cv.current_diff()
if d is None:
    st.stop()

labels = [c.label for c in d.candidates]
# Always a loaded candidate: one left over from the demo or a link is replaced (and the widget shows the new one).
params.keep_choice(st.session_state, keys.COMPARE_CANDIDATE, labels)
top = st.columns([3, 2, 2], vertical_alignment="bottom")
label = top[0].selectbox(
    "Candidate", labels, key=keys.COMPARE_CANDIDATE, help="Every candidate is diffed against the baseline."
)
cd = d.candidate(label)


top[1].download_button(
    "Download report",
    data=lambda: api.report_html(d),
    file_name="fuselens-report.html",
    mime="text/html",
    icon=":material/description:",
    on_click="ignore",
    key="fl_report",
    type="primary",
    help="Self-contained offline HTML report of this diff, every candidate (plotly.js inlined, no network).",
)
top[2].download_button(
    "Diff as JSON",
    data=lambda: json.dumps(d.to_json(), indent=1),
    file_name="fuselens-diff.json",
    mime="application/json",
    icon=":material/data_object:",
    on_click="ignore",
    key="fl_diff_json",
    help="What `python -m analyzer diff --json` prints for these runs.",
)

cv.headline(d, label=label)
ui.copy_markdown(cv.headline_markdown(d, label), "fl_copy_headline", "headline")
for n in d.notes + cd.notes:
    st.caption(f"Note: {ui.esc(n)}")

st.subheader(f"Where {cd.base_label}'s GPU time went")
cv.accounting(cd)

st.subheader("Fusion groups: fused kernel ← the kernels it replaced")
cv.fusion_groups(cd)
with st.expander("How bytes avoided are counted"):
    st.text(BYTES_RULE)
    for e in ESTIMATES:
        st.text("• " + e)

st.download_button(
    "Fusion groups as CSV",
    data=lambda: api.fusions_csv(d),
    file_name="fuselens-fusion-groups.csv",
    mime="text/csv",
    icon=":material/download:",
    on_click="ignore",
    key="fl_fusions_csv",
    help="Every candidate's fusion groups, swaps and kernel choices; spreadsheet formulas neutralised.",
)
ui.chart(
    cf.fusion_groups_figure(d, label),
    "fuselens-fusion-groups",
    f"Fusion groups of {label} vs {cd.base_label}: kernel time and HBM bytes",
    key="fl_compare_groups",
    caption="Bytes are estimates from recorded shapes and dtypes; times are measured kernel durations.",
)
ui.chart(
    cf.time_breakdown_figure(d, label),
    "fuselens-time-breakdown",
    f"Where the kernel time went: {cd.base_label} → {label}",
    key="fl_compare_breakdown",
    caption="Kernel time of the representative steady-state step; the steps sum exactly.",
)

st.subheader("GPU time per step by category")
ui.chart(
    cf.category_time_figure(d),
    "fuselens-categories",
    "GPU time per step by category, baseline vs candidates",
    key="fl_compare_categories",
    caption="Medians over steady-state steps (measured kernel durations); idle = gaps inside the step.",
)

st.subheader("Where the rest is: HBM round trips left in this candidate")
cv.remaining(cd)

st.subheader("Matched GEMMs")
cv.gemms(cd)

st.subheader("Unmatched kernels")
cv.unmatched(cd)

# Estimate vs measurement, where the runner recorded Nsight Compute counters (<variant>.ncu.json beside the trace).
runs = {r.label: r for r in state.runs()}
measured = [(lab, runs[lab]) for lab in (cd.base_label, cd.label) if lab in runs and runs[lab].measured]
st.subheader("Logical vs predicted vs measured DRAM bytes")
if not measured:
    st.caption(
        "No Nsight Compute counters for these runs. Record them with **Profile → Measure bytes** (or "
        "`python -m kernels.profile --measure-bytes`), or upload the `<variant>.ncu.json` files with the traces."
    )
else:
    totals = []
    for lab, r in measured:
        table, tot = kt.run_measured_bytes(r.trace, r.summary.steps_used, r.measured)
        totals.append(
            {
                "run": lab,
                "logical estimate": ui.fmt_bytes(tot["estimated_bytes"]),
                "predicted DRAM": ui.fmt_bytes(tot["predicted_dram_bytes"]),
                "measured": ui.fmt_bytes(tot["measured_bytes"]),
                "measured / estimate": ui.cell(tot["measured / estimate"], "{:.2f}"),
                "measured / predicted": ui.cell(tot["measured / predicted"], "{:.2f}"),
                "kernels paired": f"{tot['kernels_measured']} measured, {tot['kernels_estimated']} estimated, "
                f"{tot['matched']}",
            }
        )
        with st.expander(f"{ui.esc(lab)}: per kernel ({ui.esc(tot['matched'])})"):
            st.dataframe(
                table,
                hide_index=True,
                width="stretch",
                column_config={
                    "estimated_bytes": st.column_config.NumberColumn("logical estimate (B)", format="localized"),
                    "predicted_dram_bytes": st.column_config.NumberColumn("predicted DRAM (B)", format="localized"),
                    "measured_bytes": st.column_config.NumberColumn("ncu DRAM read+write (B)", format="localized"),
                    "measured_flushed_bytes": st.column_config.NumberColumn("ncu, flushed (B)", format="localized"),
                    "measured / estimate": st.column_config.NumberColumn(format="%.2f"),
                    "measured / predicted": st.column_config.NumberColumn(format="%.2f"),
                },
            )
    st.dataframe(
        pd.DataFrame(totals),
        hide_index=True,
        width="stretch",
        column_config={
            "logical estimate": st.column_config.TextColumn(help="HBM bytes per step, every tensor once (estimate)"),
            "predicted DRAM": st.column_config.TextColumn(help="the L2-aware DRAM prediction per step"),
            "measured": st.column_config.TextColumn(help="Nsight Compute DRAM read + write bytes per step"),
            "measured / estimate": st.column_config.TextColumn(help="— = no estimate to divide by"),
            "measured / predicted": st.column_config.TextColumn(help="— = no prediction to divide by"),
        },
    )
    ui.copy_markdown(pd.DataFrame(totals), "fl_copy_measured", "estimated vs measured bytes")
    st.caption(
        "Measured = Nsight Compute dram__bytes_read.sum + dram__bytes_write.sum over one step: bytes that reached HBM, "
        "in sequence (--cache-control none: each kernel sees the L2 its predecessors left) where the runner recorded "
        "it, else with caches flushed before each kernel (which leaves writes still in L2 uncounted). Predicted DRAM = "
        "the L2-aware model (docs/COST_MODEL.md, 'DRAM model'); logical = every tensor once."
    )
