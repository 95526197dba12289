"""Small helpers shared by the Triton kernel wrappers (no kernels here)."""

from __future__ import annotations

import inspect
import os

# Read once: Triton itself fixes interpreter mode when it decorates the kernels at import, and the wrappers ask on
# every call (an os.environ lookup each time was ~0.3 us of host time per question).
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def interpreting() -> bool:
    """True when Triton runs kernels on the CPU (TRITON_INTERPRET=1, how CI tests them)."""
    return INTERPRETING


def check_device(*tensors) -> None:
    """Kernels run on CUDA tensors, or on CPU tensors only under the interpreter; say so in one line otherwise."""
    if INTERPRETING:
        return
    for t in tensors:
        if t is not None and not t.is_cuda:
            raise ValueError("FuseLens Triton kernels need CUDA tensors (or TRITON_INTERPRET=1 for CPU tensors)")


SUPPORTED_DTYPES_DOC = "float32, float16, bfloat16"


def autotune_bench(kernel_call, quantiles, n_iter: int = 40):
    """The autotuner's timing, made the same as the bench's (kernels.lab.timing): L2 flushed by a read, launches queued
    ahead. Triton's default (do_bench) zeroes its flush buffer, and the dirty lines it leaves are written back
    inside the next timed call; on the run-1 H100 that made every 151 MB gating kernel time ~57 us and could rank
    configs by how they absorb someone else's write-back. Returns [median, p10, p90] in ms, as Triton expects."""
    from kernels.lab.timing import median_us

    r = median_us(kernel_call, n_iter=n_iter, warmup=3, flush_l2=True, flush="read")
    return [r["median_us"] / 1e3, r["p10_us"] / 1e3, r["p90_us"] / 1e3][: len(quantiles) if quantiles else 1]


def autotune(configs, key, **kwargs):
    """triton.autotune with autotune_bench where this Triton accepts a do_bench (3.2+); its default otherwise."""
    import triton

    if "do_bench" in inspect.signature(triton.autotune).parameters:
        kwargs["do_bench"] = autotune_bench
    return triton.autotune(configs=configs, key=key, **kwargs)
