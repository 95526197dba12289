"""Trace: one parsed profiler trace as columnar tables (see analyzer/schema.py for every column)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analyzer.gpus import GpuSpec


@dataclass
class TraceMeta:
    source: str  # file name used in every message about this trace
    gpu_name: str | None = None  # deviceProperties[0].name, or None
    device_properties: list[dict] = field(default_factory=list)
    schema: str = "kineto"  # 'kineto' (float µs, baseTimeNanoseconds) or 'legacy' (PyTorch 1.x, integer epoch µs)
    base_time_ns: int | None = None
    distributed: dict | None = None  # distributedInfo: backend, rank, world_size
    trace_start_us: float = 0.0  # raw ts subtracted from every ts_us column
    n_events: int = 0
    warnings: list[str] = field(default_factory=list)  # what was repaired or dropped, one line each
    extra: dict = field(default_factory=dict)  # other top-level keys worth showing (e.g. torch version from a manifest)


@dataclass
class Trace:
    meta: TraceMeta
    gpu_ops: pd.DataFrame  # GPU_OPS
    cpu_ops: pd.DataFrame  # CPU_OPS
    launches: pd.DataFrame  # LAUNCHES
    annotations: pd.DataFrame  # ANNOTATIONS
    steps: pd.DataFrame  # STEPS
    step_categories: pd.DataFrame  # STEP_CATEGORIES
    gpu: GpuSpec | None = None  # peak table entry for meta.gpu_name, None when unknown

    @property
    def kernels(self) -> pd.DataFrame:
        return self.gpu_ops[self.gpu_ops["kind"] == "kernel"]

    @property
    def memops(self) -> pd.DataFrame:
        return self.gpu_ops[self.gpu_ops["kind"] != "kernel"]


# ---------------------------------------------------------------------------------------------------- build
def build_trace(decoded, source: str) -> Trace:
    """A reader's raw tables (``analyzer.schema.RawTrace``; the Kineto JSON reader is analyzer.readers.decode) →
    Trace: tables → link → classify → cost → steps. Any reader that honours the raw-table contract plugs in here.

    Raises TraceError when the file is valid JSON but holds nothing a PyTorch profiler trace would.
    """
    # imported here: classify/cost/summary may import this module; keep the dependency one-way at import time
    from analyzer import cost, gpus, link, schema, steps
    from analyzer.codes import factorize
    from analyzer.opinfo import classify

    meta = _meta(decoded, source)
    _check_is_trace(decoded, source, meta)
    t0 = decoded.trace_start_raw if np.isfinite(decoded.trace_start_raw) else 0.0
    meta.trace_start_us = float(t0)

    schema.check_raw(decoded)
    cpu = _frame(decoded.cpu, t0, schema.raw_empty("cpu"))
    launches = _frame(decoded.launches, t0, schema.raw_empty("launches"))
    ann = _frame(decoded.annotations, t0, schema.raw_empty("annotations"))
    gpu = _frame(decoded.gpu, t0, schema.raw_empty("gpu"))
    # the DataFrames hold sorted copies now: drop the decoded columns (~170 MB on a 1 GB trace) before the
    # memory-hungry stages below
    decoded.gpu = decoded.cpu = decoded.launches = decoded.annotations = {}

    # Legacy traces record ProfilerStep#N as an 'Operator': it is an annotation, not an op (it would otherwise be
    # the "innermost op" of every stray launch).
    name_codes, names = factorize(cpu["name"].to_numpy(dtype=object))  # matched once per distinct name
    step_ops = pd.Series(names, dtype=object).astype(str).str.match(steps.STEP_NAME).to_numpy(dtype=bool)[name_codes]
    if step_ops.any():
        moved = cpu[step_ops]
        ann = pd.concat([ann, moved.assign(on_gpu=False)[list(ann.columns)]], ignore_index=True)
        ann = ann.take(np.lexsort((ann["event_index"].to_numpy(), ann["ts_us"].to_numpy()))).reset_index(drop=True)
        cpu = cpu[~step_ops]
    cpu = cpu.reset_index(drop=True)

    _negative_durations(gpu, meta, "GPU ops")
    _negative_durations(cpu, meta, "CPU ops")

    ann_ext = ann["external_id"].to_numpy() if "external_id" in ann else np.empty(0, np.int64)
    gpu = link.link(gpu, launches, cpu, ann_ext)
    _link_warnings(gpu, meta)

    # classify distinct names only (a 1 GB trace has ~10^6 kernels but ~10^3 names), then spread back
    codes, uniques = factorize(gpu["name"].to_numpy(dtype=object))
    cls = classify.classify_names(pd.Series(uniques, dtype=object))
    for col in ("category", "library", "ops"):
        values = cls[col].to_numpy(dtype=object)[codes] if len(gpu) else np.empty(0, dtype=object)
        gpu[col] = pd.Series(values, dtype=object, index=gpu.index)
    if "op_name" in gpu:  # the launching op says what a shared kernel computes for it (classify.OP_RULES)
        gpu["ops"] = classify.refine_by_op(gpu["ops"], gpu["op_name"])
        if "input_dims" in gpu:  # a GEMM template's name also lists its inputs' producers: its buffers decide
            gpu["ops"] = classify.refine_templates(gpu)
    # memcpy/memset are known by their event category, whatever their name says
    kinds, kind_names = factorize(gpu["kind"].to_numpy(dtype=object))  # 3 distinct kinds: compare codes, not text
    memops = np.flatnonzero(np.isin(kind_names, ("memcpy", "memset"))[kinds]) if len(gpu) else np.zeros(0, np.int64)
    if len(memops):
        category = gpu["category"].to_numpy(dtype=object).copy()
        rows = memops[category[memops] == "other"]
        category[rows] = kind_names[kinds[rows]]
        gpu["category"] = pd.Series(category, dtype=object, index=gpu.index)

    spec = gpus.lookup(meta.device_properties, meta.gpu_name)
    for col, values in cost.cost_columns(gpu, spec).items():
        gpu[col] = pd.Series(values, dtype=object, index=gpu.index) if values.dtype == object else values

    cpu_windows, gpu_windows = steps.step_windows(ann)
    windows, source_kind = steps.windows_source(cpu_windows, gpu_windows)
    gpu["step"] = steps.assign_steps(gpu, cpu_windows, gpu_windows)
    span = _span(gpu, cpu, launches, ann)
    step_df, step_cat = steps.step_tables(gpu, windows, source_kind, span)
    if source_kind != "whole trace" and len(gpu) and (gpu["step"] < 0).any():
        outside = (gpu["step"] < 0).to_numpy()
        queued = int((outside & ~np.isfinite(gpu["launch_ts_us"].to_numpy())).sum())
        meta.warnings.append(
            f"{int(outside.sum()):,} of {len(gpu):,} GPU ops fall outside every ProfilerStep window (step -1)"
            + (f"; {queued:,} of them have no launch in the trace (queued before profiling began)" if queued else "")
        )

    return Trace(
        meta=meta,
        gpu_ops=schema.conform(gpu, "gpu_ops"),
        cpu_ops=schema.conform(cpu, "cpu_ops"),
        launches=schema.conform(launches, "launches"),
        annotations=schema.conform(ann, "annotations"),
        steps=step_df,
        step_categories=step_cat,
        gpu=spec,
    )


_RENAME = {
    "ts": "ts_us",
    "dur": "dur_us",
    "registers": "registers_per_thread",
    "shared_memory": "shared_memory_bytes",
    "bytes": "memop_bytes",
}


def _frame(cols: dict, t0: float, empty: dict) -> pd.DataFrame:
    if not cols:
        df = pd.DataFrame(empty).rename(columns=_RENAME)
        df["ts_us"] = df["ts_us"].astype(float) - t0
        df["end_us"] = df["ts_us"] + df["dur_us"]
        return df
    # Sorted column by column in numpy and handed to pandas once, unconsolidated (copy=False: one block per
    # column): at most one copy of every column, none when the rows are in time order already.
    ts = np.asarray(cols["ts"], dtype=float) - t0
    # rows in time order; equal starts keep file order (the decoder groups events by kind within a batch)
    order = np.lexsort((np.asarray(cols["event_index"]), ts))
    if len(order) and (np.diff(order) == 1).all():
        order = slice(None)
    out = {}
    for k, v in cols.items():
        if isinstance(v, list):  # object columns stay object (pandas 3 would infer 'str' and copy every name)
            v = np.fromiter(v, dtype=object, count=len(v))
        out[_RENAME.get(k, k)] = ts[order] if k == "ts" else np.asarray(v)[order]
    out["end_us"] = out["ts_us"] + out["dur_us"]
    out = {k: pd.Series(v, dtype=object, copy=False) if v.dtype == object else v for k, v in out.items()}
    return pd.DataFrame(out, copy=False)


def _meta(decoded, source: str) -> TraceMeta:
    h = decoded.header
    props = h.get("deviceProperties")
    if not isinstance(props, list):
        props = h.get("computeProperties")  # legacy key: major/minor instead of computeMajor/computeMinor
    props = [_device_props(p) for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    gpu_name = next((p["name"] for p in props if isinstance(p.get("name"), str) and p["name"]), None)
    base = h.get("baseTimeNanoseconds")
    dist = h.get("distributedInfo")
    extra = {
        k: v
        for k, v in h.items()
        if k not in ("deviceProperties", "computeProperties", "distributedInfo", "baseTimeNanoseconds")
        and isinstance(v, (str, int, float, bool))
    }
    return TraceMeta(
        source=source,
        gpu_name=gpu_name,
        device_properties=props,
        schema="legacy" if decoded.legacy else "kineto",
        base_time_ns=int(base) if isinstance(base, (int, float)) and not isinstance(base, bool) else None,
        distributed=dist if isinstance(dist, dict) else None,
        n_events=decoded.n_events,
        warnings=list(decoded.warnings),
        extra=extra,
    )


def _device_props(p: dict) -> dict:
    """Legacy computeProperties spell computeMajor/computeMinor/numSms as major/minor/multiProcessorCount:
    add the modern keys (keeping the originals) so every reader sees one spelling."""
    out = dict(p)
    for new, old in (("computeMajor", "major"), ("computeMinor", "minor"), ("numSms", "multiProcessorCount")):
        if new not in out and old in out:
            out[new] = out[old]
    return out


_KINETO_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_runtime", "cuda_driver", "user_annotation",
                      "gpu_user_annotation", "python_function", "operator", "runtime", "memcpy", "memset", "ac2g"}  # fmt: skip


def _check_is_trace(decoded, source: str, meta: TraceMeta) -> None:
    """Valid JSON that is not a PyTorch trace → TraceError naming what it looks like; CPU-only → a warning."""
    from analyzer.errors import TraceError

    if decoded.n_events == 0:
        raise TraceError(source, "the trace has no events (empty 'traceEvents')")
    labels = sorted(set(decoded.process_labels))
    if any("/device:" in x or "/host:" in x for x in labels):  # TF/JAX trace viewer: processes named by device
        raise TraceError(
            source,
            f"looks like a TensorFlow/JAX profiler trace (processes {', '.join(labels[:3])});"
            " FuseLens reads PyTorch profiler (Kineto) traces",
        )
    # events that carry a category (Chrome's own '__metadata' is metadata, not activity)
    activity = {c: n for c, n in decoded.categories.items() if c and not c.startswith("__")}
    if not any(c.lower() in _KINETO_CATEGORIES for c in activity):
        if not activity:
            raise TraceError(source, "no profiler activity: only metadata events (process/thread names)")
        top = ", ".join(c for c, _ in sorted(activity.items(), key=lambda kv: -kv[1])[:4])
        raise TraceError(
            source,
            f"not a PyTorch profiler trace: none of its {decoded.n_events:,} events has a Kineto category"
            f" (found: {top}; a Chrome browser trace?)",
        )
    if not decoded.gpu:
        meta.warnings.append("no GPU kernels, memcpy or memset in this trace (CPU-only profile?)")


# No single GPU kernel or CPU op of a profiled step runs for a day; a longer recorded duration is damage (a `dur`
# of 1e18 would otherwise turn into a 5e18 µs GPU time). Such durations are set to unknown and said so.
MAX_OP_DUR_US = 86_400e6


def _negative_durations(df: pd.DataFrame, meta: TraceMeta, what: str) -> None:
    dur = df["dur_us"].to_numpy(dtype=float, copy=True)
    for bad, why in (
        (dur < 0, "a negative duration"),
        (dur > MAX_OP_DUR_US, f"an implausible duration (over {MAX_OP_DUR_US / 3.6e9:,.0f} h)"),
    ):
        if bad.any():
            df.loc[bad, "dur_us"] = float("nan")
            df.loc[bad, "end_us"] = float("nan")
            meta.warnings.append(
                f"{int(bad.sum()):,} {what} with {why}, e.g. {float(dur[bad][0]):.3g} µs: duration set to unknown"
            )


def _link_warnings(gpu: pd.DataFrame, meta: TraceMeta) -> None:
    if not len(gpu):
        return
    kernels = (gpu["kind"] == "kernel").to_numpy()
    no_op = kernels & (gpu["op_index"] < 0).to_numpy()
    if kernels.any() and no_op.mean() > 0.5 and no_op.sum() > 0:
        meta.warnings.append(f"{int(no_op.sum()):,} of {int(kernels.sum()):,} kernels could not be linked to a CPU op")


def _span(gpu, cpu, launches, ann) -> tuple[float, float]:
    starts = [df["ts_us"].min() for df in (gpu, cpu, launches, ann) if len(df)]
    ends = [(df["ts_us"] + df["dur_us"]).max() for df in (gpu, cpu, launches, ann) if len(df)]
    starts = [s for s in starts if np.isfinite(s)]
    ends = [e for e in ends if np.isfinite(e)]
    return (min(starts) if starts else float("nan"), max(ends) if ends else float("nan"))
