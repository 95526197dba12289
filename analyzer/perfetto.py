"""One profiler step as a small Kineto (Chrome trace) JSON that Perfetto UI (ui.perfetto.dev) and chrome://tracing
open: the step's GPU ops, the CPU ops and runtime launches inside its window, the ProfilerStep annotation, and the
launch → kernel flow arrows (`ac2g`, as Kineto writes them).

Why: the dashboard draws one step per run; for the zoomable whole-timeline view users go to Perfetto, and a
multi-GB trace is slow to upload there. A step is usually kilobytes to a few MB. Columnar: events are built from
the trace's DataFrames with vectorised selection and one list comprehension per table, no per-event lookups.
"""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd

from analyzer.fmt import clean_json

# Kineto's event categories per GPU op kind (a GPU's events go under pid = device index, tid = stream).
KINETO_CAT = {"kernel": "kernel", "memset": "gpu_memset", "memcpy": "gpu_memcpy"}


def _window(trace, step: int) -> tuple[float, float]:
    steps = trace.steps
    g = trace.gpu_ops
    g = g[g["step"] == step]
    lo, hi = [], []
    if not steps.empty and (steps["step"] == step).any():
        row = steps[steps["step"] == step].iloc[0]
        lo.append(float(row["start_us"]))
        hi.append(float(row["end_us"]))
    if len(g):
        lo.append(float(g["ts_us"].min()))
        hi.append(float(np.nanmax(g["end_us"].to_numpy(dtype=float))))
    if not lo:
        raise ValueError(f"step {step} has no events")
    return min(lo), max(hi)


def _x(df: pd.DataFrame, cat, pid, tid, args: list[str]) -> list[dict]:
    cols = [df[c].tolist() for c in ("name", "ts_us", "dur_us")]
    cats = cat.tolist() if isinstance(cat, pd.Series) else [cat] * len(df)
    pids = pid.tolist() if isinstance(pid, pd.Series) else [pid] * len(df)
    tids = tid.tolist() if isinstance(tid, pd.Series) else [tid] * len(df)
    extra = [df[a].tolist() if a in df else [None] * len(df) for a in args]
    out = []
    for i, (name, ts, dur) in enumerate(zip(*cols, strict=True)):
        ev = {"ph": "X", "cat": cats[i], "name": str(name), "pid": pids[i], "tid": tids[i], "ts": ts, "dur": dur}
        a = {k: v[i] for k, v in zip(args, extra, strict=True) if v[i] is not None and v[i] != -1}
        if a:
            ev["args"] = a
        out.append(ev)
    return out


def step_trace(trace, step: int, label: str = "") -> dict:
    """The Chrome-trace document of one step of `trace` (an analyzer Trace). Times are µs from the trace start."""
    lo, hi = _window(trace, step)
    g = trace.gpu_ops[trace.gpu_ops["step"] == step]
    cpu = trace.cpu_ops
    cpu = cpu[(cpu["ts_us"] >= lo) & (cpu["ts_us"] <= hi)]
    la = trace.launches
    la = la[(la["ts_us"] >= lo) & (la["ts_us"] <= hi)]
    ann = trace.annotations
    ann = ann[(ann["ts_us"] <= hi) & (ann["end_us"] >= lo) & ~ann["on_gpu"].astype(bool)]
    events: list[dict] = []
    for dev in sorted(set(g["device"].tolist())):
        events.append({"ph": "M", "name": "process_name", "pid": int(dev), "args": {"name": f"GPU {dev}"}})
    cat = g["kind"].map(KINETO_CAT).fillna("kernel")
    events += _x(g, cat, g["device"], g["stream"], ["correlation", "external_id", "grid", "block"])
    events += _x(cpu, "cpu_op", cpu["pid"], cpu["tid"], ["external_id", "input_dims", "input_types"])
    events += _x(la, "cuda_runtime", la["pid"], la["tid"], ["correlation", "external_id"])
    events += _x(ann, "user_annotation", ann["pid"], ann["tid"], [])
    # Flows: launch (start) → kernel (end, bound to the enclosing slice), one id per correlation.
    corr = set(g["correlation"][g["correlation"] >= 0].tolist())
    lk = la[la["correlation"].isin(corr)]
    for c, pid, tid, ts in lk[["correlation", "pid", "tid", "ts_us"]].itertuples(index=False, name=None):
        events.append({"ph": "s", "id": int(c), "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"})
    gk = g[g["correlation"].isin(set(lk["correlation"].tolist()))]
    for c, dev, stream, ts in gk[["correlation", "device", "stream", "ts_us"]].itertuples(index=False, name=None):
        events.append(
            {"ph": "f", "bp": "e", "id": int(c), "pid": dev, "tid": stream, "ts": ts, "cat": "ac2g", "name": "ac2g"}
        )
    meta = {
        "fuselens": {
            "source": str(trace.meta.source),
            "label": label,
            "step": int(step),
            "window_us": [lo, hi],
            "note": "one profiler step exported by FuseLens; times are µs from the trace's first event",
        }
    }
    if trace.meta.gpu_name:
        meta["deviceProperties"] = [{"name": trace.meta.gpu_name}]
    return {"traceEvents": clean_json(events), "displayTimeUnit": "us", **meta}


def step_trace_bytes(trace, step: int, label: str = "") -> bytes:
    """step_trace as JSON bytes (NaN/inf → null, names through fmt.clean_json)."""
    return orjson.dumps(step_trace(trace, step, label), option=orjson.OPT_SERIALIZE_NUMPY)
