"""Roofline: achieved FLOP/s vs arithmetic intensity per kernel, baseline and candidates in different marks."""

from __future__ import annotations

import streamlit as st

from analyzer.figures.roofline import roofline_figure
from app_core import state, ui

st.title("Roofline")
ui.show_messages()
runs = ui.require_runs(1, "The roofline")

base = state.baseline()
gpu = base.trace.gpu if base is not None else None
gpus = {r.trace.gpu.name if r.trace.gpu else r.gpu_name for r in runs}

chosen = st.multiselect(
    "Runs", [r.label for r in runs], default=[r.label for r in runs], help="Each run gets its own marker symbol."
)
sel = [r for r in runs if r.label in chosen]
by = st.radio(
    "Bytes",
    ["logical", "predicted DRAM"],
    horizontal=True,
    help="Logical: every tensor read and written once (the cost model). Predicted DRAM: what reaches HBM in sequence, "
    "with L2 reuse of earlier kernels' tensors and write-back when evicted (docs/COST_MODEL.md, 'DRAM model').",
)
column = "bytes_per_call" if by == "logical" else "dram_bytes_per_call"
measured = state.measured_roofs(base) if base is not None else {}
fig = roofline_figure([(r.label, r.summary.kernels) for r in sel], gpu, bytes_column=column, measured=measured)
meta = fig.layout.meta or {}
notes = [f"{meta.get('points', 0):,} kernels plotted; marker area ∝ time per step; colour = category"]
if meta.get("zero_flops"):
    notes.append(f"{meta['zero_flops']:,} pure data-movement kernels (0 FLOPs) cannot sit on a log axis: see Kernels")
if meta.get("no_estimate"):
    notes.append(f"{meta['no_estimate']:,} without a byte/FLOP estimate")
if gpu is None:
    notes.append(f"no roofs: {ui.esc(base.gpu_name if base else 'this GPU')} is not in the peak table")
else:
    notes.append(f"roofs: {ui.esc(gpu.name)} datasheet peaks ({ui.esc(gpu.source)})")
if measured:
    notes.append(
        "dashed orange: roofs the runner measured on this GPU ("
        + ", ".join(f"{k} {v:,.0f}" for k, v in measured.items() if isinstance(v, float))
        + "; manifest 'ceilings')"
    )
if len(gpus) > 1:
    notes.append("runs come from different GPUs; the roofs are the baseline's")
ui.chart(
    fig,
    "fuselens-roofline",
    "Roofline: achieved TFLOP/s vs arithmetic intensity (estimates)",
    key="fl_roofline_chart",
    caption=" · ".join(notes)
    + (
        ". FLOPs and bytes are estimates from shapes and dtypes."
        if column == "bytes_per_call"
        else ". FLOPs are estimates; bytes are PREDICTED DRAM traffic (L2-aware model on one steady step)."
    ),
)
