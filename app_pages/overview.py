"""Overview: per run — GPU, PyTorch, steps, kernels per step, GPU time by category, idle time, launch latency."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from analyzer.api import conditions_text, file_label, fmt_range, recorded_conditions, run_phases, side_number
from analyzer.figures.overview import category_figure
from app_core import compare_view, nav, state, ui
from app_core.samples import case_title

st.title("Overview")
ui.show_messages()
runs = ui.require_runs(1, "The overview")

base = state.baseline()
# What every number below rests on, in one line (the table repeats it per run, at its right end).
facts = []
if base is not None and base.context.get("workload"):
    facts.append(case_title(base.context))
facts += sorted({r.gpu_name for r in runs}) + sorted(
    {f"PyTorch {r.torch_version}" for r in runs if r.context.get("torch")}
)
st.caption(ui.esc(" · ".join(facts), 400))
if runs and all(r.origin == "sample" for r in runs):
    st.info(
        "**Bundled demo data**: these are FuseLens's own H100 recordings (`sample_traces/`), not your runs. "
        "To analyze yours, drop PyTorch profiler traces (`.json` / `.json.gz`) in the **Add PyTorch profiler "
        "traces** uploader in the sidebar, or record them on the **Profile** page.",
        icon=":material/science:",
    )


def _num(d: dict, k: str) -> float:
    v = d.get(k)
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _spread_cell(ps: dict, key: str) -> str:
    """'226.7 (226.5–226.9)': the median and its spread over steady steps, as the CLI and the report show it."""
    return ui.cell(_num(ps, key)) + fmt_range((ps.get("spread") or {}).get(key))


# GPU / PyTorch are in the caption above; as columns only when the runs differ (keeps the table inside 1280 px).
show_gpu = len({r.gpu_name for r in runs}) > 1
show_torch = len({r.torch_version for r in runs}) > 1
show_file = any(r.label != file_label(r.file_name) for r in runs)
show_conditions = any(conditions_text(recorded_conditions(r.variant)) for r in runs)
rows = []
for r in runs:
    ps = r.summary.per_step or {}
    steps = r.trace.steps
    row = {
        "run": r.label + (" ⚠" if r.summary.doubts else ""),  # in doubt: the reasons are in the warning below
        "role": "baseline" if r.key == base.key else "candidate",
        "kernels/step": ui.cell(_num(ps, "kernels"), "{:,.0f}"),
        "GPU busy µs": _spread_cell(ps, "gpu_busy_us"),
        "span µs": _spread_cell(ps, "span_us"),
        "idle µs": _spread_cell(ps, "idle_us"),
        "GPU µs/step": ui.cell(_num(ps, "gpu_time_us")),
        "CUDA-event µs": ui.cell(side_number(r.variant.get("median_us"))),
        "launch µs": ui.cell(_num(ps, "launch_latency_us")),
        "steps": f"{len(r.summary.steps_used or [])} of {len(steps)}"
        + (" (whole trace)" if not steps.empty and (steps["source"] == "whole trace").all() else ""),
    }
    if show_gpu:
        row["GPU"] = r.gpu_name
    if show_torch:
        row["PyTorch"] = r.torch_version
    if show_file:  # the file only where a label does not already say it (a renamed run)
        row["file"] = r.file_name
    rows.append(row)
# One column per run, one row per measure: a row per run with ten measures and their spreads ran past the right edge
# at 1280 px once a run had a long label; per-run columns fit the page for up to ~6 runs (Compare's table does the
# same). Each measure's meaning is in the first column's tooltip.
MEASURE_HELP = {
    "role": "the baseline every other run is compared against",
    "kernels/step": "GPU ops per steady-state step (median)",
    "GPU busy µs": "union of GPU op intervals per step (median over steady-state steps; in brackets the spread "
    "over those steps, min–max, p10–p90 from 10 steps)",
    "span µs": "first GPU op start → last GPU op end = busy + idle (median, spread)",
    "idle µs": "gaps between GPU ops inside the step (median, spread)",
    "GPU µs/step": "sum of GPU op durations per step (median; overlapping streams counted twice, idle left out)",
    "CUDA-event µs": "the runner's median of 100 timed steps (manifest); plain Kineto traces carry none",
    "launch µs": "median time from the CPU's launch call to the kernel's start",
    "steps": "steady-state steps used of those recorded",
}
table = pd.DataFrame({row["run"]: {k: v for k, v in row.items() if k != "run"} for row in rows})
table.index.name = "measure"
table = table.reset_index()
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    height=ui.table_height(len(table)),
    column_config={
        "measure": st.column_config.TextColumn(
            pinned=True,
            help="; ".join(f"{k}: {v}" for k, v in MEASURE_HELP.items())
            + ". — = unknown or not recorded. ⚠ beside a run: its file was cut, damaged or held values of the "
            "wrong type (reasons below the table).",
        )
    },
)
if show_conditions:  # below the table, not a column: the table already fills the page at 1280 px
    st.caption(
        "GPU conditions while profiled (the runner's record: SM clock and its range, power, temperature): "
        + " · ".join(
            f"**{ui.esc(r.label)}** {ui.esc(conditions_text(recorded_conditions(r.variant)) or 'not recorded')}"
            for r in runs
        )
    )
phase_rows = []
for r in runs:  # a training step's phases (analyzer.phases): forward, backward, optimizer
    ph = run_phases(r.summary)
    if ph:
        phase_rows.append({"run": r.label, **{f"{p} µs": round(v, 1) for p, v in ph.items()}})
if phase_rows:
    st.markdown(
        "**GPU time per phase of the training step** (representative step: kernels under the autograd "
        "engine are backward, torch.optim's and foreach / fused optimizer kernels the optimizer step; a trace that "
        "records no autograd ranges has its backward from its first backward op to the optimizer)"
    )
    st.dataframe(
        pd.DataFrame(phase_rows),
        hide_index=True,
        width="stretch",
        key="fl_overview_phases",
        column_config={c: st.column_config.NumberColumn(format="localized") for c in phase_rows[0] if c != "run"},
    )
with st.expander("Every profiled step (the warm-up step included; medians and spreads use the steady ones)"):
    table = (
        pd.concat([r.summary.steps.assign(run=r.label) for r in runs if len(r.summary.steps)], ignore_index=True)
        if any(len(r.summary.steps) for r in runs)
        else pd.DataFrame()
    )
    if len(table):
        table["steady"] = table["steady"].map({True: "steady", False: "warm-up / not used"})
        cols = ["run", "step", "steady", "kernels", "memops", "gpu_busy_us", "span_us", "idle_us", "gpu_time_us"]
        st.dataframe(
            table[cols].rename(
                columns={
                    "gpu_busy_us": "GPU busy µs",
                    "span_us": "span µs",
                    "idle_us": "idle µs",
                    "gpu_time_us": "GPU µs (sum of ops)",
                }
            ),
            hide_index=True,
            width="stretch",
            column_config={
                c: st.column_config.NumberColumn(format="%.1f")
                for c in ("GPU busy µs", "span µs", "idle µs", "GPU µs (sum of ops)")
            },
        )

if any(r.summary.doubts for r in runs):
    compare_view.doubts(*[r.label for r in runs if r.summary.doubts])

# The headline of the comparison, so the page a session opens on already answers "what did fusion buy us".
if len(runs) >= 2:
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
