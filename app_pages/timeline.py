"""Timeline: one step of every run, GPU streams as lanes, stacked on one time scale (figure: analyzer.figures.timeline)."""

from __future__ import annotations

import time

import numpy as np
import streamlit as st

from analyzer import api
from analyzer.api import PHASES, file_label, run_phases, step_trace_bytes
from analyzer.figures import timeline as tl
from app_core import keys, params, state, ui

st.title("Timeline")
ui.show_messages()
runs = ui.require_runs(1, "The timeline")

REPRESENTATIVE = api.REPRESENTATIVE  # pseudo position: each run's median-span steady-state step (api.pick_step)
max_steps = max(len(api.recorded_steps(r.trace.steps)) for r in runs)


def ordinal(k: int) -> str:
    n = k + 1
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


# Runs as pills on their own row: multiselect chips cut labels ("fu…") once four runs share a third of the page.
params.keep_choices(st.session_state, keys.TIMELINE_RUNS, [r.key for r in runs])
chosen = st.pills(
    "Runs",
    [r.key for r in runs],
    selection_mode="multi",
    format_func=lambda k: state.run_by_key(k).label,
    key=keys.TIMELINE_RUNS,
)
_step = st.session_state.get(keys.TIMELINE_STEP)
if _step is not None and _step not in (REPRESENTATIVE, *range(max_steps)):  # a shared link's step these runs lack
    st.warning(f"link: step {_step} is beyond these runs' {max_steps} recorded steps; showing the representative step")
params.keep_choice(st.session_state, keys.TIMELINE_STEP, [REPRESENTATIVE, *range(max_steps)], REPRESENTATIVE)
c2, c3, c4 = st.columns([3, 2, 2], vertical_alignment="bottom")
position = c2.selectbox(
    "Step",
    [REPRESENTATIVE, *range(max_steps)],
    format_func=lambda p: (
        "representative step (median GPU span)" if p == REPRESENTATIVE else f"{ordinal(p)} recorded step"
    ),
    help="Representative: each run's steady-state step with the median GPU span. Steps are matched by position, "
    "since step numbers differ between runs; each is re-based to its own start.",
    key=keys.TIMELINE_STEP,
)
with_cpu = c3.toggle("Show CPU ops", value=False, help="the CPU ops that launched the kernels, as extra lanes")
sel = [r for r in runs if r.key in chosen]
# A step of tens of kernels (a decoder layer: 15-50) reads best one equal slot per kernel; time-proportional bars
# leave its 1-14 µs norm/RoPE kernels as slivers beside 180 µs GEMMs. The time layout stays one click away.
ops_per_step = max((len(r.trace.gpu_ops) / max(1, len(api.recorded_steps(r.trace.steps))) for r in sel), default=0)
sequence = c4.toggle(
    "Kernel order (equal widths)",
    value=20 <= ops_per_step <= tl.SEQUENCE_MAX_OPS,
    disabled=with_cpu,
    help="One equal slot per GPU op in launch order, so short kernels get a readable label; hover for the real start "
    "and duration. Off: bars on a µs scale.",
)
if not sel:
    st.info("Pick at least one run.")
    st.stop()

views = [
    tl.step_view(
        r.label,
        r.trace.gpu_ops,
        api.pick_step(r.trace.steps, r.summary.steps_used, position),
        cpu_ops=r.trace.cpu_ops,
        with_cpu=with_cpu,
    )
    for r in sel
]
longest = max(v.extent_us for v in views)
window = None
if longest > 0 and sum(len(v.gpu) for v in views) > 2000:
    # Big steps: a server-side window re-aggregates at finer resolution (the browser's zoom only magnifies bars).
    with st.expander("Zoom window (re-aggregated on the server)"):
        lo, hi = st.slider("µs since step start", 0.0, float(np.ceil(longest)), (0.0, float(np.ceil(longest))))
        window = (lo, hi) if (lo, hi) != (0.0, float(np.ceil(longest))) else None

title = f"GPU timeline, one step per run ({', '.join(v.label for v in views)})"
# One figure memoized per view settings: reruns and page returns reuse it instead of re-aggregating 100k+ ops.
memo_key = (tuple((r.key, r.label) for r in sel), tuple(v.step for v in views), with_cpu, window, sequence)
memo = st.session_state.get(keys.TIMELINE_MEMO)
if memo is not None and memo[0] == memo_key:
    fig, build_ms = memo[1], memo[2]
else:
    t0 = time.perf_counter()
    fig = tl.timeline_figure(views, window=window, sequence=sequence and not with_cpu)
    build_ms = (time.perf_counter() - t0) * 1000
    st.session_state[keys.TIMELINE_MEMO] = (memo_key, fig, build_ms)
meta = fig.layout.meta or {}
if meta.get("empty_runs"):
    st.info(
        "No GPU op in the chosen step of "
        + ", ".join(f"**{ui.esc(x, 40)}**" for x in meta["empty_runs"])
        + ": not drawn (its Overview row says what the trace holds).",
        icon=":material/info:",
    )
how = (
    f"{meta.get('kernels', 0):,} GPU ops drawn as {meta.get('bars', 0):,} bars: kernels shorter than "
    f"{meta.get('bin_us', 0):,.2f} µs merged per lane (hover says how many); zoom the window for detail"
    if meta.get("merged")
    else f"{meta.get('kernels', 0):,} GPU ops, every one drawn"
)
ui.chart(
    fig,
    "fuselens-timeline",
    title,
    key="fl_timeline_chart",
    caption=f"{how} · {'WebGL' if meta.get('webgl') else 'SVG'} · built in {build_ms:,.0f} ms. Dotted line: the "
    "step's last GPU op. Bytes in the hover are estimates.",
)

rows = []
for r, v in zip(sel, views, strict=True):
    n = api.step_op_counts(v.gpu)
    rows.append(
        {
            "run": r.label,
            "step": v.step,
            "GPU ops": n["gpu_ops"],
            "kernels": n["kernels"],
            "GPU span (µs)": v.span_us,
            "GPU op time (µs)": n["busy_us"],
            "streams": n["streams"],
            # a training step's phases, per-position medians over the steady steps (analyzer.phases, as Overview and
            # Compare): not this row's step, so the header says so
            **{f"{p} (µs, median step)": us for p, us in run_phases(r.summary).items()},
        }
    )
st.dataframe(rows, hide_index=True, width="stretch", column_config={
    "GPU ops": st.column_config.NumberColumn(format="localized"),
    "kernels": st.column_config.NumberColumn(format="localized"),
    "GPU span (µs)": st.column_config.NumberColumn(format="%.1f"),
    "GPU op time (µs)": st.column_config.NumberColumn(
        format="%.1f", help="sum of this step's GPU op durations (overlaps on several streams counted twice, so it can "
        "exceed the span; Overview's GPU busy is their union)"),  # fmt: skip
    **{f"{p} (µs, median step)": st.column_config.NumberColumn(
        format="%.1f", help="GPU time of this phase in the run's median step (each kernel position's median over the "
        "steady steps, as Overview and Compare show it), not in the step of this row") for p in PHASES},  # fmt: skip
})  # fmt: skip

# Open in Perfetto: the step drawn above, as a small Kineto JSON with its launch → kernel flows, per run.
st.caption(
    "**Open in Perfetto**: download a run's step below (kernels, the CPU ops and launches in its window, flows), "
    "then drop the file on ui.perfetto.dev (or chrome://tracing) for the zoomable timeline. Nothing is uploaded "
    "from here."
)
dl_cols = st.columns(min(len(sel), 4))
for i, (r, v) in enumerate(zip(sel, views, strict=True)):
    dl_cols[i % len(dl_cols)].download_button(
        f"{r.label}: step {v.step}",
        data=lambda r=r, v=v: step_trace_bytes(r.trace, v.step, r.label),
        file_name=f"fuselens-{file_label(r.file_name)}-step{v.step}.json",
        mime="application/json",
        icon=":material/open_in_new:",
        on_click="ignore",
        key=f"fl_perfetto_{r.key}",
        help="Kineto/Chrome-trace JSON of this step only: Perfetto UI opens it offline in the browser.",
    )
