"""Pieces of the fusion plan other pages show too: the plan of a run (memoised per session) and the predicted vs
achieved table for a fused run beside its baseline (analyzer.opportunities.compare)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analyzer.api import FuseLensError, table_rows
from analyzer.api import opportunities as plan_opportunities
from analyzer.api import predicted_vs_achieved as pva
from app_core import keys, state, ui


def plan_for(run):
    """analyzer.opportunities.plan_opportunities for this run (its manifest facts already attached by state)."""
    memo = st.session_state.setdefault(keys.PLANS, {})
    if run.key not in memo:
        try:
            memo[run.key] = plan_opportunities(run.summary)
        except FuseLensError as e:
            memo[run.key] = str(e)
    return memo[run.key]


def predicted_vs_achieved(base_label: str, cand_label: str) -> None:
    """Each opportunity of the baseline's plan: predicted µs saved against what the candidate achieved, and whether
    it took it (taken / partly taken / left on the table)."""
    runs = {r.label: r for r in state.runs()}
    base, cand = runs.get(base_label), runs.get(cand_label)
    if base is None or cand is None:
        return
    plan = plan_for(base)
    if isinstance(plan, str):
        st.caption(f"No fusion plan for {ui.esc(base_label)}: {ui.esc(plan)}")
        return
    try:
        res = pva(base.summary, cand.summary, plan=plan, label=cand_label)
    except Exception as e:  # noqa: BLE001  (unrelated runs that cannot be lined up must not take the page down)
        st.caption(f"Could not line up {ui.esc(cand_label)} with {ui.esc(base_label)}'s plan: {ui.esc(e)}")
        return
    if not res["rows"]:
        st.caption(f"{ui.esc(base_label)}'s plan lists no opportunity.")
        return
    st.markdown(f"**{ui.esc(base_label)}'s fusion plan: predicted vs achieved by {ui.esc(cand_label)}**")
    st.caption(
        f"{ui.esc(base_label)}'s fusion plan predicts {ui.fmt_us(res['predicted_busy_us'])} per step with every step "
        f"taken; {ui.esc(cand_label)} measured {ui.fmt_us(res['achieved_busy_us'])}. Achieved = the baseline time of "
        "the opportunity's kernels minus the candidate time standing in for them."
    )
    df = pd.DataFrame(table_rows(res))
    st.dataframe(
        df,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(df)),
        column_config={  # pixel widths that fit a 1280 px window beside the sidebar (~910 px)
            "#": st.column_config.NumberColumn(width=40),
            "what": st.column_config.TextColumn(width=230),
            "predicted saves (µs)": st.column_config.NumberColumn(format="%.1f", width=90),
            "achieved (µs)": st.column_config.NumberColumn(format="%.1f", width=90),
            "status": st.column_config.TextColumn(width=110),
            "by": st.column_config.TextColumn(width=170, help="the candidate's kernel(s) that replaced them"),
            "who could": st.column_config.TextColumn(width=160),
        },
    )
