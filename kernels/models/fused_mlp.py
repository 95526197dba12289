"""FuseLens forwards for the workloads' modules, built from the kernels in this package (inference only).

fuselens:         geglu/swiglu -> dual_gemm_gated (gate + up + act*up, one kernel) then cuBLAS down_proj;
                  plain        -> gemm_bias_act (fc1 + bias + GELU, one kernel) then cuBLAS fc2 (+ bias).
fuselens-gating:  cuBLAS gate_proj and up_proj, our fused_gating kernel, cuBLAS down_proj (the like-for-like
                  comparison with Inductor's and Liger's gating kernels).
Each FuseLens kernel is called through its custom op (kernels.ops), so traces record its shapes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.models import custom_ops as ops
from kernels.models.workloads import GatedMLP, PlainMLP


def fuselens_forward(model, x: torch.Tensor) -> torch.Tensor:
    x2d = x.reshape(-1, x.shape[-1])
    if isinstance(model, GatedMLP):
        h = ops.dual_gemm_glu(x2d, model.gate_proj.weight, model.up_proj.weight, model.activation)
        y = torch.matmul(h, model.down_proj.weight.t())
    elif isinstance(model, PlainMLP):
        h = ops.gemm_bias_act(x2d, model.fc1.weight, model.fc1.bias, "gelu")
        y = F.linear(h, model.fc2.weight, model.fc2.bias)
    else:
        raise TypeError(f"fuselens_forward: unsupported module {type(model).__name__}")
    return y.view(*x.shape[:-1], y.shape[-1])


def fuselens_gating_forward(model, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(model, GatedMLP):
        raise TypeError("fuselens-gating applies to gated MLPs (geglu, swiglu) only")
    h = ops.glu_gating(model.gate_proj(x), model.up_proj(x), model.activation)
    return model.down_proj(h)
