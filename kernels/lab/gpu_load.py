"""`python -m kernels.lab.gpu_load --seconds S`: keep the GPU busy from another process with big bf16 matmuls.

The device job's record-skew step runs it beside the runner, so the same variant is recorded once normally and once
while another process competes for the GPU (time slices, power, heat): a pair recorded under different conditions
for the diff's comparability check. Bounded: it stops after --seconds (at most 300) or when killed.
"""

from __future__ import annotations

import argparse
import sys
import time

MAX_SECONDS = 300


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels.lab.gpu_load", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help=f"how long to run (at most {MAX_SECONDS})")
    p.add_argument("--size", type=int, default=8192, help="matrix size n (n×n bf16 operands)")
    ns = p.parse_args(argv)
    if not 0 < ns.seconds <= MAX_SECONDS or not 256 <= ns.size <= 16384:
        print(f"error: --seconds must be in (0, {MAX_SECONDS}] and --size in [256, 16384]", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU", file=sys.stderr)
        return 3
    a = torch.randn(ns.size, ns.size, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(ns.size, ns.size, dtype=torch.bfloat16, device="cuda")
    end = time.monotonic() + ns.seconds
    n = 0
    t0 = time.monotonic()
    while time.monotonic() < end:
        for _ in range(20):  # ~20 × 1.4 ms at 8192³ on an H100: the GPU never idles between checks of the clock
            torch.mm(a, b)
        torch.cuda.synchronize()
        n += 20
    dt = time.monotonic() - t0
    print(f"gpu_load: {n} matmuls of {ns.size}³ bf16 in {dt:.1f} s = {2 * ns.size**3 * n / dt / 1e12:.0f} TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
