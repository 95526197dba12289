"""The FuseLens kernels as PyTorch custom ops, so a profiler trace can size them.

A Triton launch made straight from Python has no CPU op around it with `Input Dims`, so the analyzer could not
attribute bytes or FLOPs to our kernels. Each op below is a dispatcher op: with `record_shapes=True` the trace holds
a cpu_op named `fuselens::<op>` with the tensor arguments' dims and dtypes, and the kernel it launches links to it.
The fuselens / fuselens-gating forwards (kernels.fused_mlp) call these.

  fuselens::glu_gating(Tensor gate, Tensor up, str activation) -> Tensor
      act(gate) * up; gate, up [..., h]; launches fuselens_glu_gating_kernel
  fuselens::dual_gemm_glu(Tensor x, Tensor w_gate, Tensor w_up, str activation) -> Tensor
      act(x @ w_gate^T) * (x @ w_up^T); x [M, d], w_* [h, d] -> [M, h]; launches fuselens_dual_gemm_glu_kernel
      (M > 64, sm_90+) or fuselens_dual_gemm_glu_ptr_kernel
  fuselens::gemm_bias_act(Tensor x, Tensor weight, Tensor? bias, str activation) -> Tensor
      act(x @ weight^T + bias); x [M, d], weight [h, d], bias [h] -> [M, h]; launches fuselens_gemm_bias_act_kernel
      (M > 64, sm_90+) or fuselens_gemm_bias_act_ptr_kernel
activation: "gelu_tanh" | "silu" (glu ops), "gelu" (exact, erf) | "gelu_tanh" | "silu" | "identity" (gemm_bias_act).
Inference only: no autograd formula is registered (the runner refuses fuselens with --train).
"""

from __future__ import annotations

import torch

from kernels.dual_gemm import dual_gemm_gated
from kernels.gating import fused_gating
from kernels.gemm_act import gemm_bias_act as _gemm_bias_act


@torch.library.custom_op("fuselens::glu_gating", mutates_args=())
def glu_gating(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    return fused_gating(gate, up, activation)


@glu_gating.register_fake
def _(gate, up, activation):
    return torch.empty_like(gate)


@torch.library.custom_op("fuselens::dual_gemm_glu", mutates_args=())
def dual_gemm_glu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str) -> torch.Tensor:
    return dual_gemm_gated(x, w_gate, w_up, activation)


@dual_gemm_glu.register_fake
def _(x, w_gate, w_up, activation):
    return x.new_empty((x.shape[0], w_gate.shape[0]))


@torch.library.custom_op("fuselens::gemm_bias_act", mutates_args=())
def gemm_bias_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str) -> torch.Tensor:
    return _gemm_bias_act(x, weight, bias, activation)


@gemm_bias_act.register_fake
def _(x, weight, bias, activation):
    return x.new_empty((x.shape[0], weight.shape[0]))
