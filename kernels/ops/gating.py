"""Fused gating kernel: h = act(gate) * up, act in {gelu_tanh, silu}, for fp32 / fp16 / bf16.

Memory-bound: per element it reads gate and up and writes h, 3 x elt bytes. For the HF case (8192 x 3072 bf16) that
is 151 MB, so at the H100's measured 3.03 TB/s copy bandwidth (read + write) the floor is ~49.8 us; Inductor's
kernel takes 61.0 us and Liger's 51.9 us there. The design is the plainest one that reaches the copy rate:
a flat 1-D pass over the contiguous tensors (no per-row programs, so no masked tail per row), 16-byte vector
loads (BLOCK is a multiple of 8 bf16 x threads), math in fp32 with one rounding at the store, and
evict_first on the streamed inputs so they don't push the output out of L2.

gelu_tanh(g) = 0.5 g (1 + tanh(z)) with z = sqrt(2/pi) (g + 0.044715 g^3); since 0.5 (1 + tanh(z)) = sigmoid(2 z),
it is g * sigmoid(2 z) = g / (1 + exp(-2 z)): one exp2 and one division instead of a libdevice tanh.
silu(g) = g / (1 + exp(-g)). The activations live in kernels.ops.activations.

Row-strided gate and up (the two halves of one GEMM's [M, 2h] output, as the dispatcher's cat_gating path computes
gate and up in ONE cuBLAS GEMM over the concatenated weight) go through fuselens_glu_gating_rows_kernel, which reads
them in place: one row's columns per program.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.ops.activations import act_f32, act_id
from kernels.ops.launch import Tuned
from kernels.ops.triton_util import check_device

ACTIVATIONS = ("gelu_tanh", "silu")


@triton.jit
def fuselens_glu_gating_kernel(
    gate_ptr, up_ptr, out_ptr, n_elements,
    ACT: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr, EVICT: tl.constexpr,
):  # fmt: skip
    # The block's start moves the three base pointers once, in 64-bit (65536 tokens x 32768 hidden = 2^31 elements
    # would overflow int32); per-element offsets stay 32-bit, so each element costs no 64-bit address arithmetic.
    # Blocks run LAST FIRST: in an MLP this kernel follows the up projection, whose last ~17 MB of output are still
    # in L2 when it ends (Nsight Compute on the H100: a 50.3 MB GEMM output shows 31-33 MB written to DRAM inside the
    # GEMM). Programs start roughly in program-id order, so reversed blocks read that tail before this kernel's own
    # streaming evicts it. A cold L2 (the isolated bench) sees the same traffic either way.
    start = (tl.num_programs(0) - 1 - tl.program_id(0)).to(tl.int64) * BLOCK
    offs = tl.arange(0, BLOCK)
    if EVEN:  # 8192 x 3072 is a multiple of every BLOCK below: no masks, plain 16-byte vector accesses
        g = tl.load(gate_ptr + start + offs, eviction_policy=EVICT).to(tl.float32)
        u = tl.load(up_ptr + start + offs, eviction_policy=EVICT).to(tl.float32)
        tl.store(out_ptr + start + offs, (act_f32(g, ACT) * u).to(out_ptr.dtype.element_ty))
    else:
        mask = offs < n_elements - start
        g = tl.load(gate_ptr + start + offs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
        u = tl.load(up_ptr + start + offs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
        tl.store(out_ptr + start + offs, (act_f32(g, ACT) * u).to(out_ptr.dtype.element_ty), mask=mask)


# A small set, keyed on size, dtype and activation: 16 B per thread per load needs BLOCK >= 8 * 32 * num_warps for
# bf16. EVICT: on the H100 this kernel timed 1-2% behind Inductor's in isolation (48.4 vs 47.6 us, bf16), and
# Inductor's loads carry no eviction hint, so both are offered ("" = no hint).
_CONFIGS = [
    triton.Config({"BLOCK": block, "EVICT": evict}, num_warps=warps)
    for block, warps in ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (8192, 16))
    for evict in ("evict_first", "")
]
_gating_kernel_tuned = Tuned(fuselens_glu_gating_kernel, _CONFIGS, "glu_gating")
_INTERP_CONFIG = triton.Config({"BLOCK": 1024, "EVICT": ""}, num_warps=4)


@triton.jit
def fuselens_glu_gating_rows_kernel(
    gate_ptr, up_ptr, out_ptr, n_cols, stride_in, stride_out,
    ACT: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr, EVICT: tl.constexpr,
):  # fmt: skip
    """act(gate) * up for row-strided gate and up (the two halves of one [M, 2h] GEMM output: gate = y[:, :h],
    up = y[:, h:]), one row's BLOCK columns per program; rows run last first, as in the flat kernel."""
    # rows on grid axis 0 (up to 2^31 - 1 of them; axis 1 stops at 65535)
    row = (tl.num_programs(0) - 1 - tl.program_id(0)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    g_ptrs = gate_ptr + row * stride_in + cols
    u_ptrs = up_ptr + row * stride_in + cols
    o_ptrs = out_ptr + row * stride_out + cols
    if EVEN:
        g = tl.load(g_ptrs, eviction_policy=EVICT).to(tl.float32)
        u = tl.load(u_ptrs, eviction_policy=EVICT).to(tl.float32)
        tl.store(o_ptrs, (act_f32(g, ACT) * u).to(out_ptr.dtype.element_ty))
    else:
        mask = cols < n_cols
        g = tl.load(g_ptrs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
        u = tl.load(u_ptrs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
        tl.store(o_ptrs, (act_f32(g, ACT) * u).to(out_ptr.dtype.element_ty), mask=mask)


_ROWS_CONFIGS = [
    triton.Config({"BLOCK": block, "EVICT": evict}, num_warps=warps)
    for block, warps in ((512, 4), (1024, 4), (2048, 8))
    for evict in ("evict_first", "")
]
_gating_rows_tuned = Tuned(fuselens_glu_gating_rows_kernel, _ROWS_CONFIGS, "glu_gating_rows")


def _rows_strided(gate: torch.Tensor, up: torch.Tensor) -> bool:
    """gate and up are 2-D with contiguous rows and one row stride (e.g. the halves of one GEMM's [M, 2h] output):
    the rows kernel reads them in place instead of copying each to a contiguous tensor first."""
    return (
        gate.dim() == 2
        and gate.stride(1) == 1
        and up.stride(1) == 1
        and gate.stride(0) == up.stride(0) >= gate.shape[1]
        and not gate.is_contiguous()
    )


def fused_gating(gate: torch.Tensor, up: torch.Tensor, activation: str = "gelu_tanh") -> torch.Tensor:
    """act(gate) * up in one pass; gate and up: same shape, dtype (fp32/fp16/bf16) and device."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"fused_gating: activation must be one of {ACTIVATIONS}, got {activation!r}")
    if gate.shape != up.shape:
        raise ValueError(f"fused_gating: gate {tuple(gate.shape)} and up {tuple(up.shape)} differ in shape")
    if gate.dtype != up.dtype or gate.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"fused_gating: need matching fp32/fp16/bf16 inputs, got {gate.dtype} and {up.dtype}")
    check_device(gate, up)
    act = act_id(activation)
    dev = gate.get_device()
    dt = gate.dtype
    if _rows_strided(gate, up):
        rows, cols = gate.shape
        out = gate.new_empty((rows, cols))
        if out.numel() == 0:
            return out
        stride = gate.stride(0)
        _gating_rows_tuned.launch(
            (dev, dt, act, rows, cols, stride, gate.data_ptr() & 15, up.data_ptr() & 15),
            lambda: (dev, dt, act, triton.next_power_of_2(rows * cols), triton.next_power_of_2(cols)),
            (gate, up, out, cols, stride, cols),
            lambda cfg: {"ACT": act, "EVEN": cols % cfg.kwargs["BLOCK"] == 0},
            lambda cfg: (rows, triton.cdiv(cols, cfg.kwargs["BLOCK"]), 1),
            dev,
            interp_config=_INTERP_CONFIG,
        )
        return out
    gate = gate.contiguous()
    up = up.contiguous()
    out = torch.empty_like(gate)
    n = gate.numel()
    if n == 0:
        return out
    _gating_kernel_tuned.launch(
        (dev, dt, act, n, gate.data_ptr() & 15, up.data_ptr() & 15),
        lambda: (dev, dt, act, triton.next_power_of_2(n)),  # tuned per power-of-two size bucket
        (gate, up, out, n),
        lambda cfg: {"ACT": act, "EVEN": n % cfg.kwargs["BLOCK"] == 0},
        lambda cfg: (triton.cdiv(n, cfg.kwargs["BLOCK"]), 1, 1),
        dev,
        interp_config=_INTERP_CONFIG,
    )
    return out
