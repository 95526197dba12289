"""Column contracts for every DataFrame the analyzer returns — the one place they are defined.

Every table the analyzer hands out (``Trace.gpu_ops``, ``Trace.cpu_ops`` …, ``Summary.kernels`` …)
has exactly the columns listed here, in this order, with these dtypes. Units live in the names
(``_us`` microseconds, ``_bytes`` bytes, ``_gbps`` 1e9 bytes/s, ``_tflops`` 1e12 FLOP/s).
Unknown numbers are NaN (never 0); unknown strings are "" ; unknown ids are -1.
``docs/COLUMNS.md`` is generated from this module (``python -m analyzer columns``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where a table is built: the cache's version and light reads need none
    import pandas as pd


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # a pandas dtype name: "float64", "int64", "bool", "object" (str or list), "string"
    doc: str


def _table(*cols: tuple[str, str, str]) -> tuple[Column, ...]:
    return tuple(Column(*c) for c in cols)


# One row per GPU activity: kernels, memcpy and memset. Trace.kernels / Trace.memops are views of it.
GPU_OPS = _table(
    ("kind", "object", "'kernel', 'memcpy' or 'memset'"),
    ("name", "object", "kernel name as recorded (demangled by the profiler)"),
    (
        "category",
        "object",
        "gemm, pointwise, reduction, normalization, attention, communication, memcpy, memset, other",
    ),
    ("library", "object", "cuBLAS, CUTLASS, cuDNN, Triton-Inductor, Triton-template, Triton-user, ATen, NCCL, … or ''"),
    ("ops", "object", "ops the kernel computes, decoded from its name, '+'-joined ('gelu+mul'); '' if none"),
    ("device", "int64", "GPU index (-1 unknown)"),
    ("stream", "int64", "CUDA/HIP stream (-1 unknown)"),
    ("ts_us", "float64", "start, µs since the trace's first event"),
    ("dur_us", "float64", "duration, µs"),
    ("end_us", "float64", "ts_us + dur_us"),
    ("correlation", "int64", "CUPTI correlation id linking to the runtime launch (-1 unknown)"),
    ("external_id", "int64", "External id linking to the CPU op (-1 unknown)"),
    ("grid", "object", "grid dims 'x,y,z' ('' unknown)"),
    ("block", "object", "block dims 'x,y,z' ('' unknown)"),
    ("registers_per_thread", "float64", "registers per thread (NaN unknown)"),
    ("shared_memory_bytes", "float64", "static + dynamic shared memory per block, bytes (NaN unknown)"),
    ("memop_bytes", "float64", "bytes copied/set, from a memcpy/memset's args (NaN for kernels)"),
    ("launch_name", "object", "runtime call that launched it (cudaLaunchKernel, cuLaunchKernelEx, …; '' unknown)"),
    ("launch_ts_us", "float64", "start of that runtime call, µs (NaN unknown)"),
    ("launch_latency_us", "float64", "ts_us - launch_ts_us: launch call start to kernel start, µs (NaN unknown)"),
    ("op_index", "int64", "row label in cpu_ops of the innermost CPU op that launched it (-1 unknown)"),
    ("op_name", "object", "that op's name ('' unknown)"),
    ("input_dims", "object", "that op's 'Input Dims' (list of lists) or None when unknown"),
    ("input_types", "object", "that op's 'Input type' (list of str) or None"),
    ("input_strides", "object", "that op's 'Input Strides' (list of lists) or None"),
    (
        "concrete_inputs",
        "object",
        "that op's 'Concrete Inputs' (list of str: scalar argument values, e.g. is_causal 'True') or None",
    ),
    ("shapes_known", "bool", "True when the kernel carries its op's input shapes (False: e.g. CUDA-graph replay)"),
    (
        "graph_replay",
        "bool",
        "launched by a CUDA-graph replay (one cudaGraphLaunch, many GPU ops): no op or shapes of its own",
    ),
    ("step", "int64", "profiler step number the kernel belongs to (by its launch time; -1 outside any step)"),
    ("bytes", "float64", "ESTIMATED HBM bytes read + written (NaN unknown); basis in cost_basis"),
    ("flops", "float64", "ESTIMATED floating-point operations (NaN unknown / 0 for pure data movement)"),
    ("cost_basis", "object", "what bytes/flops rest on, e.g. 'estimate: gemm M=8192 N=3072 K=768 bf16 from aten::mm'"),
    ("achieved_gbps", "float64", "bytes / dur, 1e9 B/s (NaN unknown)"),
    ("achieved_tflops", "float64", "flops / dur, 1e12 FLOP/s (NaN unknown)"),
    ("pct_peak_bw", "float64", "achieved_gbps as % of the GPU's peak HBM bandwidth (NaN unknown GPU)"),
    ("pct_peak_flops", "float64", "achieved_tflops as % of the GPU's dense peak for the op's dtype (NaN unknown)"),
)

# One row per CPU operator (cat 'cpu_op', legacy 'Operator').
CPU_OPS = _table(
    ("name", "object", "operator name, e.g. 'aten::mm'"),
    ("pid", "int64", "process id (-1 unknown)"),
    ("tid", "int64", "thread id (-1 unknown)"),
    ("ts_us", "float64", "start, µs since the trace's first event"),
    ("dur_us", "float64", "duration, µs"),
    ("end_us", "float64", "ts_us + dur_us"),
    ("external_id", "int64", "External id (-1 unknown)"),
    ("sequence_number", "int64", "autograd sequence number (-1 unknown)"),
    ("input_dims", "object", "'Input Dims' as list of lists, or None"),
    ("input_types", "object", "'Input type' as list of str, or None"),
    ("input_strides", "object", "'Input Strides' as list of lists, or None"),
    ("concrete_inputs", "object", "'Concrete Inputs' (scalar argument values as text) as list of str, or None"),
)

# One row per runtime/driver launch call (cat 'cuda_runtime', 'cuda_driver', legacy 'Runtime').
LAUNCHES = _table(
    ("name", "object", "runtime call, e.g. 'cudaLaunchKernel'"),
    ("pid", "int64", "process id"),
    ("tid", "int64", "thread id"),
    ("ts_us", "float64", "start, µs since the trace's first event"),
    ("dur_us", "float64", "duration, µs"),
    ("correlation", "int64", "correlation id (-1 unknown)"),
    ("external_id", "int64", "External id (-1 unknown)"),
)

# One row per user / profiler annotation: ProfilerStep#N, record_function ranges, gpu_user_annotation.
ANNOTATIONS = _table(
    ("name", "object", "annotation text"),
    ("on_gpu", "bool", "True for gpu_user_annotation (drawn on a GPU stream)"),
    ("pid", "int64", "process id"),
    ("tid", "int64", "thread id or stream"),
    ("ts_us", "float64", "start, µs since the trace's first event"),
    ("dur_us", "float64", "duration, µs"),
    ("end_us", "float64", "ts_us + dur_us"),
)

# One row per profiler step (a trace without step markers is one step, number 0, source 'whole trace').
STEPS = _table(
    ("step", "int64", "step number from 'ProfilerStep#N'"),
    ("source", "object", "'cpu' (ProfilerStep on the CPU), 'gpu' (gpu_user_annotation) or 'whole trace'"),
    ("start_us", "float64", "CPU-side window start, µs"),
    ("end_us", "float64", "CPU-side window end, µs"),
    ("kernels", "int64", "GPU ops (kernels + memops) launched in the step"),
    ("gpu_start_us", "float64", "first GPU op start of the step"),
    ("gpu_end_us", "float64", "last GPU op end of the step"),
    ("gpu_span_us", "float64", "gpu_end_us - gpu_start_us"),
    ("gpu_busy_us", "float64", "union of GPU op intervals within the step (overlaps counted once)"),
    ("gpu_idle_us", "float64", "gpu_span_us - gpu_busy_us: gaps between GPU ops"),
    ("launch_latency_us", "float64", "median launch → kernel start over the step's GPU ops (NaN unknown)"),
)

# Summary.steps: one row per profiler step (warm-up included) with the figures the per-step medians are taken over.
STEP_TABLE = _table(
    ("step", "int64", "step number"),
    ("steady", "bool", "a steady-state step: the medians and spreads are taken over these"),
    ("kernels", "int64", "kernels in the step"),
    ("memops", "int64", "memcpy/memset ops in the step"),
    ("launches", "int64", "distinct launches of its kernels (a CUDA-graph replay is one)"),
    ("gpu_time_us", "float64", "sum of its GPU op durations, µs (overlapping streams counted twice; NaN unknown)"),
    ("ops_without_duration", "int64", "GPU ops with no usable duration (then gpu_time_us is NaN)"),
    ("bytes", "float64", "sum of estimated bytes (NaN if any is unknown)"),
    ("ops_without_bytes", "int64", "GPU ops with no byte estimate"),
    ("gpu_busy_us", "float64", "GPU busy time: union of its GPU op intervals, µs"),
    ("span_us", "float64", "first GPU op start to last GPU op end, µs"),
    ("idle_us", "float64", "span_us - gpu_busy_us: GPU idle inside the step, µs"),
    ("launch_latency_us", "float64", "median launch → start, µs (NaN unknown)"),
)

# Long table: GPU time per (step, category).
STEP_CATEGORIES = _table(
    ("step", "int64", "step number"),
    ("category", "object", "kernel category"),
    ("count", "int64", "GPU ops of that category in the step"),
    ("time_us", "float64", "sum of their durations, µs"),
    ("bytes", "float64", "sum of estimated bytes (NaN if any is unknown)"),
)

# Summary.kernels: one row per distinct (name, op_name, input_dims) launched in steady-state steps.
KERNEL_SUMMARY = _table(
    ("name", "object", "kernel name"),
    ("category", "object", "category"),
    ("library", "object", "library"),
    ("ops", "object", "'+'-joined decoded ops"),
    ("op_name", "object", "launching CPU op ('' unknown)"),
    ("shapes", "object", "launching op's input dims as text ('' unknown)"),
    ("dtypes", "object", "launching op's input types as text ('' unknown)"),
    ("count_per_step", "float64", "calls per step (median over steps)"),
    ("time_us_per_step", "float64", "total duration per step, µs (median over steps)"),
    ("dur_us_median", "float64", "median duration of one call, µs"),
    ("bytes_per_call", "float64", "ESTIMATED HBM bytes per call (NaN unknown)"),
    ("flops_per_call", "float64", "ESTIMATED FLOPs per call (NaN unknown)"),
    ("achieved_gbps", "float64", "bytes_per_call / dur_us_median (NaN unknown)"),
    ("achieved_tflops", "float64", "flops_per_call / dur_us_median (NaN unknown)"),
    ("pct_peak_bw", "float64", "% of the GPU's peak bandwidth (NaN unknown)"),
    ("pct_peak_flops", "float64", "% of the GPU's dense peak FLOP/s for the dtype (NaN unknown)"),
    ("cost_basis", "object", "what the estimate rests on"),
    (
        "flags",
        "object",
        "list of plain-words warnings about this kernel's figures, e.g. 'above HBM peak: … likely served by L2' "
        "(analyzer.cost.hbm_flags)",
    ),
    (
        "dram_bytes_per_call",
        "float64",
        "PREDICTED DRAM bytes per call in sequence (L2 reuse and write-back, analyzer.dram; NaN unknown)",
    ),
    ("dram_basis", "object", "what dram_bytes_per_call rests on (cache size, GPU, model)"),
)

# ---------------------------------------------------------------------------------------------------- raw tables
# What a READER hands ``analyzer.trace.build_trace``: the raw-table contract. ``analyzer.readers.decode`` produces
# it from Kineto JSON; a reader for another format (Nsight Systems export, a columnar dump …) produces the same
# ``RawTrace`` and plugs in without touching build_trace. Each table is a dict of equal-length columns (numpy
# arrays, or lists for object columns) with exactly these names; ``ts`` / ``dur`` are the file's own µs
# (build_trace subtracts ``trace_start_raw``, sorts by (ts, event_index) and renames to the GPU_OPS … columns).
# Unknown: NaN for floats, -1 for ids, "" for text, None for lists. An absent table is an empty dict.
_RAW_COMMON = (
    ("event_index", "int64", "position of the event in the file: equal ts keep file order"),
    ("name", "object", "event name (str)"),
    ("pid", "int64", "process id (-1 unknown)"),
    ("tid", "int64", "thread id, or stream for GPU rows (-1 unknown)"),
    ("ts", "float64", "start, µs, in the file's clock"),
    ("dur", "float64", "duration, µs"),
)
RAW_GPU_OPS = _table(
    *_RAW_COMMON,
    ("kind", "object", "'kernel', 'memcpy' or 'memset'"),
    ("correlation", "int64", "CUPTI correlation id (-1 unknown)"),
    ("external_id", "int64", "External id (-1 unknown)"),
    ("device", "int64", "GPU index (-1 unknown)"),
    ("stream", "int64", "stream (-1 unknown)"),
    ("grid", "object", "grid dims 'x,y,z' ('' unknown)"),
    ("block", "object", "block dims 'x,y,z' ('' unknown)"),
    ("registers", "float64", "registers per thread (NaN unknown)"),
    ("shared_memory", "float64", "shared memory per block, bytes (NaN unknown)"),
    ("bytes", "float64", "bytes a memcpy/memset moved (NaN unknown)"),
)
RAW_CPU_OPS = _table(
    *_RAW_COMMON,
    ("external_id", "int64", "External id (-1 unknown)"),
    ("sequence_number", "int64", "autograd sequence number (-1 unknown)"),
    ("input_dims", "object", "list of lists or None; equal values should share one object (cheap keys)"),
    ("input_types", "object", "list of str or None"),
    ("input_strides", "object", "list of lists or None"),
    ("concrete_inputs", "object", "list of str or None"),
)
RAW_LAUNCHES = _table(
    *_RAW_COMMON,
    ("correlation", "int64", "correlation id (-1 unknown)"),
    ("external_id", "int64", "External id (-1 unknown)"),
)
RAW_ANNOTATIONS = _table(
    *_RAW_COMMON,
    ("on_gpu", "bool", "True for a GPU-side annotation"),
    ("external_id", "int64", "External id (-1 unknown)"),
)
RAW_TABLES: dict[str, tuple[Column, ...]] = {
    "gpu": RAW_GPU_OPS,
    "cpu": RAW_CPU_OPS,
    "launches": RAW_LAUNCHES,
    "annotations": RAW_ANNOTATIONS,
}


@dataclass
class RawTrace:
    """A reader's output: the raw tables plus what build_trace needs to name, check and time the trace."""

    header: dict  # top-level keys of the file (deviceProperties, distributedInfo, baseTimeNanoseconds …)
    form: str  # how the file was laid out ('object' / 'array' for Kineto JSON; free text for other readers)
    n_events: int  # events read, of every kind
    trace_start_raw: float  # smallest ts of any non-metadata event, in the file's µs; NaN if none
    gpu: dict[str, Any]  # RAW_GPU_OPS columns, or {} when there is none
    cpu: dict[str, Any]  # RAW_CPU_OPS
    launches: dict[str, Any]  # RAW_LAUNCHES
    annotations: dict[str, Any]  # RAW_ANNOTATIONS
    categories: dict[str, int]  # event count per category (for "is this a PyTorch trace?" messages)
    process_labels: list[str]  # process names (a TF/JAX trace names its processes by device)
    legacy: bool  # PyTorch 1.x schema (integer epoch µs, Capitalised categories)
    warnings: list[str] = field(default_factory=list)  # what the reader repaired or dropped, one line each


def check_raw(raw: RawTrace) -> None:
    """Raise ValueError naming the table and columns when a reader broke the raw-table contract (a bug)."""
    for table, cols in RAW_TABLES.items():
        data = getattr(raw, table)
        if not data:
            continue
        names = [c.name for c in cols]
        if set(data) != set(names):
            missing, extra = sorted(set(names) - set(data)), sorted(set(data) - set(names))
            raise ValueError(f"raw table {table!r}: missing columns {missing}, unexpected {extra}")
        lengths = {len(v) for v in data.values()}
        if len(lengths) > 1:
            raise ValueError(f"raw table {table!r}: columns of different lengths {sorted(lengths)}")


def raw_empty(table: str) -> dict[str, pd.Series]:
    """Empty columns of a raw table, with the contract's dtypes."""
    import pandas as pd  # lazy: the contract itself needs no pandas (the cache key and `schema` command read it)

    return {c.name: pd.Series(dtype=c.dtype) for c in RAW_TABLES[table]}


TABLES: dict[str, tuple[Column, ...]] = {
    "gpu_ops": GPU_OPS,
    "cpu_ops": CPU_OPS,
    "launches": LAUNCHES,
    "annotations": ANNOTATIONS,
    "steps": STEPS,
    "step_categories": STEP_CATEGORIES,
    "step_table": STEP_TABLE,
    "kernel_summary": KERNEL_SUMMARY,
}

CATEGORIES = (
    "gemm",
    "attention",
    "pointwise",
    "reduction",
    "normalization",
    "communication",
    "memcpy",
    "memset",
    "other",
)


def names(table: str) -> list[str]:
    return [c.name for c in TABLES[table]]


def empty(table: str) -> pd.DataFrame:
    """An empty DataFrame with the table's columns and dtypes."""
    import pandas as pd  # lazy: see raw_empty

    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in TABLES[table]})


def conform(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """Return df with exactly the contract's columns, in order, cast to the contract's dtypes.

    Raises KeyError naming the missing columns: a table that breaks its contract is a bug, not a trace error.
    """
    cols = TABLES[table]
    missing = [c.name for c in cols if c.name not in df.columns]
    if missing:
        raise KeyError(f"{table}: missing columns {missing}")
    out = df[[c.name for c in cols]]
    return out.astype({c.name: c.dtype for c in cols})


def markdown() -> str:
    """The contract as Markdown (docs/COLUMNS.md)."""
    lines = ["# FuseLens table columns", "", "Generated from `analyzer/schema.py`. Do not edit by hand.", ""]
    for table, cols in TABLES.items():
        lines += [f"## `{table}`", "", "| column | dtype | meaning |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.dtype} | {c.doc} |" for c in cols]
        lines.append("")
    lines += [
        "## Raw tables (reader → `build_trace`)",
        "",
        "What a reader produces (`analyzer.schema.RawTrace`; Kineto JSON: `analyzer.readers.decode`). Times are the",
        "file's own µs; `build_trace` makes them relative, sorts and renames them into the tables above.",
        "",
    ]
    for table, cols in RAW_TABLES.items():
        lines += [f"### raw `{table}`", "", "| column | dtype | meaning |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.dtype} | {c.doc} |" for c in cols]
        lines.append("")
    return "\n".join(lines)
