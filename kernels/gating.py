"""Fused gating kernel: h = act(gate) * up, act in {gelu_tanh, silu}, for fp32 / fp16 / bf16.

Memory-bound: per element it reads gate and up and writes h, 3 x elt bytes. For the HF case (8192 x 3072 bf16) that
is 151 MB, so at the H100's measured 3.03 TB/s copy bandwidth (read + write) the floor is ~49.8 us; Inductor's
kernel takes 61.0 us and Liger's 51.9 us there. The design is the plainest one that reaches the copy rate:
a flat 1-D pass over the contiguous tensors (no per-row programs, so no masked tail per row), 16-byte vector
loads (BLOCK is a multiple of 8 bf16 x threads), math in fp32 with one rounding at the store, and
evict_first on the streamed inputs so they don't push the output out of L2.

gelu_tanh(g) = 0.5 g (1 + tanh(z)) with z = sqrt(2/pi) (g + 0.044715 g^3); since 0.5 (1 + tanh(z)) = sigmoid(2 z),
it is g * sigmoid(2 z) = g / (1 + exp(-2 z)): one exp2 and one division instead of a libdevice tanh.
silu(g) = g / (1 + exp(-g)).
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels._triton_util import autotune, check_device, interpreting

ACTIVATIONS = ("gelu_tanh", "silu")
_LOG2E = 1.4426950408889634
_SQRT_2_OVER_PI = 0.7978845608028654


# 0.5 erfc(z) = t 2^(P(t) - z^2 log2(e)), t = 1 / (1 + z / 2): the form of Numerical Recipes' erfcc, with P a
# degree-7 fit (Chebyshev least squares on t in [0.25, 1], i.e. |x| <= 8.5, done in float64; coefficients
# ascending) of log2(erfc(z) / (2 t)) + z^2 log2(e). tests/test_kernels_gemm.py holds the kernel to float64.
GELU_ERFC_COEFFS = (
    -2.826441266, 1.450869946, 0.5109236643, 0.1146954295, 0.2077880883, -1.14719551, 0.9244825095, -0.2351235026,
)  # fmt: skip
# rcp.approx.ftz (one MUFU op) on a GPU; the interpreter cannot run inline PTX, so CPU runs divide.
_ASM_RCP = tl.constexpr(not interpreting())


@triton.jit
def _rcp(d):
    """1 / d for fp32 d: one MUFU.RCP (max error 1 ulp) instead of div.full's range checks (~4 more instructions
    per element in the GEMM epilogues, Triton 3.6 SASS)."""
    if _ASM_RCP:
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [d], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = 1.0 / d
    return r


@triton.jit
def _tanh(x):
    """tanh(x) for fp32 x: one MUFU.TANH (tanh.approx.f32, sm_75+) on a GPU; the interpreter takes the exp form.
    Only the bf16 GEMM epilogues use it (epilogue_act_id, which says why and how accurate it is)."""
    if _ASM_RCP:
        r = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0
    return r


@triton.jit
def _gelu_erf_f32(g):
    """Exact (erf) GELU, g * Phi(g), as max(g, 0) - |g| Phi(-|g|), Phi(-|g|) = 0.5 erfc(|g| / sqrt 2): 12 fp32
    operations and two MUFU ops (rcp, exp2).

    Why not libdevice erf: in the plain MLP's fc1 GEMM epilogue (run 9b, H100, 8192 x 768 -> 3072) erff is ~64
    SASS instructions per element, takes 128 x 256 tiles to 255 registers with 72 B of stack spills, and the kernel
    to 105.8 us at 128 x 128 tiles (70.6 with no activation) and 128 us at 128 x 256 (62); this form: 81.5 us. The
    epilogue runs on one program's 8 warps per SM, so its instruction count and dependency chain, not HBM, set its
    time. This form is also more accurate than eager's 0.5 x (1 + erf(x / sqrt 2)) in fp32 for x < -2,
    where that cancels (max relative error vs float64, numpy model of this code: 4.7e-6 on [-6, -4], 2.2e-6 on
    [-4, -2], 9.5e-7 on [-2, 2], 7.2e-8 above 2; below -8.5, outside the fit, values under 1e-16 are off by up to
    50%; eager's formula: 4.7e-4 on [-4, -2], 100% below -5)."""
    a = tl.abs(g) * 0.7071067811865476
    t = _rcp(1.0 + 0.5 * a)
    p = -0.2351235026 * t + 0.9244825095
    p = p * t + -1.14719551
    p = p * t + 0.2077880883
    p = p * t + 0.1146954295
    p = p * t + 0.5109236643
    p = p * t + 1.450869946
    p = p * t + -2.826441266
    h = t * tl.exp2(p - a * a * 1.4426950408889634)  # Phi(-|g|)
    return tl.maximum(g, 0.0) - tl.abs(g) * h


@triton.jit
def _act_f32(g, ACT: tl.constexpr):
    """act(g) for fp32 g; ACT 0 = gelu_tanh, 1 = silu, 2 = gelu (erf, exact), 3 = identity, 4 = gelu via
    libdevice erf (the pre-run-9 epilogue, for kernels.sweep), 5 / 6 = gelu_tanh / silu through tanh.approx."""
    if ACT == 0:
        # g * sigmoid(2 z); -2 z * log2(e) folded into one constant: 2 * 0.79788456 * 1.44269504 = 2.30220819
        z2 = 2.302208198 * (g + 0.044715 * g * g * g)
        out = g * _rcp(1.0 + tl.exp2(-z2))
    elif ACT == 1:
        out = g * _rcp(1.0 + tl.exp2(-1.4426950408889634 * g))
    elif ACT == 2:
        out = _gelu_erf_f32(g)
    elif ACT == 5:  # gelu_tanh with one MUFU op: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
        hg = 0.5 * g
        out = hg + hg * _tanh(g * (0.7978845608028654 + 0.035677408136300125 * g * g))
    elif ACT == 6:  # silu with one MUFU op: g sigmoid(g) = 0.5 g (1 + tanh(g / 2))
        hg = 0.5 * g
        out = hg + hg * _tanh(hg)
    elif ACT == 4:  # libdevice erf: kept for kernels.sweep's before/after rows only
        out = 0.5 * g * (1.0 + tl.math.erf(g * 0.7071067811865476))
    else:
        out = g
    return out


@triton.heuristics({"EVEN": lambda args: args["n_elements"] % args["BLOCK"] == 0})
@triton.jit
def fuselens_glu_gating_kernel(
    gate_ptr, up_ptr, out_ptr, n_elements,
    ACT: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr, EVICT: tl.constexpr,
):  # fmt: skip
    # The block's start moves the three base pointers once, in 64-bit (65536 tokens x 32768 hidden = 2^31 elements
    # would overflow int32); per-element offsets stay 32-bit, so each element costs no 64-bit address arithmetic.
    # Blocks run LAST FIRST: in an MLP this kernel follows the up projection, whose last ~17 MB of output are still
    # in L2 when it ends (Nsight Compute, run 8: a 50.3 MB GEMM output shows 31-33 MB written to DRAM inside the
    # GEMM). Programs start roughly in program-id order, so reversed blocks read that tail before this kernel's own
    # streaming evicts it. A cold L2 (the isolated bench) sees the same traffic either way.
    start = (tl.num_programs(0) - 1 - tl.program_id(0)).to(tl.int64) * BLOCK
    offs = tl.arange(0, BLOCK)
    if EVEN:  # 8192 x 3072 is a multiple of every BLOCK below: no masks, plain 16-byte vector accesses
        g = tl.load(gate_ptr + start + offs, eviction_policy=EVICT).to(tl.float32)
        u = tl.load(up_ptr + start + offs, eviction_policy=EVICT).to(tl.float32)
        tl.store(out_ptr + start + offs, (_act_f32(g, ACT) * u).to(out_ptr.dtype.element_ty))
    else:
        mask = offs < n_elements - start
        g = tl.load(gate_ptr + start + offs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
        u = tl.load(up_ptr + start + offs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
        tl.store(out_ptr + start + offs, (_act_f32(g, ACT) * u).to(out_ptr.dtype.element_ty), mask=mask)


# A small set, keyed on size, dtype and activation: 16 B per thread per load needs BLOCK >= 8 * 32 * num_warps for
# bf16. EVICT: run 4 (H100) timed this kernel 1-2% behind Inductor's in isolation (48.4 vs 47.6 us, bf16), and
# Inductor's loads carry no eviction hint, so both are offered ("" = no hint).
_CONFIGS = [
    triton.Config({"BLOCK": block, "EVICT": evict}, num_warps=warps)
    for block, warps in ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (8192, 16))
    for evict in ("evict_first", "")
]
_gating_kernel_tuned = autotune(configs=_CONFIGS, key=["n_elements", "ACT"])(fuselens_glu_gating_kernel)

_ACT_IDS = {
    "gelu_tanh": 0, "silu": 1, "gelu": 2, "identity": 3, "gelu_libdevice": 4, "gelu_tanh_approx": 5, "silu_approx": 6,
}  # fmt: skip


# The same activations in torch, by name: references for kernels.sweep and the K = 0 path of gemm_bias_act.
TORCH_ACTS = {
    "gelu": F.gelu, "gelu_tanh": partial(F.gelu, approximate="tanh"), "silu": F.silu, "identity": lambda t: t,
}  # fmt: skip


def act_id(activation: str) -> int:
    if activation not in _ACT_IDS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {sorted(_ACT_IDS)}")
    return _ACT_IDS[activation]


# Why the GEMM epilogues take tanh.approx for bf16 outputs: there the activation runs on the same warps as the
# tensor-core main loop, after it, and the exp2 + rcp form costs two MUFU ops per element, at the SM's 16 per clock
# (run 9b, H100: 12.7 us of the HF gated kernel's 119). tanh.approx is ONE MUFU op: run 10 timed the kernel at
# 108.9 us with it vs 115.8 with exp2 + rcp (same layout, same run). Its error, measured on the H100 (kernels.sweep's
# accuracy table, 2^22 inputs in [-12, 12] vs float64): tanh 7.8e-6 absolute at most; the bf16 outputs of
# gelu_tanh / silu are at most 1 / 2 bf16 steps from float64 rounded to bf16 -- less than eager's own error, which
# rounds the gate to bf16 before the activation. CUTLASS's GELU_taylor epilogue computes GELU the same way. fp16
# keeps exp2 + rcp: there silu's negative tail (1 + tanh cancels) measured up to 11 fp16 steps off. fp32 outputs and
# the memory-bound gating kernel (where MUFU is idle) keep it too.
_APPROX = {"gelu_tanh": "gelu_tanh_approx", "silu": "silu_approx"}


def epilogue_act_id(activation: str, dtype: torch.dtype) -> int:
    """The ACT id a GEMM epilogue uses for `activation` writing `dtype`."""
    if dtype == torch.bfloat16 and activation in _APPROX:
        return act_id(_APPROX[activation])
    return act_id(activation)


def fused_gating(gate: torch.Tensor, up: torch.Tensor, activation: str = "gelu_tanh") -> torch.Tensor:
    """act(gate) * up in one pass; gate and up: same shape, dtype (fp32/fp16/bf16) and device."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"fused_gating: activation must be one of {ACTIVATIONS}, got {activation!r}")
    if gate.shape != up.shape:
        raise ValueError(f"fused_gating: gate {tuple(gate.shape)} and up {tuple(up.shape)} differ in shape")
    if gate.dtype != up.dtype or gate.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"fused_gating: need matching fp32/fp16/bf16 inputs, got {gate.dtype} and {up.dtype}")
    check_device(gate, up)
    gate = gate.contiguous()
    up = up.contiguous()
    out = torch.empty_like(gate)
    n = gate.numel()
    if n == 0:
        return out
    if interpreting():
        fuselens_glu_gating_kernel[(triton.cdiv(n, 1024),)](
            gate, up, out, n, ACT=act_id(activation), BLOCK=1024, EVICT=""
        )
    else:
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
        _gating_kernel_tuned[grid](gate, up, out, n, ACT=act_id(activation))
    return out
