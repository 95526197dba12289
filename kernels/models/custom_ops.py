"""The FuseLens kernels as PyTorch custom ops, so a profiler trace can size them.

A Triton launch made straight from Python has no CPU op around it with `Input Dims`, so the analyzer could not
attribute bytes or FLOPs to our kernels. Each op below is a dispatcher op: with `record_shapes=True` the trace holds
a cpu_op named `fuselens::<op>` with the tensor arguments' dims and dtypes, and the kernel it launches links to it.
The fuselens / fuselens-gating forwards (kernels.models.fused_mlp) call these.

  fuselens::glu_gating(Tensor gate, Tensor up, str activation) -> Tensor
      act(gate) * up; gate, up [..., h]; launches fuselens_glu_gating_kernel
  fuselens::dual_gemm_glu(Tensor x, Tensor w_gate, Tensor w_up, str activation) -> Tensor
      act(x @ w_gate^T) * (x @ w_up^T); x [M, d], w_* [h, d] -> [M, h]; launches fuselens_dual_gemm_glu_kernel
      (M > 64, sm_90+) or fuselens_dual_gemm_glu_ptr_kernel
  fuselens::gemm_bias_act(Tensor x, Tensor weight, Tensor? bias, str activation) -> Tensor
      act(x @ weight^T + bias); x [M, d], weight [h, d], bias [h] -> [M, h]; launches fuselens_gemm_bias_act_kernel
      (M > 64, sm_90+) or fuselens_gemm_bias_act_ptr_kernel
activation: "gelu_tanh" | "silu" (glu ops), "gelu" (exact, erf) | "gelu_tanh" | "silu" | "identity" (gemm_bias_act).
Inference only: a call whose inputs need a gradient (grad mode on) raises RuntimeError; the runner refuses fuselens
with --train.
"""

from __future__ import annotations

import torch

from kernels.ops.dual_gemm import dual_gemm_gated
from kernels.ops.gating import fused_gating
from kernels.ops.gemm_act import gemm_bias_act as _gemm_bias_act

# Registered with torch.library.Library (define + a CUDA and a CPU kernel), not @torch.library.custom_op: the latter
# wraps every call in an autograd function and a torch._dynamo.disable frame, ~20 us of host time per call on the
# run-9 H100 host (scripts/host_overhead.py: glu_gating 61.0 us through custom_op vs 41.1 us calling the wrapper
# directly; on this 2-core dev box 10.7 vs 2.7 us for an empty op). The CPU kernel serves TRITON_INTERPRET=1 runs.
_LIB = torch.library.Library("fuselens", "DEF")
_LIB.define("glu_gating(Tensor gate, Tensor up, str activation) -> Tensor")
_LIB.define("dual_gemm_glu(Tensor x, Tensor w_gate, Tensor w_up, str activation) -> Tensor")
_LIB.define("gemm_bias_act(Tensor x, Tensor weight, Tensor? bias, str activation) -> Tensor")
for _key in ("CUDA", "CPU"):
    _LIB.impl("glu_gating", fused_gating, _key)
    _LIB.impl("dual_gemm_glu", dual_gemm_gated, _key)
    _LIB.impl("gemm_bias_act", _gemm_bias_act, _key)


def _inference_only(name: str):
    """The ops' Autograd kernel: refuse inputs that need a gradient (without it, PyTorch's fallback would let a
    backward run through with a warning and wrong gradients), else redispatch below autograd. redispatch, not a
    second call: a call would enter the dispatcher again and record the op twice in a profiler trace."""
    # OpOverload.redispatch is one Python frame around this handle's redispatch_boxed; called directly, with the
    # below-autograd keyset read once, the kernel costs one frame less per call (every call passes through here)
    redispatch = getattr(torch.ops.fuselens, name).default._handle.redispatch_boxed
    below_autograd = torch._C._after_autograd_keyset
    is_grad_enabled = torch.is_grad_enabled

    def autograd_kernel(keyset, *args):
        if is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            raise RuntimeError(f"fuselens::{name} is inference-only (no backward); call it under torch.no_grad()")
        return redispatch(keyset & below_autograd, *args)

    return autograd_kernel


for _name in ("glu_gating", "dual_gemm_glu", "gemm_bias_act"):
    _LIB.impl(_name, _inference_only(_name), "Autograd", with_keyset=True)


@torch.library.register_fake("fuselens::glu_gating", lib=_LIB)
def _(gate, up, activation):
    return torch.empty_like(gate)


@torch.library.register_fake("fuselens::dual_gemm_glu", lib=_LIB)
def _(x, w_gate, w_up, activation):
    return x.new_empty((x.shape[0], w_gate.shape[0]))


@torch.library.register_fake("fuselens::gemm_bias_act", lib=_LIB)
def _(x, weight, bias, activation):
    return x.new_empty((x.shape[0], weight.shape[0]))


# The ops' builtin callables (OpOverload.__call__ is a Python frame around them): the dispatcher entry, so a profiler
# still records one fuselens::<op> per call with its Input Dims.
_GLU_GATING = torch.ops.fuselens.glu_gating.default._op
_DUAL_GEMM_GLU = torch.ops.fuselens.dual_gemm_glu.default._op
_GEMM_BIAS_ACT = torch.ops.fuselens.gemm_bias_act.default._op


def glu_gating(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    return _GLU_GATING(gate, up, activation)


def dual_gemm_glu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str) -> torch.Tensor:
    return _DUAL_GEMM_GLU(x, w_gate, w_up, activation)


def gemm_bias_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str) -> torch.Tensor:
    return _GEMM_BIAS_ACT(x, weight, bias, activation)
