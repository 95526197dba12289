"""GEMM with bias and activation fused into the epilogue: out = act(X @ W^T + b), W in nn.Linear layout [N, K].

This is the plain MLP's first layer. Unfused, cuBLAS writes X @ W^T + b (M x N) to HBM and a GELU kernel reads it
back and writes it again: 3 x M x N x elt bytes; at M = 8192, N = 3072 bf16 that is 151 MB, ~50 us at 3 TB/s.
Fused, the activation is applied to the fp32 accumulator in registers and only the output is written (50 MB).

Tile order is grouped (GROUP_M rows of tiles walk N together) so the W tiles a group needs stay in L2. On Hopper,
tl.dot on bf16/fp16 tiles with num_warps = 8 lowers to wgmma; num_stages 3-4 pipelines the K loop through shared
memory. Out-of-range rows/columns are clamped (offs % M) so the K loop needs no M/N masks, only the store does.
fp32 inputs use input_precision="ieee" so the result matches eager fp32 (no tf32), at fp32 speed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.ops import hopper_gemm
from kernels.ops.activations import TORCH_ACTS, act_f32, epilogue_act_id
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

EPILOGUE_ACTIVATIONS = ("gelu", "gelu_tanh", "silu", "identity")


@triton.jit
def fuselens_gemm_bias_act_ptr_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, GROUP_M)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    # clamp instead of mask: rows past M re-read row (i % M), and the store below drops them
    offs_xm = tl.max_contiguous(tl.multiple_of(offs_m % M, BM), BM)
    offs_wn = tl.max_contiguous(tl.multiple_of(offs_n % N, BN), BN)
    offs_k = tl.arange(0, BK)
    x_ptrs = x_ptr + offs_xm[:, None].to(tl.int64) * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_wn[:, None].to(tl.int64) * stride_wn + offs_k[None, :] * stride_wk
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(w_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, tl.trans(b), acc, input_precision=PRECISION)
        x_ptrs += BK * stride_xk
        w_ptrs += BK * stride_wk
    if HAS_BIAS:
        bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    out = act_f32(acc, ACT)
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# Large M: Hopper tiles (128 x 256 or 128 x 128, BK 64, 3-4 stages, 8 warps); decode tiles: gemm_common.
CONFIGS_LARGE_M = [
    ptr_config(128, 256, 64, 3, 8),
    ptr_config(128, 128, 64, 4, 8),
    ptr_config(128, 128, 64, 3, 4),
    ptr_config(64, 256, 64, 4, 8),
]


_gemm_act_tuned = Tuned(
    fuselens_gemm_bias_act_ptr_kernel, CONFIGS_LARGE_M + CONFIGS_SMALL_M, "gemm_bias_act_ptr", prune_by_m
)


def gemm_bias_act(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str = "gelu", impl: str = "auto"
):
    """act(x @ weight^T + bias) in one kernel; x [M, K], weight [N, K] (nn.Linear layout), bias [N] or None.

    impl: "auto" takes the persistent TMA kernel (kernels.ops.hopper_gemm) where it applies, else the pointer kernel
    here; "tma" / "pointer" force one (tests and the bench use them to cover and compare both)."""
    check_impl("gemm_bias_act", impl)
    if activation not in EPILOGUE_ACTIVATIONS:
        raise ValueError(f"gemm_bias_act: activation must be one of {EPILOGUE_ACTIVATIONS}, got {activation!r}")
    check_gemm_inputs("gemm_bias_act", x, weight)
    M, K = x.shape
    N = weight.shape[0]
    dt = x.dtype
    if bias is not None and (bias.shape != (N,) or bias.dtype != dt):
        raise ValueError(f"gemm_bias_act: bias must be [{N}] of {dt}, got {tuple(bias.shape)} {bias.dtype}")
    out = x.new_empty((M, N))
    if M == 0 or N == 0:
        return out
    if K == 0:  # x @ W^T is all zeros, so the result is act(bias) in every row (act(0) = 0 for all four)
        if bias is None:
            return out.zero_()
        return out.copy_(TORCH_ACTS[activation](bias.float()).to(dt).expand(M, N))
    act = epilogue_act_id(activation, dt)
    if hopper_gemm.takes("gemm_bias_act", impl, x, weight):
        return hopper_gemm.persistent_gemm(x, weight, bias, act, out=out)
    flags = {"HAS_BIAS": bias is not None, "ACT": act, **dot_flags(dt)}
    strides = (*x.stride(), *weight.stride(), N, 1)  # out: a fresh contiguous [M, N]
    launch_pointer_gemm(_gemm_act_tuned, (x, weight, bias if bias is not None else x, out), M, N, K, strides, flags)
    return out
