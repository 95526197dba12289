"""Bytes and FLOPs per GPU op (STUB — to be replaced by the classify/cost owner).

estimate_costs(gpu_ops, gpu) -> DataFrame with gpu_ops' index and columns
bytes, flops, cost_basis, achieved_gbps, achieved_tflops, pct_peak_bw, pct_peak_flops.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyzer.gpus import GpuSpec


def estimate_costs(gpu_ops: pd.DataFrame, gpu: GpuSpec | None) -> pd.DataFrame:
    nan = np.full(len(gpu_ops), np.nan)
    return pd.DataFrame(
        {
            "bytes": nan,
            "flops": nan,
            "cost_basis": "unknown",
            "achieved_gbps": nan,
            "achieved_tflops": nan,
            "pct_peak_bw": nan,
            "pct_peak_flops": nan,
        },
        index=gpu_ops.index,
    )
