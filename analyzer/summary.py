"""Per-step summary of one trace (STUB signature — the classify/cost owner implements it).

summarize(trace) -> Summary
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analyzer.trace import Trace


@dataclass
class Summary:
    trace: Trace
    steps_used: list[int]  # steady-state steps the medians are taken over
    # medians over steps_used: {'kernels', 'launches', 'gpu_time_us', 'gpu_busy_us', 'idle_us', 'span_us',
    #  'launch_latency_us', 'by_category': {category: {'count', 'time_us', 'bytes'}}}
    per_step: dict
    kernels: pd.DataFrame  # KERNEL_SUMMARY contract

    @property
    def meta(self):
        return self.trace.meta

    def to_json(self) -> dict:  # what `python -m analyzer summary --json` prints
        raise NotImplementedError


def summarize(trace: Trace) -> Summary:
    raise NotImplementedError
