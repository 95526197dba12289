"""Small helpers shared by the Triton kernel wrappers (no kernels here)."""

from __future__ import annotations

import functools
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


class CudaContextLost(RuntimeError):
    """A sticky CUDA error (a kernel's illegal address, a device fault): the process's CUDA context is unusable and
    every later CUDA call fails; the message names the first error and what raised it."""


def reraise_if_fatal(exc: BaseException, what: str) -> None:
    """Call first in an `except` that skips a kernel candidate (a config that does not fit, a Gluon without an API).
    A sticky CUDA error is not such a case: after one, every CUDA call fails (cuBLAS says
    CUBLAS_STATUS_EXECUTION_FAILED), so skipping the candidate would only move the report to some later, innocent
    call. If the context is dead (synchronize raises), this raises CudaContextLost naming `what` and `exc`."""
    import torch

    if isinstance(exc, CudaContextLost):  # named where it first surfaced
        raise exc
    if INTERPRETING or not torch.cuda.is_available():
        return
    try:
        # both calls inside the try: after an illegal address even the capture query returns the sticky error (H200,
        # tests/kernels/test_kernels_cuda_errors.py: it escaped from here as torch's own error before)
        if torch.cuda.is_current_stream_capturing():
            return
        torch.cuda.synchronize()
    except Exception as dead:  # the context itself failed: nothing after this can run
        raise CudaContextLost(
            f"CUDA context lost at {what}: the first error seen: {type(exc).__name__}: {str(exc)[:300]}"
        ) from dead


@functools.lru_cache(maxsize=8)
def num_sms(device_index: int) -> int:
    import torch

    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.lru_cache(maxsize=8)
def sm_capability(device_index: int) -> tuple[int, int]:
    # cached: torch.cuda.get_device_capability costs ~3 us of host time per call (H100 host, scripts/host_overhead.py)
    import torch

    return torch.cuda.get_device_capability(device_index)


def autotune_bench(kernel_call, quantiles, n_iter: int = 40):
    """The autotuner's timing, made the same as the bench's (kernels.ops.timing): L2 flushed by a read, launches queued
    ahead. Triton's default (do_bench) zeroes its flush buffer, and the dirty lines it leaves are written back
    inside the next timed call; on the H100 that made every 151 MB gating kernel time ~57 us and could rank
    configs by how they absorb someone else's write-back. Returns [median, p10, p90] in ms, as Triton expects."""
    from kernels.ops.timing import median_us

    r = median_us(kernel_call, n_iter=n_iter, warmup=3, flush_l2=True, flush="read")
    return [r["median_us"] / 1e3, r["p10_us"] / 1e3, r["p90_us"] / 1e3][: len(quantiles) if quantiles else 1]


def timed_both_ways(calls: dict, n_iter: int = 20) -> dict:
    """{name: us} for {name: callable}: two passes of autotune_bench, the second in reverse order, each time the mean
    of its two medians. A GPU that slows down under load would otherwise favour whichever ran first (LLM-sized GEMMs
    held for ~100 ms run at the 700 W power limit, SM clock 1485-1665 MHz against 1958-1980 for 35 ms bf16 bursts on
    the H100: bench/results/sweep_floor_h100_80gb_hbm3.md)."""
    from kernels.ops.timing import pass_orders

    times = dict.fromkeys(calls, 0.0)
    for order in pass_orders(calls):
        for name in order:
            times[name] += autotune_bench(calls[name], None, n_iter=n_iter)[0] * 1e3 / 2
    return times


def autotune(configs, key, **kwargs):
    """triton.autotune with autotune_bench where this Triton accepts a do_bench (3.2+); its default otherwise."""
    import triton

    if "do_bench" in inspect.signature(triton.autotune).parameters:
        kwargs["do_bench"] = autotune_bench
    return triton.autotune(configs=configs, key=key, **kwargs)
