"""Dual GEMM for GEGLU / SwiGLU: h = act(X @ Wg^T) * (X @ Wu^T) in one kernel, writing only h.

Each program loads an X tile once per K step and multiplies it with the matching gate and up weight tiles, keeping
two fp32 accumulators (2 x 128 x 128 x 4 B = 128 KB of registers over 8 warps = 128 per thread). The epilogue
applies act(gate) * up in fp32 and stores h once. Versus cuBLAS x2 + a gating kernel this saves, per forward at
M = 8192, h = 3072 bf16: the gate and up outputs' write + read (4 x 50 MB = 201 MB, ~66 us at 3 TB/s if nothing
stayed in L2), one read of X (12.6 MB) and two kernel launches. down_proj stays cuBLAS (torch.matmul).

Tiles, grouped order, clamped offsets and fp32 "ieee" precision: as in kernels.ops.gemm_act.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.ops import hopper_gemm
from kernels.ops.activations import act_f32, epilogue_act_id
from kernels.ops.gating import ACTIVATIONS
from kernels.ops.gemm_common import (
    CONFIGS_SMALL_M,
    check_gemm_inputs,
    check_impl,
    dot_flags,
    grouped_tile,
    launch_pointer_gemm,
    prune_by_m,
    ptr_config,
)
from kernels.ops.launch import Tuned


@triton.jit
def fuselens_dual_gemm_glu_ptr_kernel(
    x_ptr, wg_ptr, wu_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
    ACT: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_xm = tl.max_contiguous(tl.multiple_of(offs_m % M, BM), BM)
    offs_wn = tl.max_contiguous(tl.multiple_of(offs_n % N, BN), BN)
    offs_k = tl.arange(0, BK)
    x_ptrs = x_ptr + offs_xm[:, None].to(tl.int64) * stride_xm + offs_k[None, :] * stride_xk
    w_off = offs_wn[:, None].to(tl.int64) * stride_wn + offs_k[None, :] * stride_wk
    wg_ptrs = wg_ptr + w_off
    wu_ptrs = wu_ptr + w_off
    acc_g = tl.zeros((BM, BN), dtype=tl.float32)
    acc_u = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_mask = offs_k[None, :] < K - k * BK
        a = tl.load(x_ptrs, mask=k_mask, other=0.0)
        bg = tl.load(wg_ptrs, mask=k_mask, other=0.0)
        bu = tl.load(wu_ptrs, mask=k_mask, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            bg = bg.to(tl.float32)
            bu = bu.to(tl.float32)
        acc_g = tl.dot(a, tl.trans(bg), acc_g, input_precision=PRECISION)
        acc_u = tl.dot(a, tl.trans(bu), acc_u, input_precision=PRECISION)
        x_ptrs += BK * stride_xk
        wg_ptrs += BK * stride_wk
        wu_ptrs += BK * stride_wk
    h = act_f32(acc_g, ACT) * acc_u
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, h.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# Two B tiles per step: 128 x 128 x 64 with 3 stages = (16 + 16 + 16) KB x 3 = 144 KB of shared memory (H100: 227 KB).
# Decode tiles (M <= 64) and the M-based pruning: kernels.ops.gemm_common.
CONFIGS_LARGE_M = [
    ptr_config(128, 128, 64, 3, 8),
    ptr_config(128, 128, 64, 4, 8),
    ptr_config(128, 64, 64, 4, 4),
    ptr_config(64, 128, 64, 4, 4),
]


_dual_gemm_tuned = Tuned(
    fuselens_dual_gemm_glu_ptr_kernel, CONFIGS_LARGE_M + CONFIGS_SMALL_M, "dual_gemm_ptr", prune_by_m
)


def dual_gemm_gated(
    x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str = "gelu_tanh", impl: str = "auto"
):
    """act(x @ w_gate^T) * (x @ w_up^T); x [M, K], w_gate / w_up [N, K] (nn.Linear layout, no bias).

    impl: "auto" = "tma" where it applies, else "pointer"; "tma": persistent TMA kernel on an interleaved
    [gate; up] weight (one 256-wide wgmma per K step, kernels.ops.hopper_gemm); "pointer": the kernel in this file."""
    check_impl("dual_gemm_gated", impl)
    if activation not in ACTIVATIONS:
        raise ValueError(f"dual_gemm_gated: activation must be one of {ACTIVATIONS}, got {activation!r}")
    check_gemm_inputs("dual_gemm_gated", x, w_gate, w_up)
    w_stride = w_gate.stride()
    if w_gate.shape != w_up.shape or w_stride != w_up.stride():
        raise ValueError(f"dual_gemm_gated: gate {tuple(w_gate.shape)} and up {tuple(w_up.shape)} must match")
    M, K = x.shape
    N = w_gate.shape[0]
    dt = x.dtype
    out = x.new_empty((M, N))
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.zero_()  # act(0) * 0 = 0 for gelu_tanh and silu
    act = epilogue_act_id(activation, dt)
    if hopper_gemm.takes("dual_gemm_gated", impl, x, w_gate, w_up):
        return hopper_gemm.persistent_gated(x, w_gate, w_up, act, out=out)
    flags = {"ACT": act, **dot_flags(dt)}
    strides = (*x.stride(), *w_stride, N, 1)  # out: a fresh contiguous [M, N]
    launch_pointer_gemm(_dual_gemm_tuned, (x, w_gate, w_up, out), M, N, K, strides, flags)
    return out
