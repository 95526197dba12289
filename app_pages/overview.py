"""Overview: per run — GPU, PyTorch, steps, kernels per step, GPU time by category, idle time, launch latency."""

from __future__ import annotations

import math

import streamlit as st

from analyzer.figures.overview import category_figure
from app_pages import nav, state, ui

st.title("Overview")
ui.show_messages()
runs = ui.require_runs(1, "The overview")

base = state.baseline()
# What every number below rests on, in one line (the table repeats it per run, at its right end).
facts = []
if base is not None and base.context.get("workload"):
    from app_pages.samples import case_title

    facts.append(case_title(base.context))
facts += sorted({r.gpu_name for r in runs}) + sorted(
    {f"PyTorch {r.torch_version}" for r in runs if r.context.get("torch")}
)
st.caption(ui.esc(" · ".join(facts), 400))


def _num(d: dict, k: str) -> float:
    v = d.get(k)
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


rows = []
for r in runs:
    ps = r.summary.per_step or {}
    steps = r.trace.steps
    rows.append(
        {
            "run": r.label,
            "kernels/step": _num(ps, "kernels"),
            "GPU time/step (µs)": _num(ps, "gpu_time_us"),
            "CUDA-event time (µs)": float(r.variant["median_us"])
            if r.variant.get("median_us") is not None
            else math.nan,
            "idle/step (µs)": _num(ps, "idle_us"),
            "launch latency (µs)": _num(ps, "launch_latency_us"),
            "step span (µs)": _num(ps, "span_us"),
            "steps": f"{len(r.summary.steps_used or [])} of {len(steps)}"
            + (" (whole trace)" if not steps.empty and (steps["source"] == "whole trace").all() else ""),
            "GPU": r.gpu_name,
            "PyTorch": r.torch_version,
            "role": "baseline" if r.key == base.key else "candidate",
            "file": r.file_name,
        }
    )
st.dataframe(
    rows,
    hide_index=True,
    width="stretch",
    column_config={
        "kernels/step": st.column_config.NumberColumn(format="%.0f", help="GPU ops per steady-state step (median)"),
        "GPU time/step (µs)": st.column_config.NumberColumn(format="%.1f", help="sum of GPU op durations per step"),
        "step span (µs)": st.column_config.NumberColumn(format="%.1f", help="first GPU op start → last GPU op end"),
        "idle/step (µs)": st.column_config.NumberColumn(format="%.1f", help="gaps between GPU ops inside the step"),
        "launch latency (µs)": st.column_config.NumberColumn(
            format="%.1f", help="median time from the CPU's launch call to the kernel's start"
        ),
        "CUDA-event time (µs)": st.column_config.NumberColumn(
            format="%.1f", help="the runner's median of 100 timed steps (manifest); blank for uploads"
        ),
    },
)

# The headline of the comparison, so the page a session opens on already answers "what did fusion buy us".
if len(runs) >= 2:
    from app_pages import compare_view

    d = compare_view.current_diff(compact=True)
    if d is not None:
        compare_view.headline(d)
        st.page_link(nav.page("compare.py"), label="Open the fusion diff", icon=":material/compare_arrows:")

fig = category_figure([(r.label, r.summary.per_step or {}) for r in runs])
ui.chart(
    fig,
    "fuselens-gpu-time-by-category",
    "GPU time per step by category",
    key="fl_overview_categories",
    caption="Medians over each run's steady-state steps; idle = gaps between GPU ops inside the step.",
)

for r in runs:
    warns = list(r.trace.meta.warnings or [])
    if warns:
        with st.expander(f"{ui.esc(r.label)}: {len(warns)} note(s) from the loader"):
            for w in warns[:50]:
                st.text(w)
