"""Host (CPU) time per call of each FuseLens op and of the eager ops around it, with a cProfile breakdown.

    python scripts/host_overhead.py [--tokens 16] [--n 2000] [--top 25]

Why: the bench's launch-bound column (one forward issued at a time from Python) put FuseLens behind eager at
decode shapes and fuselens-gating's recorded HF trace shows the GPU idle between kernels: the host, not the GPU,
sets those times. This measures what each call costs on the host. The GPU work is made tiny (decode tokens) and
the stream is never synchronised inside the loop, so wall time per call is host time. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _per_call_us(fn, n: int) -> float:
    import torch

    for _ in range(50):
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
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--top", type=int, default=25)
    ns = ap.parse_args()
    import torch
    import torch.nn.functional as F

    from kernels.models import custom_ops as ops
    from kernels.ops.dual_gemm import dual_gemm_gated
    from kernels.ops.gating import fused_gating
    from kernels.ops.gemm_act import gemm_bias_act

    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 3
    dt, d, h, m = torch.bfloat16, 768, 3072, ns.tokens
    x = torch.randn(m, d, device="cuda", dtype=dt)
    wg, wu = (torch.randn(h, d, device="cuda", dtype=dt) * d**-0.5 for _ in range(2))
    b = torch.randn(h, device="cuda", dtype=dt)
    g, u = x @ wg.T, x @ wu.T
    x_tma = torch.randn(128, d, device="cuda", dtype=dt)  # M > 64: the TMA path, still tiny GPU work
    calls = {
        "eager F.linear": lambda: F.linear(x, wg),
        "eager F.gelu(tanh) * up": lambda: F.gelu(g, approximate="tanh") * u,
        "fused_gating (direct)": lambda: fused_gating(g, u, "gelu_tanh"),
        "fuselens::glu_gating (custom op)": lambda: ops.glu_gating(g, u, "gelu_tanh"),
        "dual_gemm_gated (direct, pointer kernel)": lambda: dual_gemm_gated(x, wg, wu, "gelu_tanh"),
        "fuselens::dual_gemm_glu (custom op)": lambda: ops.dual_gemm_glu(x, wg, wu, "gelu_tanh"),
        "gemm_bias_act (direct, pointer kernel)": lambda: gemm_bias_act(x, wg, b, "gelu"),
        "dual_gemm_gated (direct, TMA kernel, M 128)": lambda: dual_gemm_gated(x_tma, wg, wu, "gelu_tanh"),
        "gemm_bias_act (direct, TMA kernel, M 128)": lambda: gemm_bias_act(x_tma, wg, b, "gelu"),
    }
    print(f"host µs per call, {ns.n} calls each, M = {m} (128 for the TMA rows), {torch.cuda.get_device_name()}")
    with torch.no_grad():
        for name, fn in calls.items():
            print(f"  {name:46s} {_per_call_us(fn, ns.n):8.1f}")
        for name in ("fuselens::glu_gating (custom op)", "dual_gemm_gated (direct, TMA kernel, M 128)"):
            prof = cProfile.Profile()
            fn = calls[name]
            prof.enable()
            for _ in range(500):
                fn()
            prof.disable()
            torch.cuda.synchronize()
            print(f"\n== cProfile, 500 calls of {name} (cumulative s)")
            pstats.Stats(prof).sort_stats("cumulative").print_stats(ns.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
