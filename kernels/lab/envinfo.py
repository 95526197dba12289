"""Moved to kernels.runner.envinfo (the manifest's environment). kernels/lab/train_bench.py still imports it from
here; this re-export goes once that file's import line names kernels.runner.envinfo."""

from kernels.runner.envinfo import environment, gpu_slug

__all__ = ["environment", "gpu_slug"]
