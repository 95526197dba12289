"""Trace: one parsed profiler trace as columnar tables (see analyzer/schema.py for every column)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
