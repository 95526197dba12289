"""Moved to kernels.ops.timing (the autotuner below the runner times with it). kernels/lab/train_bench.py still
imports it from here; this re-export goes once that file's import line names kernels.ops.timing."""

from kernels.ops.timing import median_us, pass_orders

__all__ = ["median_us", "pass_orders"]
