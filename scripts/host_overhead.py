"""Host (CPU) time per call of each FuseLens op and of the eager ops around it, with a cProfile breakdown.

    python scripts/host_overhead.py [--tokens 16] [--n 2000] [--top 25] [--json FILE]

Why: a launch-bound forward (decode shapes, or a timing loop that issues one forward at a time, as
triton.testing.do_bench does) is timed at the host's speed, not the GPU's. This measures what each call costs on
the host. The GPU work is made tiny (decode tokens; M = 128 for the TMA rows) and the stream is never synchronised
inside the loop, so wall time per call is host time. Every FuseLens row is measured twice: with the launcher's
fast path (the compiled kernel called directly after the first call, kernels.ops.launch) and with
FUSELENS_FAST_LAUNCH off (every call through Triton's JITFunction.run), so one run shows what the fast path saves.
Target (issue 16): <= 15 us per op call; cuBLAS (eager F.linear) is the yardstick. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGET_US = 15.0


def _per_call_us(fn, n: int) -> float:
    import torch

    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):  # the fastest of three loops: host jitter only ever adds time
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        best = min(best, (t1 - t0) / n * 1e6)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ns = ap.parse_args()
    import torch
    import torch.nn.functional as F

    from kernels.models import custom_ops as ops
    from kernels.models.variants import build
    from kernels.models.workloads import build_model, make_input
    from kernels.ops import launch
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
    model = build_model("geglu", d, h, dt, "cuda")
    xm = make_input(1, m, d, dt, "cuda")
    fwd = {v: build(v, model) for v in ("eager", "fuselens", "fuselens-graph")}
    eager_calls = {
        "eager F.linear (cuBLAS)": lambda: F.linear(x, wg),
        "eager F.gelu(tanh) * up (2 kernels)": lambda: F.gelu(g, approximate="tanh") * u,
        f"eager GEGLU MLP forward, M {m}": lambda: fwd["eager"](xm),
    }
    ours = {
        "fused_gating (direct)": lambda: fused_gating(g, u, "gelu_tanh"),
        "fuselens::glu_gating (op)": lambda: ops.glu_gating(g, u, "gelu_tanh"),
        "dual_gemm_gated (direct, pointer kernel)": lambda: dual_gemm_gated(x, wg, wu, "gelu_tanh"),
        "fuselens::dual_gemm_glu (op, pointer kernel)": lambda: ops.dual_gemm_glu(x, wg, wu, "gelu_tanh"),
        "fuselens::gemm_bias_act (op, pointer kernel)": lambda: ops.gemm_bias_act(x, wg, b, "gelu"),
        "fuselens::dual_gemm_glu (op, TMA kernel, M 128)": lambda: ops.dual_gemm_glu(x_tma, wg, wu, "gelu_tanh"),
        "gemm_bias_act (direct, TMA kernel, M 128)": lambda: gemm_bias_act(x_tma, wg, b, "gelu"),
        f"fuselens GEGLU MLP forward, M {m}": lambda: fwd["fuselens"](xm),
        f"fuselens-graph GEGLU MLP forward, M {m}": lambda: fwd["fuselens-graph"](xm),
    }
    rows = []
    print(
        f"host µs per call, fastest of 3 x {ns.n} calls, M = {m} (128 for the TMA rows), {torch.cuda.get_device_name()}"
    )
    print(f"{'call':52s} {'fast path':>10s} {'JIT run':>10s}  (target <= {TARGET_US:.0f} µs per op call)")
    with torch.no_grad():
        for name, fn in eager_calls.items():
            us = _per_call_us(fn, ns.n)
            rows.append({"call": name, "us": us})
            print(f"  {name:50s} {us:10.1f}")
        for name, fn in ours.items():
            launch.FAST_LAUNCH = True
            fast = _per_call_us(fn, ns.n)
            launch.FAST_LAUNCH = False
            slow = _per_call_us(fn, ns.n)
            launch.FAST_LAUNCH = True
            op_call = "(op" in name or "(direct" in name
            verdict = ("MET" if fast <= TARGET_US else "MISSED") if op_call else ""
            rows.append({"call": name, "us": fast, "us_jit_run": slow, "verdict": verdict})
            print(f"  {name:50s} {fast:10.1f} {slow:10.1f}  {verdict}")
        for name in ("fuselens::dual_gemm_glu (op, pointer kernel)", "fuselens::dual_gemm_glu (op, TMA kernel, M 128)"):
            prof = cProfile.Profile()
            fn = ours[name]
            prof.enable()
            for _ in range(500):
                fn()
            prof.disable()
            torch.cuda.synchronize()
            print(f"\n== cProfile, 500 calls of {name} (cumulative s)")
            pstats.Stats(prof).sort_stats("cumulative").print_stats(ns.top)
    if ns.json:
        Path(ns.json).write_text(
            json.dumps(
                {"gpu": torch.cuda.get_device_name(), "tokens": m, "target_us": TARGET_US, "rows": rows}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
