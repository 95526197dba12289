"""Whole decoder layers from Hugging Face `transformers`: the code a HF user runs, random weights, no downloads.

  gemma-layer  GemmaDecoderLayer: RMSNorm -> q/k/v proj -> RoPE -> causal attention -> o_proj -> residual add ->
               RMSNorm -> GEGLU MLP (gelu_tanh) -> residual add. Default size Gemma-2B-like: hidden 2048,
               intermediate 16384, 8 query heads, 1 KV head (multi-query), head_dim 256.
  llama-layer  LlamaDecoderLayer: the same with a SwiGLU MLP and GQA; default hidden 2048, intermediate 8192,
               16 query heads, 4 KV heads, head_dim 128.

`LayerWorkload(x) -> y` runs the layer on hidden states x [batch, seq, hidden] with what a HF model computes once
per forward and hands to every layer: RoPE (cos, sin) from the model's own rotary embedding, and the causal mask as
`create_causal_mask` builds it per attention implementation. Both are built here, outside the profiled step, so a
trace holds the layer's kernels only.

The attention implementation is a config field that every layer reads on each call, so each variant gets its own
copy of the module (`variant_copy`): the same weights (one seeded init, deep-copied), its own config.
  eager  attn_implementation="eager": matmul(Q, Kᵀ)·scale, + additive causal mask [B, 1, S, S] (0 / dtype min),
         softmax in fp32, cast back, matmul(P, V); K/V repeated to the query heads first (repeat_kv)
  sdpa   attn_implementation="sdpa" with no mask tensor: is_causal=True, so PyTorch may pick flash / cuDNN /
         memory-efficient (which one ran goes into the runner's manifest)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

LAYER_WORKLOADS = ("gemma-layer", "llama-layer")


@dataclass(frozen=True)
class LayerShape:
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int


DEFAULT_SHAPES = {
    "gemma-layer": LayerShape(hidden=2048, intermediate=16384, heads=8, kv_heads=1, head_dim=256),
    "llama-layer": LayerShape(hidden=2048, intermediate=8192, heads=16, kv_heads=4, head_dim=128),
}
DEFAULT_BATCH, DEFAULT_SEQ = 1, 2048


def _config(workload: str, shape: LayerShape, seq: int, attn: str):
    if workload == "gemma-layer":
        from transformers import GemmaConfig as Config
    elif workload == "llama-layer":
        from transformers import LlamaConfig as Config
    else:
        raise ValueError(f"unknown layer workload {workload!r}; expected one of {LAYER_WORKLOADS}")
    cfg = Config(
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        num_hidden_layers=1,
        max_position_embeddings=max(seq, 2048),
        vocab_size=256,  # no embedding is built: a layer only
        attention_dropout=0.0,
    )
    cfg._attn_implementation = attn
    return cfg


def _layer_classes(workload: str):
    if workload == "gemma-layer":
        from transformers.models.gemma.modeling_gemma import GemmaDecoderLayer, GemmaRotaryEmbedding

        return GemmaDecoderLayer, GemmaRotaryEmbedding
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    return LlamaDecoderLayer, LlamaRotaryEmbedding


def copy_with_attention(workload: nn.Module, attn: str):
    """A deep copy of a workload (layer or whole model: it has `.config`) under another attention implementation:
    the same weights, its own config, seen by every submodule that kept a reference to the old one."""
    other = copy.deepcopy(workload)
    other.config._attn_implementation = attn
    for module in other.modules():
        if getattr(module, "config", None) is not None and module is not other:
            module.config = other.config
    return other


def causal_mask(batch: int, seq: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The eager path's additive mask as `transformers.masking_utils` builds it: [B, 1, S, S], 0 where a query may
    attend (key position <= query position), the dtype's most negative value elsewhere."""
    keep = torch.ones(seq, seq, dtype=torch.bool, device=device).tril()
    mask = torch.zeros(seq, seq, dtype=dtype, device=device).masked_fill(~keep, torch.finfo(dtype).min)
    return mask[None, None].expand(batch, 1, seq, seq)


class LayerWorkload(nn.Module):
    """One HF decoder layer with its per-forward inputs (RoPE cos/sin, causal mask) precomputed."""

    is_decoder_layer = True  # the runner records which attention backend ran for these

    def __init__(self, workload: str, shape: LayerShape, batch: int, seq: int, attn: str = "sdpa"):
        super().__init__()
        layer_cls, rope_cls = _layer_classes(workload)
        self.workload = workload
        self.shape = shape
        self.batch, self.seq = batch, seq
        self.config = _config(workload, shape, seq, attn)
        self.layer = layer_cls(self.config, layer_idx=0)
        self.rotary = rope_cls(config=self.config)
        # gelu_tanh (Gemma's gelu_pytorch_tanh) or silu: the FuseLens dual GEMM's activation for this MLP
        self.activation = "gelu_tanh" if "tanh" in str(self.config.hidden_act) else "silu"
        self._inputs: tuple | None = None

    @property
    def attn_implementation(self) -> str:
        return self.config._attn_implementation

    def mlps(self) -> list[nn.Module]:
        """The layer's MLP (gate_proj, up_proj, down_proj): what the FuseLens variants replace."""
        return [self.layer.mlp]

    def _prepare(self, x: torch.Tensor) -> tuple:
        key = (x.device, x.dtype, x.shape[0], x.shape[1], self.attn_implementation)
        if self._inputs is None or self._inputs[0] != key:
            pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
            with torch.no_grad():
                cos, sin = self.rotary(x, pos)
            mask = (
                causal_mask(x.shape[0], x.shape[1], x.dtype, x.device) if self.attn_implementation == "eager" else None
            )
            self._inputs = (key, pos, (cos, sin), mask)
        return self._inputs[1:]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos, rope, mask = self._prepare(x)
        out = self.layer(x, attention_mask=mask, position_ids=pos, position_embeddings=rope)
        return out[0] if isinstance(out, tuple) else out  # transformers 4.x layers return a tuple

    def variant_copy(self, attn: str) -> LayerWorkload:
        """The same weights under another attention implementation (a deep copy with its own config)."""
        other = copy_with_attention(self, attn)
        other._inputs = None
        return other

    def precompute(self, x: torch.Tensor) -> None:
        """Build RoPE and the mask for x now (the runner calls this before it times or profiles anything)."""
        self._prepare(x)


def build_layer(
    workload: str,
    dtype: torch.dtype,
    device,
    *,
    batch: int = DEFAULT_BATCH,
    seq: int = DEFAULT_SEQ,
    shape: LayerShape | None = None,
    seed: int = 0,
) -> LayerWorkload:
    """The layer in eval mode, weights from a fixed seed (transformers' own init), attention 'sdpa' (HF's default)."""
    if workload not in LAYER_WORKLOADS:
        raise ValueError(f"unknown layer workload {workload!r}; expected one of {LAYER_WORKLOADS}")
    torch.manual_seed(seed)
    model = LayerWorkload(workload, shape or DEFAULT_SHAPES[workload], batch, seq)
    _init_weights(model)
    return model.to(device=device, dtype=dtype).eval()


def _init_weights(model: LayerWorkload) -> None:
    """Random normal weights (std 0.02, transformers' initializer_range) and norm weights as a trained model has them:
    a freshly built HF layer leaves Linear weights to torch's default and Gemma's RMSNorm weight at zero."""
    with torch.no_grad():
        for name, p in model.layer.named_parameters():
            if "norm" in name:
                p.normal_(0.0 if model.workload == "gemma-layer" else 1.0, 0.02)  # Gemma scales by (1 + w)
            else:
                p.normal_(0.0, 0.02)


def fuselens_mlp_forward(mlp, activation: str):
    """A forward for the layer's MLP (GemmaMLP / LlamaMLP: gate_proj, up_proj, down_proj, no bias) through the
    FuseLens dual-GEMM op: act(x W_gateᵀ)·(x W_upᵀ) in one kernel, then cuBLAS down_proj."""
    from kernels.models import custom_ops as ops

    def forward(x: torch.Tensor) -> torch.Tensor:
        x2d = x.reshape(-1, x.shape[-1])
        h = ops.dual_gemm_glu(x2d, mlp.gate_proj.weight, mlp.up_proj.weight, activation)
        return mlp.down_proj(h).view(*x.shape[:-1], -1)

    return forward


def layer_flops(workload: str, batch: int, seq: int, shape: LayerShape, causal: bool = True) -> int:
    """Matmul FLOPs of one forward: projections (q, k, v, o), attention (4·B·H·S²·D, halved when causal) and the
    gated MLP's three GEMMs; norms, RoPE and adds are < 1 % and left out."""
    tokens = batch * seq
    h, d = shape.heads, shape.head_dim
    proj = 2 * tokens * shape.hidden * (2 * h * d + 2 * shape.kv_heads * d)
    attn = 4 * batch * h * seq * seq * d // (2 if causal else 1)
    mlp = 3 * 2 * tokens * shape.hidden * shape.intermediate
    return proj + attn + mlp
