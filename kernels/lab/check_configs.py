"""Correctness of EVERY autotune config of the FuseLens GEMM kernels on this GPU, one config at a time.

    python -m kernels.lab.check_configs

The autotuner picks whichever config is fastest on the day, so a config that is wrong but never picked in one run
could be picked in the next; the interpreter tests run one small tile only. This forces each config in turn (the
autotuner is given that config alone, so its pre_hook still sets the TMA block shapes), at the HF shape and odd
shapes, against a float64 reference. Prints one line per (kernel, config, shape, dtype, activation); exit 1 if any
fails. Needs a CUDA GPU.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from kernels.lab import sweep_kernels
from kernels.ops import dual_gemm, gemm_act, hopper_gemm
from kernels.ops.activations import epilogue_act_id
from kernels.ops.dual_gemm import dual_gemm_gated
from kernels.ops.gemm_act import gemm_bias_act

# (M, K, N, dtype, activations): the HF shape with both activations, an odd large shape, a decode shape, fp16, and
# TinyLlama's gate/up shape, whose 704 tiles of 128 x 128 leave a partial last wave on 132 SMs: there the dual GEMM's
# TAIL configs run their split-K tail (hopper_gemm.tail_plan: 44 tiles x 3 K ranges).
CASES = [
    (8192, 768, 3072, torch.bfloat16, ("gelu_tanh", "silu")),
    (4099, 768, 3000, torch.bfloat16, ("gelu_tanh",)),
    (8192, 768, 3072, torch.float16, ("silu",)),
    (16, 768, 3072, torch.bfloat16, ("gelu_tanh", "silu")),
    (1, 768, 3072, torch.bfloat16, ("silu",)),
    (2048, 2048, 5632, torch.bfloat16, ("silu",)),
]
TOL = {torch.bfloat16: 1.5e-2, torch.float16: 2e-3}


def _rel(out, ref):
    out = out.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return float((out - ref).norm() / ref.norm())


def _cases():
    for M, K, N, dt, acts in CASES:
        g = torch.Generator(device="cuda").manual_seed(M * 7 + N)
        x = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
        wg = torch.randn(N, K, device="cuda", dtype=dt, generator=g) * K**-0.5 * 2
        wu = torch.randn(N, K, device="cuda", dtype=dt, generator=g) * K**-0.5 * 2
        b = torch.randn(N, device="cuda", dtype=dt, generator=g)
        yield (M, K, N), dt, acts, x, wg, wu, b


def _applies(cfg, M: int) -> bool:
    """The pointer kernels' prune rule: decode tiles (GROUP_M 1) for M <= 64, the others above."""
    return (cfg.kwargs["GROUP_M"] == 1) == (M <= 64)


def main() -> int:
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 3
    n_bad = 0
    kernels = [
        ("tma_gated", hopper_gemm._gated_tuned, "gated", "tma"),
        ("tma_dual", sweep_kernels.dual_tuned, "gated", "tma2"),
        ("tma_single", hopper_gemm._single_tuned, "single", "tma"),
        ("pointer_dual", dual_gemm._dual_gemm_tuned, "gated", "pointer"),
        ("pointer_single", gemm_act._gemm_act_tuned, "single", "pointer"),
    ]
    for shape, dt, acts, x, wg, wu, b in _cases():
        xd, wgd, wud, bd = x.double(), wg.double(), wu.double(), b.double()
        refs = {
            "gelu_tanh": F.gelu(xd @ wgd.T, approximate="tanh") * (xd @ wud.T),
            "silu": F.silu(xd @ wgd.T) * (xd @ wud.T),
            "gelu": F.gelu(xd @ wgd.T + bd),
        }
        for kname, tuner, kind, impl in kernels:
            configs = list(tuner.configs)
            if impl != "pointer" and shape[0] <= 64:
                continue  # TMA paths serve M > 64 only
            try:
                for cfg in configs:
                    if impl == "pointer" and not _applies(cfg, shape[0]):
                        continue
                    tuner.configs = [cfg]
                    tuner.cache.clear()
                    for act in acts if kind == "gated" else ("gelu",):
                        try:
                            if impl == "tma2":
                                out = sweep_kernels.dual_gemm_2dot(x, wg, wu, epilogue_act_id(act, x.dtype))
                            elif kind == "gated":
                                out = dual_gemm_gated(x, wg, wu, act, impl=impl)
                            else:
                                out = gemm_bias_act(x, wg, b, act, impl=impl)
                            torch.cuda.synchronize()
                            err = _rel(out, refs[act])
                            status = "ok" if err < TOL[dt] else "FAIL"
                        except ValueError as exc:  # TMA path not applicable at this shape
                            if "TMA path" in str(exc):
                                continue
                            err, status = float("nan"), f"ERROR {exc}"
                        except Exception as exc:  # out of resources etc.: the autotuner would skip it
                            err, status = float("nan"), f"skip ({type(exc).__name__}: {str(exc)[:80]})"
                        n_bad += status == "FAIL" or status.startswith("ERROR")
                        print(
                            f"{status:4s} {kname:14s} {str(cfg.kwargs):70s} w{cfg.num_warps} s{cfg.num_stages} "
                            f"{str(shape):18s} {str(dt)[6:]:8s} {act:9s} rel {err:.2e}",
                            flush=True,
                        )
            finally:
                tuner.configs = configs
                tuner.cache.clear()
    print(f"{n_bad} failing config cases")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
