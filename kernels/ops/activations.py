"""The activations every FuseLens epilogue applies, in Triton (fp32 math) and in torch (references), by name and id.

ACT ids are what the kernels take as a constexpr: 0 gelu_tanh, 1 silu, 2 gelu (erf, exact), 3 identity, 5 / 6
gelu_tanh / silu through one tanh.approx (bf16 GEMM epilogues: epilogue_act_id says why). Id 4 is reserved for
the libdevice-erf GELU that only the sweep times (kernels.lab.sweep_kernels).
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels.ops.triton_util import interpreting

# 0.5 erfc(z) = t 2^(P(t) - z^2 log2(e)), t = 1 / (1 + z / 2): the form of Numerical Recipes' erfcc, with P a
# degree-7 fit (Chebyshev least squares on t in [0.25, 1], i.e. |x| <= 8.5, done in float64; coefficients
# ascending) of log2(erfc(z) / (2 t)) + z^2 log2(e). tests/kernels/test_kernels_gemm.py holds the kernel to float64.
GELU_ERFC_COEFFS = (
    -2.826441266, 1.450869946, 0.5109236643, 0.1146954295, 0.2077880883, -1.14719551, 0.9244825095, -0.2351235026,
)  # fmt: skip
# rcp.approx.ftz (one MUFU op) on a GPU; the interpreter cannot run inline PTX, so CPU runs divide.
_ASM_RCP = tl.constexpr(not interpreting())


@triton.jit
def rcp(d):
    """1 / d for fp32 d: one MUFU.RCP (max error 1 ulp) instead of div.full's range checks (~4 more instructions
    per element in the GEMM epilogues, Triton 3.6 SASS)."""
    if _ASM_RCP:
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [d], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = 1.0 / d
    return r


@triton.jit
def tanh_approx(x):
    """tanh(x) for fp32 x: one MUFU.TANH (tanh.approx.f32, sm_75+) on a GPU; the interpreter takes the exp form.
    Only the bf16 GEMM epilogues use it (epilogue_act_id, which says why and how accurate it is)."""
    if _ASM_RCP:
        r = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0
    return r


@triton.jit
def gelu_erf_f32(g):
    """Exact (erf) GELU, g * Phi(g), as max(g, 0) - |g| Phi(-|g|), Phi(-|g|) = 0.5 erfc(|g| / sqrt 2): 12 fp32
    operations and two MUFU ops (rcp, exp2).

    Why not libdevice erf: in the plain MLP's fc1 GEMM epilogue (H100, 8192 x 768 -> 3072) erff is ~64
    SASS instructions per element, takes 128 x 256 tiles to 255 registers with 72 B of stack spills, and the kernel
    to 105.8 us at 128 x 128 tiles (70.6 with no activation) and 128 us at 128 x 256 (62); this form: 81.5 us. The
    epilogue runs on one program's 8 warps per SM, so its instruction count and dependency chain, not HBM, set its
    time. This form is also more accurate than eager's 0.5 x (1 + erf(x / sqrt 2)) in fp32 for x < -2,
    where that cancels (max relative error vs float64, numpy model of this code: 4.7e-6 on [-6, -4], 2.2e-6 on
    [-4, -2], 9.5e-7 on [-2, 2], 7.2e-8 above 2; below -8.5, outside the fit, values under 1e-16 are off by up to
    50%; eager's formula: 4.7e-4 on [-4, -2], 100% below -5)."""
    a = tl.abs(g) * 0.7071067811865476
    t = rcp(1.0 + 0.5 * a)
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
def act_f32(g, ACT: tl.constexpr):
    """act(g) for fp32 g; ACT 0 = gelu_tanh, 1 = silu, 2 = gelu (erf, exact), 3 = identity, 5 / 6 =
    gelu_tanh / silu through tanh.approx (4, libdevice erf, is the sweep's: kernels.lab.sweep_kernels)."""
    if ACT == 0:
        # g * sigmoid(2 z); -2 z * log2(e) folded into one constant: 2 * 0.79788456 * 1.44269504 = 2.30220819
        z2 = 2.302208198 * (g + 0.044715 * g * g * g)
        out = g * rcp(1.0 + tl.exp2(-z2))
    elif ACT == 1:
        out = g * rcp(1.0 + tl.exp2(-1.4426950408889634 * g))
    elif ACT == 2:
        out = gelu_erf_f32(g)
    elif ACT == 5:  # gelu_tanh with one MUFU op: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
        hg = 0.5 * g
        out = hg + hg * tanh_approx(g * (0.7978845608028654 + 0.035677408136300125 * g * g))
    elif ACT == 6:  # silu with one MUFU op: g sigmoid(g) = 0.5 g (1 + tanh(g / 2))
        hg = 0.5 * g
        out = hg + hg * tanh_approx(hg)
    else:
        out = g
    return out


_ACT_IDS = {
    "gelu_tanh": 0, "silu": 1, "gelu": 2, "identity": 3, "gelu_tanh_approx": 5, "silu_approx": 6,
}  # fmt: skip


# The same activations in torch, by name: references for the sweep, the tests and the K = 0 path of gemm_bias_act.
TORCH_ACTS = {
    "gelu": F.gelu, "gelu_tanh": partial(F.gelu, approximate="tanh"), "silu": F.silu, "identity": lambda t: t,
}  # fmt: skip


def act_id(activation: str) -> int:
    if activation not in _ACT_IDS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {sorted(_ACT_IDS)}")
    return _ACT_IDS[activation]


# Why the GEMM epilogues take tanh.approx for bf16 outputs: there the activation runs on the same warps as the
# tensor-core main loop, after it, and the exp2 + rcp form costs two MUFU ops per element, at the SM's 16 per clock
# (H100: 12.7 us of the HF gated kernel's 119). tanh.approx is ONE MUFU op: the H100 timed the kernel at
# 108.9 us with it vs 115.8 with exp2 + rcp (same layout, same run). Its error, measured on the H100 (the sweep's
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


# ---- the backward: (act(g), act'(g)) for the training epilogues (GRAD ids: mlp_backward.GRAD_IDS) ----


@triton.jit
def act_and_grad_f32(g, GRAD: tl.constexpr):
    """(act(g), act'(g)) in fp32 for GRAD 0 = gelu_tanh, 1 = silu, 2 = gelu (erf). exp2 + rcp forms throughout (the
    backward's outputs are gradients; no tanh.approx here)."""
    if GRAD == 0:
        # 0.5 g (1 + t), t = tanh(k (g + c g^3)); t = 1 - 2 / (1 + e^(2 z)); d/dg = 0.5 (1 + t) + 0.5 g (1 - t^2) k (1 + 3 c g^2)
        z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        t = 1.0 - 2.0 * rcp(1.0 + tl.exp2(2.8853900817779268 * z))
        a = 0.5 * g * (1.0 + t)
        da = 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * g * g)
    elif GRAD == 1:
        s = rcp(1.0 + tl.exp2(-1.4426950408889634 * g))
        a = g * s
        da = s * (1.0 + g * (1.0 - s))
    else:
        # gelu = g Phi(g); d/dg = Phi(g) + g phi(g), Phi(g) = (gelu(g) + ... ) computed from the same erfc form
        a = gelu_erf_f32(g)
        phi = 0.3989422804014327 * tl.exp2(-0.7213475204444817 * g * g)
        # gelu_erf_f32 = g Phi(g) exactly in this form, so Phi(g) = a / g except at g = 0 (Phi = 1/2)
        cdf = tl.where(g == 0.0, 0.5, a / tl.where(g == 0.0, 1.0, g))
        da = cdf + g * phi
    return a, da


def act_and_grad_torch(g: torch.Tensor, activation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(act(g), act'(g)) in g's dtype (callers pass fp32 or fp64): the fallback epilogue's math, the same formulas as
    act_and_grad_f32."""
    if activation == "gelu_tanh":
        k = 0.7978845608028654
        t = torch.tanh(k * (g + 0.044715 * g**3))
        return 0.5 * g * (1 + t), 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * k * (1 + 0.134145 * g * g)
    if activation == "silu":
        s = torch.sigmoid(g)
        return g * s, s * (1 + g * (1 - s))
    if activation == "gelu":
        cdf = 0.5 * (1 + torch.erf(g * 0.7071067811865476))
        return g * cdf, cdf + g * 0.3989422804014327 * torch.exp(-0.5 * g * g)
    raise ValueError(f"no backward for activation {activation!r}; expected gelu_tanh, silu or gelu")
