"""What the FuseLens GEMM kernels share: the grouped tile order (a Triton function), the pointer kernels' decode tiles
and their M-based pruning, dot precision flags, and input validation. No kernels here."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.ops.triton_util import INTERPRETING, check_device


@triton.jit
def grouped_tile(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile (pid_m, pid_n) of program/tile `pid` in grouped order: GROUP_M rows of tiles walk N together, so the
    weight tiles a group needs stay in L2."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


def ptr_config(bm, bn, bk, stages, warps, group_m=8):
    """A pointer-kernel config (no TMA block shapes to set)."""
    return triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": group_m}, num_stages=stages, num_warps=warps)


# Small M (decode, M <= 64): the GEMM is a read of W (K x N x elt bytes), so narrow BN for more programs in flight and
# a long BK per load. GROUP_M 1 marks them (prune_by_m).
CONFIGS_SMALL_M = [
    ptr_config(16, 64, 128, 4, 4, 1),
    ptr_config(16, 32, 256, 4, 4, 1),
    ptr_config(32, 64, 128, 4, 4, 1),
    ptr_config(64, 64, 128, 4, 4, 1),
]


def prune_by_m(configs, M: int):
    """The decode tiles for M <= 64, the large tiles above 256, both in between: at 77 rows a 128-row tile leaves
    one row of programs (24 for N = 3000 on 132 SMs), where 64-row decode tiles give twice as many."""
    if 64 < M <= 256:
        return configs
    small = M <= 64
    keep = [c for c in configs if (c.kwargs["BM"] <= 64 and c.kwargs["GROUP_M"] == 1) == small]
    return keep or configs


# Interpreter (CPU, CI): one small tile so odd shapes exercise every mask; tl.dot needs dims >= 16.
INTERP_META = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 2}
INTERP_CONFIG = triton.Config(INTERP_META)


def m_bucket(M: int) -> int:
    """Tuning is shared by all M in one power-of-two bucket (a forward's token count moves; retuning per exact M
    would time every config again at each new batch size)."""
    return triton.next_power_of_2(M)


def launch_pointer_gemm(tuned, ptrs: tuple, M: int, N: int, K: int, strides: tuple, flags: dict) -> None:
    """Launch a pointer GEMM kernel (signature: pointers, M, N, K, strides, constexpr flags, then the config's
    BM/BN/BK/GROUP_M) through its Tuned: tuned per device, dtype, flags, M's bucket, N and K; launched from the
    cached launcher of these exact sizes, strides and pointer alignments."""
    x = ptrs[0]
    dev = x.get_device()
    dt = x.dtype
    spec = (dev, dt, *flags.values(), M, N, K, *strides, *[p.data_ptr() & 15 for p in ptrs])
    tuned.launch(
        spec,
        lambda: (dev, dt, *flags.values(), m_bucket(M), N, K),
        (*ptrs, M, N, K, *strides),
        lambda cfg: flags,
        lambda cfg: (triton.cdiv(M, cfg.kwargs["BM"]) * triton.cdiv(N, cfg.kwargs["BN"]), 1, 1),
        dev,
        prune_arg=M,
        interp_config=INTERP_CONFIG,
    )


def dot_flags(dtype: torch.dtype) -> dict:
    """PRECISION: "ieee" for fp32 so results match eager fp32 (no tf32). UPCAST: under the interpreter only, bf16
    operands go to fp32 first (exact), because Triton 3.9's interpreter multiplies bf16 dot operands wrongly
    (measured: relative error 4e9 on a plain 16 x 16 bf16 tl.dot, fp16 and fp32 fine)."""
    return _DOT_FLAGS[dtype]


_DOT_FLAGS = {
    dt: {
        "PRECISION": "ieee" if dt == torch.float32 or (INTERPRETING and dt == torch.bfloat16) else "tf32",
        "UPCAST": INTERPRETING and dt == torch.bfloat16,
    }
    for dt in (torch.float32, torch.float16, torch.bfloat16)
}
GEMM_DTYPES = frozenset(_DOT_FLAGS)


def check_gemm_inputs(name: str, x: torch.Tensor, *weights: torch.Tensor) -> None:
    """One-line ValueError unless x is [M, K], each weight [N, K] of x's dtype (fp32/fp16/bf16), all on a CUDA device
    (or anywhere under the interpreter). Written for the per-call host budget: each attribute read once."""
    xs, dt = x.shape, x.dtype
    if len(xs) != 2:
        raise ValueError(f"{name}: x must be 2-D [M, K], got shape {tuple(xs)}")
    for w in weights:
        ws = w.shape
        if len(ws) != 2 or ws[1] != xs[1]:
            raise ValueError(f"{name}: weight {tuple(ws)} does not match x {tuple(xs)} (need [N, K])")
        if w.dtype != dt:
            raise ValueError(f"{name}: weight dtype {w.dtype} != x dtype {dt}")
    if dt not in GEMM_DTYPES:
        raise ValueError(f"{name}: dtype must be fp32/fp16/bf16, got {dt}")
    check_device(x, *weights)


IMPLS = ("auto", "tma", "pointer")


def check_impl(name: str, impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"{name}: impl must be one of {IMPLS}, got {impl!r}")
