"""Whole Hugging Face causal LMs, the traces teammates bring: embedding -> N decoder layers -> final norm -> LM head.

  llama-model  transformers LlamaForCausalLM: RMSNorm, GQA attention with RoPE, SwiGLU MLP. Default size
               TinyLlama-like at 4 layers: hidden 2048, intermediate 5632, 16 query heads, 4 KV heads, head_dim 128,
               vocab 32000.
  gemma-model  transformers GemmaForCausalLM: the same skeleton with (1 + w) RMSNorm, multi-query attention, GEGLU
               (gelu_tanh) MLP and a sqrt(hidden)-scaled embedding. Default Gemma-2B-like widths at 4 layers: hidden
               2048, intermediate 16384, 8 query heads, 1 KV head, head_dim 256, vocab 32000 (Gemma's 256k vocabulary
               would make the LM head 3/4 of the step at these sizes).

Nothing is precomputed: RoPE (cos, sin), the causal mask (`create_causal_mask`, eager attention only) and the
position ids are built inside the model's forward, on every call, exactly as a user's `model(input_ids)` does, so a
trace holds those kernels too.

Training (`train_step`): `model(input_ids, labels=input_ids)` (HF's shifted cross-entropy: log_softmax + nll_loss
over [tokens x vocab] in fp32), `loss.backward()`, then `AdamW(foreach=True).step()` and `zero_grad(set_to_none=
True)`. For the compiled variants the optimizer step is compiled too (`torch.compile(opt.step)`), as the PyTorch
tutorial on compiled optimizers does, so Inductor's fused AdamW kernels replace the foreach ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

MODEL_WORKLOADS = ("llama-model", "gemma-model")


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    vocab: int


DEFAULT_SHAPES = {
    "llama-model": ModelShape(hidden=2048, intermediate=5632, heads=16, kv_heads=4, head_dim=128, layers=4, vocab=32000),
    "gemma-model": ModelShape(hidden=2048, intermediate=16384, heads=8, kv_heads=1, head_dim=256, layers=4, vocab=32000),
}  # fmt: skip
DEFAULT_BATCH, DEFAULT_SEQ = 4, 1024
LR = 1e-4


def _config(workload: str, shape: ModelShape, seq: int, attn: str):
    if workload == "gemma-model":
        from transformers import GemmaConfig as Config
    elif workload == "llama-model":
        from transformers import LlamaConfig as Config
    else:
        raise ValueError(f"unknown model workload {workload!r}; expected one of {MODEL_WORKLOADS}")
    cfg = Config(
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        num_hidden_layers=shape.layers,
        vocab_size=shape.vocab,
        max_position_embeddings=max(seq, 2048),
        attention_dropout=0.0,
        use_cache=False,  # a training step and a prefill forward keep no KV cache
        tie_word_embeddings=False,
    )
    cfg._attn_implementation = attn
    return cfg


def _model_class(workload: str):
    if workload == "gemma-model":
        from transformers import GemmaForCausalLM

        return GemmaForCausalLM
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM


class ModelWorkload(nn.Module):
    """A HF causal LM; forward(input_ids) -> logits. `train_step(fn, ids)` builds one training step for a variant."""

    is_decoder_layer = True  # the runner records which attention backend ran for these
    is_whole_model = True

    def __init__(self, workload: str, shape: ModelShape, batch: int, seq: int, attn: str = "sdpa"):
        super().__init__()
        self.workload = workload
        self.shape = shape
        self.batch, self.seq = batch, seq
        self.config = _config(workload, shape, seq, attn)
        self.model = _model_class(workload)(self.config)
        self.activation = "gelu_tanh" if "tanh" in str(self.config.hidden_act) else "silu"

    @property
    def attn_implementation(self) -> str:
        return self.config._attn_implementation

    def mlps(self) -> list[nn.Module]:
        """Every decoder layer's MLP (gate_proj, up_proj, down_proj): what the FuseLens variants replace."""
        return [layer.mlp for layer in self.model.model.layers]

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None):
        out = self.model(input_ids=input_ids, labels=labels, use_cache=False)
        return out if labels is not None else out.logits

    def variant_copy(self, attn: str) -> ModelWorkload:
        """The same weights under another attention implementation (a deep copy with its own config)."""
        from kernels.models.layer import copy_with_attention

        return copy_with_attention(self, attn)

    def precompute(self, x: torch.Tensor) -> None:
        """Nothing: a whole model builds RoPE and its mask inside forward, as a user's call does."""


def train_step(fn, input_ids: torch.Tensor, *, compiled: bool):
    """One optimizer step of variant `fn` (a ModelWorkload copy, or torch.compile of one): HF's causal-LM loss,
    backward, AdamW(foreach=True) (compiled with the model for compiled variants), grads set to None."""
    fn.train()
    params = [p for p in fn.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, foreach=True)
    opt_step = torch.compile(opt.step) if compiled else opt.step

    def step():
        out = fn(input_ids, labels=input_ids)
        out.loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)

    return step


def build_whole_model(
    workload: str,
    dtype: torch.dtype,
    device,
    *,
    batch: int = DEFAULT_BATCH,
    seq: int = DEFAULT_SEQ,
    shape: ModelShape | None = None,
    seed: int = 0,
) -> ModelWorkload:
    """The model in eval mode, weights from a fixed seed (transformers' own init: normal, std initializer_range)."""
    if workload not in MODEL_WORKLOADS:
        raise ValueError(f"unknown model workload {workload!r}; expected one of {MODEL_WORKLOADS}")
    torch.manual_seed(seed)
    model = ModelWorkload(workload, shape or DEFAULT_SHAPES[workload], batch, seq)
    with torch.no_grad():  # Gemma's RMSNorm scales by (1 + w): HF inits w at 0; a trained model's are near it
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0 if workload == "gemma-model" else 1.0, 0.02)
    return model.to(device=device, dtype=dtype).eval()


def make_tokens(batch: int, seq: int, vocab: int, device, seed: int = 1) -> torch.Tensor:
    """Random token ids [batch, seq] (int64), the model's input and (shifted inside HF's loss) its labels."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=gen).to(device)


def model_flops(shape: ModelShape, batch: int, seq: int, causal: bool = True) -> int:
    """Matmul FLOPs of one forward: per layer q/k/v/o projections, attention (halved when causal) and the gated MLP,
    plus the LM head; x3 for a training step's forward + backward."""
    from kernels.models.layer import LayerShape, layer_flops

    per_layer = layer_flops(
        "llama-layer",
        batch,
        seq,
        LayerShape(shape.hidden, shape.intermediate, shape.heads, shape.kv_heads, shape.head_dim),
        causal,
    )
    return shape.layers * per_layer + 2 * batch * seq * shape.hidden * shape.vocab
