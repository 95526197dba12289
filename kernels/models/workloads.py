"""The MLP workloads FuseLens profiles. Plain PyTorch modules; every variant (eager, compile, liger, fuselens) runs
the SAME module instance and weights, so their traces differ only in how the forward is executed.

- plain:  fc2(gelu(fc1(x))), both Linear layers with bias, exact (erf) GELU: nn.GELU()'s default.
- geglu:  the Hugging Face post's MLP ("Profiling in PyTorch (Part 2): From nn.Linear to a Fused MLP"):
          down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)), three Linear layers without bias.
- swiglu: the same with silu (Llama-style).
"""

from __future__ import annotations

import torch
from torch import nn

WORKLOADS = ("geglu", "swiglu", "plain")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class PlainMLP(nn.Module):
    """Linear -> GELU -> Linear, with bias (BERT / ViT style)."""

    activation = "gelu"

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, hidden, bias=True)
        self.act_fn = nn.GELU()
        self.fc2 = nn.Linear(hidden, d_model, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act_fn(self.fc1(x)))


class GatedMLP(nn.Module):
    """down_proj(act(gate_proj(x)) * up_proj(x)) with no bias; `activation` is 'gelu_tanh' (GEGLU) or 'silu'."""

    def __init__(self, d_model: int, hidden: int, activation: str):
        super().__init__()
        if activation not in ("gelu_tanh", "silu"):
            raise ValueError(f"GatedMLP: activation must be 'gelu_tanh' or 'silu', got {activation!r}")
        self.activation = activation
        self.gate_proj = nn.Linear(d_model, hidden, bias=False)
        self.up_proj = nn.Linear(d_model, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d_model, bias=False)
        self.act_fn = nn.GELU(approximate="tanh") if activation == "gelu_tanh" else nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class GEGLUMLP(GatedMLP):
    """The HF post's GEGLU MLP: down_proj(gelu_tanh(gate_proj(x)) * up_proj(x))."""

    def __init__(self, d_model: int = 768, hidden: int = 3072):
        super().__init__(d_model, hidden, "gelu_tanh")


class SwiGLUMLP(GatedMLP):
    def __init__(self, d_model: int, hidden: int):
        super().__init__(d_model, hidden, "silu")


def build_model(workload: str, d_model: int, hidden: int, dtype: torch.dtype, device, seed: int = 0) -> nn.Module:
    """The workload's module in eval mode, weights drawn from a fixed seed (nn.Linear's default init)."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; expected one of {WORKLOADS}")
    torch.manual_seed(seed)
    cls = {"plain": PlainMLP, "geglu": GEGLUMLP, "swiglu": SwiGLUMLP}[workload]
    return cls(d_model, hidden).to(device=device, dtype=dtype).eval()


def make_input(batch: int, seq: int, d_model: int, dtype: torch.dtype, device, seed: int = 1) -> torch.Tensor:
    """Random normal activations [batch, seq, d_model] (never zeros: they hide unwritten outputs)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(batch, seq, d_model, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


def mlp_flops(workload: str, tokens: int, d_model: int, hidden: int) -> int:
    """Matmul FLOPs of one forward (2 per multiply-add); the elementwise work is <0.1% and left out."""
    n_gemms = 2 if workload == "plain" else 3
    return n_gemms * 2 * tokens * d_model * hidden


def train_step_flops(workload: str, tokens: int, d_model: int, hidden: int, input_grad: bool = True) -> int:
    """Matmul FLOPs of one forward + backward: each forward GEMM costs two more in the backward (its input's and its
    weight's gradient), 3x the forward, less the input-side GEMMs' dX (gate + up, or up) when x needs no gradient."""
    fwd = mlp_flops(workload, tokens, d_model, hidden)
    dx = fwd - 2 * tokens * d_model * hidden  # every GEMM but the down projection reads x
    return 3 * fwd - (0 if input_grad else dx)
