"""Two MLP models of one shape in one process, every variant of each, timed three ways: the second-model slowdown.

    python scripts/two_models.py [--order geglu,swiglu] [--variants eager,compile,...] [--json FILE] [--root DIR]

A GEGLU model and then a SwiGLU model of the HF shape in one process: the second model's fuselens forward took
336 µs (164 in a fresh process), fuselens-gating 327 (225), whichever model came second
(bench/results/two_models_h100_80gb_hbm3.json holds the current figures).
This rebuilds that run: every variant of the first model is built, warmed up and timed, then every variant of the
second. Each forward is timed as triton.testing.do_bench times it (median, L2 zeroed before each call: host-bound
when the host is slower than the GPU), as the bench does (kernels.ops.timing: GPU time, launches queued ahead),
and by host time per call (no synchronisation in the loop). tests/kernels/test_kernels_gpu.py holds the result to a bound;
this script prints the whole table, and with --root it runs another checkout's kernels/ (the code before the fix:
`git archive 83c02fe kernels | tar -x -C DIR`, whose package layout it also reads). Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _host_us(fn, n: int = 300) -> float:
    import torch

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--order", default="geglu,swiglu")
    ap.add_argument("--variants", default="eager,compile,liger,fuselens-gating,fuselens")
    ap.add_argument("--json", help="also write the table to this JSON file")
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose kernels/ package runs (default: this one)")
    ns = ap.parse_args()
    sys.path.insert(0, ns.root)
    import torch
    import triton.testing

    try:
        from kernels.models.variants import VariantUnavailable, build
        from kernels.models.workloads import build_model, make_input
        from kernels.ops.timing import median_us
    except ImportError:  # the flat layout of kernels/ before the ops / models / lab split
        from kernels.timing import median_us
        from kernels.variants import VariantUnavailable, build
        from kernels.workloads import build_model, make_input

    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 3
    x = make_input(64, 128, 768, torch.bfloat16, "cuda")
    rows = []
    for i, workload in enumerate(ns.order.split(",")):
        model = build_model(workload, 768, 3072, torch.bfloat16, "cuda")
        for name in ns.variants.split(","):
            try:
                fn = build(name, model)
            except VariantUnavailable as exc:
                print(f"{workload} {name}: skipped ({exc})", file=sys.stderr)
                continue
            with torch.no_grad():
                t0 = time.perf_counter()
                for _ in range(3):
                    fn(x)
                torch.cuda.synchronize()
                row = {"position": i + 1, "workload": workload, "variant": name}
                row["warmup_s"] = round(time.perf_counter() - t0, 1)
                row["do_bench_us"] = triton.testing.do_bench(lambda fn=fn: fn(x), return_mode="median") * 1e3
                row["gpu_us"] = median_us(lambda fn=fn: fn(x), n_iter=100)["median_us"]
                row["host_us"] = _host_us(lambda fn=fn: fn(x))
                stats = torch.cuda.memory_stats()
                before = stats.get("num_device_alloc", 0), stats.get("num_alloc_retries", 0)
                for _ in range(50):
                    fn(x)
                torch.cuda.synchronize()
                stats = torch.cuda.memory_stats()
                row["device_allocs_in_50_calls"] = stats.get("num_device_alloc", 0) - before[0]
                row["alloc_retries_in_50_calls"] = stats.get("num_alloc_retries", 0) - before[1]
            rows.append(row)
            print(
                f"{i + 1} {workload:7s} {name:22s} do_bench {row['do_bench_us']:8.1f}  gpu {row['gpu_us']:8.1f}"
                f"  host {row['host_us']:7.1f} µs  allocs {row['device_allocs_in_50_calls']}"
                f" retries {row['alloc_retries_in_50_calls']}  warm-up {row['warmup_s']} s",
                flush=True,
            )
    if ns.json:
        out = {"gpu": torch.cuda.get_device_name(), "root": ns.root, "rows": rows}
        Path(ns.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
