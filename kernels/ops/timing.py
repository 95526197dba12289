"""Median GPU time of a callable with CUDA events, optionally flushing L2 before every iteration.

Why flush: the HF case's gate/up outputs are 50 MB each and the H100's L2 is 50 MB, so back-to-back repetitions
over the same buffers would partly measure L2, not HBM. Flushing writes a 256 MB buffer (5x L2) between
iterations, outside the timed region. flush="read" (default) READS the buffer: L2 ends up full of clean lines,
so the timed kernel starts cold and pays for nothing but its own traffic. flush="write" zeroes it, as
triton.testing.do_bench does: that leaves ~50 MB of dirty lines whose write-back lands inside the next timed
kernel (on the H100: every 151 MB gating kernel measured ~57 us that way; see docs/KERNELS.md).
"""

from __future__ import annotations

import statistics

_FLUSH_BYTES = 256 * 1024 * 1024
_flush_buf = None


def _flush_l2(mode: str) -> None:
    import torch

    global _flush_buf
    if _flush_buf is None:
        _flush_buf = torch.ones(_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    if mode == "read":
        _flush_buf.amax()
    else:
        _flush_buf.fill_(1.0)


# GPU time, not launch time: before every QUEUE_CHUNK iterations the stream gets a ~20 ms spin kernel
# (torch.cuda._sleep), so the host queues those iterations' launches while the GPU is busy and the GPU then runs
# them back to back. Without it, a variant whose host-side launch path is slower than its kernels (Python autograd
# Functions, Triton's autotuner dispatch: 30-100 us per call on an H200 host) is timed at its launch rate:
# timed that way, Liger's 52 us gating kernel measured 64 us and decode forwards 100-300 us.
QUEUE_CHUNK = 25
_SLEEP_CYCLES = 40_000_000  # ~20 ms at 1.98 GHz (H100 SXM max SM clock)


def pass_orders(items, passes: int = 2) -> list[list]:
    """The order of each timing pass over `items`: as given, then reversed, alternately (A B, B A). A card whose
    clock drifts over a row (LLM-sized forwards run at the power limit after ~100 ms: SM 1485-1665 MHz against
    1980 in short bursts, bench/results/sweep_floor_h100_80gb_hbm3.md) then charges every item in both positions,
    instead of always timing the last one hottest."""
    items = list(items)
    return [items if p % 2 == 0 else items[::-1] for p in range(passes)]


def median_us(
    fn,
    n_iter: int = 200,
    warmup: int = 10,
    flush_l2: bool = True,
    flush: str = "read",
    queue_ahead: bool = True,
    queue_chunk: int = QUEUE_CHUNK,
) -> dict:
    """{'median_us', 'p10_us', 'p90_us', 'n_iter', 'l2_flushed', 'queued_ahead', 'times_us'} over n_iter timed calls
    of fn() (times_us: every call's time, sorted, so interleaved turns can be pooled). queue_chunk: calls between the
    queue-ahead spins, i.e. how long the GPU runs fn back to back before a ~20 ms rest."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_iter)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_iter)]
    for i in range(n_iter):
        if queue_ahead and i % queue_chunk == 0:
            torch.cuda.synchronize()
            torch.cuda._sleep(_SLEEP_CYCLES)
        if flush_l2:
            _flush_l2(flush)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True))
    q = statistics.quantiles(times, n=10) if len(times) >= 10 else [times[0]] * 9
    return {
        "median_us": statistics.median(times),
        "p10_us": q[0],
        "p90_us": q[-1],
        "n_iter": n_iter,
        "l2_flushed": flush if flush_l2 else False,
        "queued_ahead": queue_ahead,
        "times_us": times,
    }


def graphed(fn, x):
    """fn(x) captured once in a CUDA graph (after three warm-up calls on a side stream); returns the replay callable.
    What a launch-bound forward costs without the host: the bench's "CUDA graph µs" columns."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        fn(x)
    return g.replay
