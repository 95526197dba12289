"""Profiler steps: windows from ``ProfilerStep#N`` annotations, GPU ops assigned to them, per-step stats.

* Windows: CPU ``ProfilerStep#N`` ranges (cat ``user_annotation``; legacy traces record them as ``Operator``);
  if there are none, the ``gpu_user_annotation`` ones that newer Kineto draws on the GPU stream. The same step
  number seen on several threads/streams becomes one window (earliest start, latest end).
* A GPU op belongs to the step whose window contains its LAUNCH time (the CPU side: a kernel often runs after
  its step's CPU range has closed, e.g. ~15 ms later in the Qwen H100 trace). A GPU op without a launch uses
  its own start against GPU windows when the trace has them (they are in GPU time); else the launched ops
  around it on its stream decide (never its GPU time against a CPU window: warm-up work still draining from
  the GPU queue would land in the first profiled step).
* No step markers → one step 0, source 'whole trace', spanning everything.
* Per step (STEPS): kernels, GPU span, busy = union of GPU op intervals (overlapping streams counted once),
  idle = span − busy, median launch latency. Per (step, category) (STEP_CATEGORIES): count, time, bytes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyzer import schema

STEP_NAME = r"^ProfilerStep#(\d+)$"


def step_windows(annotations: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(CPU windows, GPU windows): each with step, start_us, end_us, sorted by start (possibly empty)."""
    num = pd.to_numeric(annotations["name"].astype(str).str.extract(STEP_NAME, expand=False), errors="coerce")
    is_step = num.notna().to_numpy() & np.isfinite(annotations["dur_us"].to_numpy())
    on_gpu = annotations["on_gpu"].to_numpy(dtype=bool)
    out = []
    for mask in (is_step & ~on_gpu, is_step & on_gpu):
        w = pd.DataFrame(
            {
                "step": num[mask].astype(np.int64).to_numpy(),
                "start_us": annotations["ts_us"].to_numpy()[mask],
                "end_us": annotations["end_us"].to_numpy()[mask],
            }
        )
        w = w.groupby("step", as_index=False).agg(start_us=("start_us", "min"), end_us=("end_us", "max"))
        out.append(w.sort_values("start_us", kind="stable").reset_index(drop=True))
    return out[0], out[1]


def windows_source(cpu_windows: pd.DataFrame, gpu_windows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    if len(cpu_windows):
        return cpu_windows, "cpu"
    if len(gpu_windows):
        return gpu_windows, "gpu"
    return cpu_windows, "whole trace"


def assign_steps(gpu_ops: pd.DataFrame, cpu_windows: pd.DataFrame, gpu_windows: pd.DataFrame) -> np.ndarray:
    """Step number of each GPU op (-1 outside every window). Vectorised: a few searchsorted calls and one sort.

    With a launch: its CPU time against the CPU windows. Without one (its launch fell outside the recorded CPU
    range, e.g. 436 of 1,465 kernels in the Qwen H100 trace): its own GPU time against the GPU windows when the
    trace has them, else by stream order (`_orphan_steps`).
    """
    n = len(gpu_ops)
    windows, source = windows_source(cpu_windows, gpu_windows)
    if source == "whole trace":
        return np.zeros(n, dtype=np.int64)
    ts = gpu_ops["ts_us"].to_numpy()
    if source == "gpu":
        return _inside(gpu_windows, ts)
    launch = gpu_ops["launch_ts_us"].to_numpy()
    has_launch = np.isfinite(launch)
    out = _inside(cpu_windows, np.where(has_launch, launch, ts))
    orphan = ~has_launch
    if orphan.any():
        if len(gpu_windows):
            out[orphan] = _inside(gpu_windows, ts[orphan])
        elif has_launch.any():
            out[orphan] = _orphan_steps(gpu_ops, out, has_launch)[orphan]
    return out


def _orphan_steps(gpu_ops: pd.DataFrame, step: np.ndarray, has_launch: np.ndarray) -> np.ndarray:
    """Steps for GPU ops without a launch event, from the launched ops around them on their own stream.

    A stream runs its work in launch order. An op that starts before every launched op of its stream was queued
    before the profiler recorded any launch: leftover warm-up work (a compile trace's warm-up GEMM, GELU and
    memset still running when the first profiled step began; 872 ops of HTA's CUDA-graph rank-0 trace, 614 of
    its trace_diff 'test' trace), so it belongs to no step (-1), whatever CPU window its GPU time falls in. An op
    between two launched ops of the same step on its stream belongs to that step. Anything else (between two
    steps, or after a stream's last launched op) has no evidence: -1.
    """
    n = len(gpu_ops)
    key = gpu_ops["device"].to_numpy().astype(np.int64) * (1 << 32) + gpu_ops["stream"].to_numpy().astype(np.int64)
    order = np.lexsort((np.arange(n), gpu_ops["ts_us"].to_numpy(), key))
    k = key[order]
    known = np.where(has_launch[order] & (step[order] >= 0), step[order], np.nan)
    frame = pd.DataFrame({"k": k, "s": known})
    grouped = frame.groupby("k")["s"]
    before, after = grouped.ffill().to_numpy(), grouped.bfill().to_numpy()
    same = np.isfinite(before) & (before == after)
    sorted_out = np.where(same, np.nan_to_num(before, nan=-1), -1).astype(np.int64)
    out = np.empty(n, dtype=np.int64)
    out[order] = sorted_out
    return out


def _inside(windows: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    starts = windows["start_us"].to_numpy()
    ends = windows["end_us"].to_numpy()
    steps = windows["step"].to_numpy()
    i = np.searchsorted(starts, t, side="right") - 1
    ic = np.maximum(i, 0)
    inside = (i >= 0) & (t <= ends[ic]) & np.isfinite(t)
    return np.where(inside, steps[ic], -1).astype(np.int64)


def step_tables(gpu_ops: pd.DataFrame, windows: pd.DataFrame, source: str, span: tuple[float, float]):
    """(STEPS, STEP_CATEGORIES) DataFrames. gpu_ops needs step, ts_us, dur_us, end_us, launch_latency_us,
    category, bytes. span: (first, last) µs of the whole trace, for the 'whole trace' window."""
    if source == "whole trace":
        windows = pd.DataFrame({"step": np.array([0], dtype=np.int64), "start_us": [span[0]], "end_us": [span[1]]})
    g = gpu_ops[gpu_ops["step"] >= 0]
    steps = windows.sort_values("step", kind="stable").reset_index(drop=True)
    steps.insert(1, "source", source)

    ts = g["ts_us"].to_numpy()
    end = g["end_us"].to_numpy()
    order = np.lexsort((ts, g["step"].to_numpy()))
    s_step, s_ts, s_end = g["step"].to_numpy()[order], ts[order], end[order]
    busy = _union_by_group(s_step, s_ts, s_end)

    by = g.groupby("step", sort=True)
    stats = pd.DataFrame(
        {
            "kernels": by.size(),
            "gpu_start_us": by["ts_us"].min(),
            "gpu_end_us": by["end_us"].max(),
            "launch_latency_us": by["launch_latency_us"].median(),
        }
    )
    stats["gpu_busy_us"] = pd.Series(busy, dtype=float)
    steps = steps.merge(stats, left_on="step", right_index=True, how="left")
    steps["kernels"] = steps["kernels"].fillna(0).astype(np.int64)  # a step with no GPU op has 0 kernels (a count)
    steps["gpu_span_us"] = steps["gpu_end_us"] - steps["gpu_start_us"]
    steps["gpu_idle_us"] = steps["gpu_span_us"] - steps["gpu_busy_us"]

    cat = (
        g.assign(_unknown=g["bytes"].isna())
        .groupby(["step", "category"], sort=True)
        .agg(count=("dur_us", "size"), time_us=("dur_us", "sum"), bytes=("bytes", "sum"), _unknown=("_unknown", "any"))
        .reset_index()
    )
    cat["bytes"] = cat["bytes"].where(~cat["_unknown"], np.nan)  # one unknown makes the sum unknown, never 0
    return schema.conform(steps, "steps"), schema.conform(cat, "step_categories")


def _union_by_group(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict:
    """Length of the union of [start, end] per group; rows sorted by (group, start). Vectorised:
    sum over i of max(0, end_i − max(start_i, max(end_0..end_{i−1}))) within each group."""
    if len(group) == 0:
        return {}
    ok = np.isfinite(start) & np.isfinite(end)
    group, start, end = group[ok], start[ok], end[ok]
    if len(group) == 0:
        return {}
    df = pd.DataFrame({"g": group, "e": end})
    prev_max = df.groupby("g")["e"].cummax().groupby(df["g"]).shift(1).to_numpy()
    prev_max = np.where(np.isnan(prev_max), -np.inf, prev_max)
    contrib = np.maximum(0.0, end - np.maximum(start, prev_max))
    sums = pd.Series(contrib).groupby(group).sum()
    return sums.to_dict()


def spread_range(values) -> tuple[float, float]:
    """(low, high) of a per-step figure over steps: (min, max); (p10, p90) from 10 steps on, so one outlier step
    in a long run does not stand for the run's spread. (nan, nan) when no value is finite."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return (float("nan"), float("nan"))
    if v.size >= 10:
        return (float(np.percentile(v, 10)), float(np.percentile(v, 90)))
    return (float(v.min()), float(v.max()))


def spread_rule(n_steps: int) -> str:
    """What `spread_range` gives for n steps, as a label beside the range."""
    return "p10–p90" if n_steps >= 10 else "min–max"


REPRESENTATIVE = -1  # a step position that means "the representative step" (pick_step), not the k-th recorded one


def recorded_steps(steps: pd.DataFrame) -> list[int]:
    """The recorded step numbers (STEPS.step) in order; [0] for a trace without any (its ops sit in step 0)."""
    return [int(s) for s in steps["step"].tolist()] if not steps.empty else [0]


def pick_step(steps: pd.DataFrame, steps_used, position: int) -> int:
    """The step to show for a step `position`: the k-th recorded step (the last one past the end), or, for
    REPRESENTATIVE, the steady-state step (`steps_used`, else every recorded one) with the median GPU span. An even
    count takes the lower median, a step with no span sorts last, and steps tie in their recorded order, so the pick
    is one recorded step, never an average of two."""
    recorded = recorded_steps(steps)
    if position != REPRESENTATIVE:
        return recorded[min(position, len(recorded) - 1)]
    used = [s for s in (steps_used or recorded) if s in recorded] or recorded
    if steps.empty or "gpu_span_us" not in steps:
        return used[len(used) // 2]
    spans = steps.set_index("step").loc[used, "gpu_span_us"].to_numpy(dtype=float)
    spans = np.nan_to_num(spans, nan=np.inf)
    return used[int(np.argsort(spans, kind="stable")[(len(used) - 1) // 2])]


def step_op_counts(step_gpu_ops: pd.DataFrame) -> dict:
    """What one step's GPU ops (GPU_OPS rows of that step) hold: how many, how many are kernels, their summed
    duration (`busy_us`: overlapping streams counted twice, unlike STEPS.gpu_busy_us) and the streams they ran on."""
    g = step_gpu_ops
    if g.empty:
        return {"gpu_ops": 0, "kernels": 0, "busy_us": 0.0, "streams": 0}
    return {
        "gpu_ops": len(g),
        "kernels": int((g["kind"] == "kernel").sum()),
        "busy_us": float(g["dur_us"].sum()),
        "streams": int(g["stream"].nunique()),
    }
