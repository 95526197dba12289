"""The DRAM model's cost (analyzer.dram.predict_steady) on real and generated traces: seconds per step, GPU ops.

    python bench/make_dense_trace.py --kernels 300000 --ops-every 4 --out /tmp/dense_300k.json.gz
    python bench/bench_dram.py ../shared/real_traces/hta/trace_diff/control/control.json.gz /tmp/dense_300k.json.gz

Loads each trace (not timed), then times the model on its steady step (best of 3) and prints one line per trace:
GPU ops in the step, seconds, microseconds per op, predicted and logical step bytes. The summary runs the model once
per trace (docs/COST_MODEL.md, "DRAM model").
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzer import load_trace  # noqa: E402
from analyzer.dram import predict_steady  # noqa: E402
from analyzer.summary import steady_steps  # noqa: E402


def main(paths: list[str]) -> None:
    print("| trace | GPU | GPU ops in the step | seconds | µs / op | predicted DRAM / step | logical / step |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for p in paths:
        trace = load_trace(p)
        used, _ = steady_steps(trace.steps)
        g = trace.gpu_ops[trace.gpu_ops["step"].isin(used)]
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            d = predict_steady(trace, g, used)
            best = min(best, time.perf_counter() - t0)
        n = len(d.ops)
        tot = d.totals()
        logical = g[g["step"] == d.step]["bytes"].sum(min_count=1) if d.step is not None else float("nan")
        gpu = trace.gpu.name if trace.gpu else "unknown"
        print(
            f"| {Path(p).name} | {gpu} | {n:,} | {best:.3f} | {1e6 * best / max(n, 1):.2f} | "
            f"{tot['dram_bytes'] / 1e6:,.1f} MB | {logical / 1e6:,.1f} MB |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
