"""Kernels the sweep times only for before/after rows; nothing ships them (kernels.ops never imports this).

  fuselens_dual_gemm_glu_2dot_kernel  the first persistent TMA kernel: two 128-wide dots per K step on the separate gate
                                      and up weights (DUAL), or one GEMM + bias + act; bench variant `fuselens-tma2`
  libdevice_gemm_bias_act             the shipped single GEMM + bias + act kernel compiled with the first epilogue GELU,
                                      libdevice erf (ACT 4), instead of the erfc fit (kernels.ops.activations)

Both kernels call the shipped activations; the libdevice one is the shipped kernel's own source, compiled with
`act_f32` bound to act_f32_with_libdevice (same code, one epilogue swapped), so a sweep row differs from the shipped
row only in the activation.
"""

from __future__ import annotations

import types

import torch
import triton
import triton.language as tl

from kernels.ops import hopper_gemm
from kernels.ops.activations import act_f32
from kernels.ops.gemm_common import grouped_tile
from kernels.ops.hopper_gemm import TL_DTYPES, TensorDescriptor
from kernels.ops.launch import Tuned
from kernels.ops.triton_util import autotune, interpreting, num_sms

LIBDEVICE_GELU = 4  # the ACT id activations reserves for this


@triton.jit
def act_f32_with_libdevice(g, ACT: tl.constexpr):
    """act_f32, plus ACT 4: GELU through libdevice erf (the first epilogue; ~64 SASS instructions per element)."""
    if ACT == 4:  # noqa: SIM108 (a constexpr branch: only one side is compiled)
        out = 0.5 * g * (1.0 + tl.math.erf(g * 0.7071067811865476))
    else:
        out = act_f32(g, ACT)
    return out


@triton.jit
def fuselens_dual_gemm_glu_2dot_kernel(
    x_desc, w0_desc, w1_desc, out_desc, bias_ptr,
    M, N, K,
    DUAL: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, OUT_DTYPE: tl.constexpr, UPCAST: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
):  # fmt: skip
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, M, N, BM, BN, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc0 = tl.zeros((BM, BN), dtype=tl.float32)
        acc1 = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BK
            a = x_desc.load([off_m, off_k])
            b0 = w0_desc.load([off_n, off_k])
            if UPCAST:  # interpreter only: see kernels.ops.gemm_common.dot_flags
                a = a.to(tl.float32)
                b0 = b0.to(tl.float32)
            acc0 = tl.dot(a, b0.T, acc0)
            if DUAL:
                b1 = w1_desc.load([off_n, off_k])
                if UPCAST:
                    b1 = b1.to(tl.float32)
                acc1 = tl.dot(a, b1.T, acc1)
        if HAS_BIAS:
            offs_n = off_n + tl.arange(0, BN)
            bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
            acc0 = acc0 + bias[None, :]
        out = act_f32(acc0, ACT)
        if DUAL:
            out = out * acc1
        out_desc.store([off_m, off_n], out.to(OUT_DTYPE))


def _with_globals(jit_fn, **overrides):
    """The same @triton.jit source compiled with some of its global names bound to other Triton functions."""
    raw = jit_fn.fn
    fn = types.FunctionType(raw.__code__, {**raw.__globals__, **overrides}, raw.__name__, raw.__defaults__)
    fn.__qualname__, fn.__module__ = raw.__qualname__, raw.__module__
    return triton.jit(fn)


libdevice_gemm_bias_act_kernel = _with_globals(
    hopper_gemm.fuselens_gemm_bias_act_kernel, act_f32=act_f32_with_libdevice
)


def _set_block_shapes(nargs):
    bm, bn, bk = nargs["BM"], nargs["BN"], nargs["BK"]
    nargs["x_desc"].block_shape = [bm, bk]
    nargs["w0_desc"].block_shape = [bn, bk]
    nargs["w1_desc"].block_shape = [bn, bk]
    nargs["out_desc"].block_shape = [bm, bn]


def _cfg(bm, bn, bk, stages, warps, group_m=8):
    return triton.Config(
        {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": group_m},
        num_stages=stages,
        num_warps=warps,
        pre_hook=_set_block_shapes,
    )


# Shared memory per stage, bf16: dual 128x128x64 = (16 + 16 + 16) KB; single 128x256x64 = (16 + 32) KB. With the
# 32-64 KB epilogue tile, 3-4 stages fit the H100's 227 KB; the autotuner drops configs that do not compile.
DUAL_CONFIGS = [
    _cfg(128, 128, 64, 3, 8),
    _cfg(128, 128, 64, 4, 8),
    _cfg(128, 64, 64, 4, 4),
    _cfg(128, 128, 128, 2, 8),
    _cfg(64, 128, 64, 4, 4),
]

dual_tuned = autotune(configs=DUAL_CONFIGS, key=["M", "N", "K", "ACT"])(fuselens_dual_gemm_glu_2dot_kernel)
libdevice_single_tuned = Tuned(libdevice_gemm_bias_act_kernel, hopper_gemm.SINGLE_CONFIGS, "gemm_bias_act_libdevice")
_INTERP_META = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 2}


def gemm_2dot(x, w0, w1=None, bias=None, act_id: int = 3) -> torch.Tensor:
    """act(x @ w0^T + bias) [* (x @ w1^T) when w1 is given] through the 2-dot kernel; x, w0, w1: TMA-able fp16/bf16
    (hopper_gemm.usable), M > 64."""
    M, K = x.shape
    N = w0.shape[0]
    out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    dual = w1 is not None
    meta = _INTERP_META if interpreting() else {"BM": 128, "BN": 128, "BK": 64}  # placeholders: pre_hook resets
    x_desc = TensorDescriptor.from_tensor(x, [meta["BM"], meta["BK"]])
    w0_desc = TensorDescriptor.from_tensor(w0, [meta["BN"], meta["BK"]])
    w1_desc = TensorDescriptor.from_tensor(w1 if dual else w0, [meta["BN"], meta["BK"]])
    out_desc = TensorDescriptor.from_tensor(out, [meta["BM"], meta["BN"]])
    flags = {"DUAL": dual, "HAS_BIAS": bias is not None, "ACT": act_id, "OUT_DTYPE": TL_DTYPES[x.dtype]}
    flags["UPCAST"] = interpreting() and x.dtype == torch.bfloat16
    args = (x_desc, w0_desc, w1_desc, out_desc, bias if bias is not None else x, M, N, K)
    if interpreting():
        grid = (min(4, triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"])),)
        fuselens_dual_gemm_glu_2dot_kernel[grid](*args, **flags, **_INTERP_META, NUM_SMS=grid[0])
        return out
    n_sms = num_sms(x.device.index or 0)
    grid = lambda m: (min(n_sms, triton.cdiv(M, m["BM"]) * triton.cdiv(N, m["BN"])),)  # noqa: E731
    dual_tuned[grid](*args, **flags, NUM_SMS=n_sms)
    return out


def dual_gemm_2dot(x, w_gate, w_up, act_id: int) -> torch.Tensor:
    """act(x @ w_gate^T) * (x @ w_up^T) through the first persistent TMA kernel (the bench's `fuselens-tma2`)."""
    return gemm_2dot(x, w_gate, w_up, None, act_id)


def libdevice_gemm_bias_act(x, w, bias) -> torch.Tensor:
    """GELU(x @ w^T + bias) through the shipped single-GEMM kernel with the first, libdevice-erf epilogue."""
    out = torch.empty((x.shape[0], w.shape[0]), device=x.device, dtype=x.dtype)
    return hopper_gemm.launch_single(x, w, bias, LIBDEVICE_GELU, out, tuned=libdevice_single_tuned)
