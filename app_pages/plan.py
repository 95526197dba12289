"""Fusion plan: from one run alone, what fusion would buy — ranked, who can take each step, and the arithmetic.

The figures are analyzer.opportunities' (the same as `python -m analyzer opportunities TRACE`); with a fused run
loaded beside the baseline, each opportunity also shows what that run achieved.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analyzer import api
from app_core import plan_view, state, ui

st.title("Fusion plan")
ui.show_messages()
runs = ui.require_runs(1, "The fusion plan")

base = state.baseline() or runs[0]
labels = [r.label for r in runs]
pick = st.selectbox(
    "Plan for",
    labels,
    index=labels.index(base.label),
    help="The run whose kernels are planned: usually the eager baseline.",
    key="fl_plan_run",
)
run = runs[labels.index(pick)]
plan = plan_view.plan_for(run)
if isinstance(plan, str):
    st.error(ui.esc(plan), icon=":material/error:")
    st.stop()
j = plan.to_json()
shares = api.plan_shares(j)  # every share of the step below: analyzer.opportunities.shares

now, pred = shares["now_us"], shares["predicted_us"]
c1, c2, c3, c4 = st.columns(4)
c1.metric("GPU busy per step now", ui.fmt_us(now))
change = shares["change_pct"]
no_change = change is None or change != change or abs(change) < 0.05  # an empty plan: no red '↑ 0.0%'
c2.metric("Predicted with the plan", ui.fmt_us(pred), ui.signed(change, ",.1f", "%"),
          delta_color="off" if no_change else "inverse")  # fmt: skip
c3.metric("Saved per step (predicted)", ui.fmt_us(shares["saved_us"]))
c4.metric("Steps in the plan", f"{len(j['plan'])}", help="Opportunities taken together; an alternative to a larger "
          "overlapping one is listed but not added.")  # fmt: skip
st.caption(
    f"{ui.esc(run.label)} · {ui.esc(j['gpu'] or 'unknown GPU')} · "
    f"{'training' if j['training'] else 'inference'} step {j['step']} · memory-bound kernels predicted at "
    f"{j['roofs']['gbps']:,.0f} GB/s: {ui.esc(j['roofs']['gbps_source'])}. Estimates: bytes from the cost model, "
    "times from this trace's own kernels."
)

if not j["opportunities"]:
    why = j.get("empty_reason") or "no fusible work found between the compute kernels of this step"
    unsized = not why.startswith("no fusible work")
    st.info(ui.esc(why[0].upper() + why[1:]) + ".", icon=":material/info:" if unsized else ":material/check_circle:")
    st.stop()

first = shares["do_first"]
if first is not None:
    who = first["who"] or "a kernel nobody ships yet"
    basis = " (measured at this problem)" if first["measured"] else ""
    others = "".join(f" {ui.esc(t)} measured {ui.fmt_us(v)} here." for t, v in first["others_measured_us"].items())
    st.success(
        f"**Do first: {ui.esc(first['pattern'])}** with {ui.esc(who)}: predicted to save "
        f"{ui.fmt_us(first['saved_us'])} per step{basis} ({first['pct_of_step']:.1f}% of the step).{others}",
        icon=":material/flag:",
    )

st.subheader("What to do, in order")
rows = []
for o in j["opportunities"]:
    who = [t["who"] for t in o["takers"]]
    what = o["pattern"] + (f" ×{o['count_per_step']}" if o["count_per_step"] > 1 else "")
    what += f" · {o['shape']}" if o["shape"] else ""
    if o["alternative_to"]:
        what += f" (or #{o['alternative_to']})"
    rows.append(
        {
            "#": o["id"],
            "what": what,
            "saves/step (µs)": o["predicted_saved_us_per_step"],
            "% of step": shares["opportunities"][o["id"]]["pct_of_step"],
            "kernels": shares["opportunities"][o["id"]]["kernels_replaced"],
            "bytes avoided": ui.fmt_bytes(o["bytes_avoided_per_step"]),
            "who can take it": ", ".join(who) if who else "nobody today",
        }
    )
df = pd.DataFrame(rows)
# pixel widths that fit the main column of a 1280 px window beside the sidebar (~910 px): a cut table hides the
# tools column, the one a team acts on
st.dataframe(
    df,
    hide_index=True,
    width="stretch",
    height=ui.table_height(len(df)),
    column_config={
        "#": st.column_config.NumberColumn(width=40, pinned=True),
        "what": st.column_config.TextColumn(
            width=290,
            help="what the kernels compute · their largest tensor; '(or #n)': overlaps the larger "
            "opportunity n, the plan takes that one",
        ),  # fmt: skip
        "saves/step (µs)": st.column_config.ProgressColumn(
            format="%.1f",
            min_value=0.0,
            max_value=float(max(df["saves/step (µs)"].max(), 1e-9)),
            width=120,
            help="predicted: the kernels' time now minus the fused kernel's predicted time (arithmetic below)",
        ),  # fmt: skip
        "% of step": st.column_config.NumberColumn(format="%.1f%%", width=70),
        "kernels": st.column_config.NumberColumn(width=60, help="kernels the fused kernel replaces"),
        "bytes avoided": st.column_config.TextColumn(width=90),
        "who can take it": st.column_config.TextColumn(width=210, help="first: the one to try first"),
    },
)

if shares["takers"]:
    st.subheader("With one tool only")
    tools = pd.DataFrame(
        [
            {"tool": t["tool"], "predicted busy/step (µs)": t["busy_us"], "saves (µs)": t["saved_us"],
             "% of step": t["pct_of_step"]}
            for t in shares["takers"]
        ]
    )  # fmt: skip
    st.dataframe(
        tools,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(tools)),
        column_config={
            "predicted busy/step (µs)": st.column_config.NumberColumn(format="%.1f"),
            "saves (µs)": st.column_config.ProgressColumn(
                format="%.1f", min_value=0.0, max_value=float(max(shares["saved_us"], 1e-9))
            ),
            "% of step": st.column_config.NumberColumn(format="%.1f%%"),
        },
    )

st.subheader("How each figure was computed")
for o in j["opportunities"]:
    head = f"#{o['id']} {o['pattern']}: saves {ui.fmt_us(o['predicted_saved_us_per_step'])}"
    with st.expander(ui.esc(head)):
        kern = ", ".join(f"{k['op'] or k['name']} ({k['dur_us']:.1f} µs)" for k in o["kernels_removed"])
        st.markdown("**Kernels removed:** " + ui.esc(kern, 2000))
        st.code("\n".join(o["arithmetic"]), language=None, wrap_lines=True)
        for t in o["takers"]:
            st.markdown(f"- **{ui.esc(t['who'])}**: {ui.esc(t['how'])}")
        for n in o["taker_notes"]:
            st.caption(ui.esc(n))
        for e in o["evidence"]:
            st.caption("evidence: " + ui.esc(e))

cands = [r for r in runs if r.key != run.key]
if cands:
    st.subheader("Predicted vs achieved")
    c_lab = st.selectbox("Fused run", [r.label for r in cands], key="fl_plan_cand")
    plan_view.predicted_vs_achieved(run.label, c_lab)
