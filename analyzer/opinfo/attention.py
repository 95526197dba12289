"""What an attention kernel computes, from its launching SDPA op: shapes, causal or not, FLOPs and HBM bytes.

One reader for the cost model (analyzer.cost via analyzer.opinfo.cost_rules) and the fusion diff (which eager kernels a
flash / cuDNN / memory-efficient kernel replaced): both need the same (B, H, H_kv, S_q, S_k, D, D_v).

Causal masking halves the work: the op's `is_causal` argument (Kineto's 'Concrete Inputs', recorded with
record_shapes since PyTorch 2.1: 'True' / 'False'; the memory-efficient forward's custom_mask_type 1 or 2), else the
kernel name (FlashAttention-2's `flash_fwd_kernel<traits, Is_dropout, Is_causal, …>` template flags), else unknown
and the basis says "causal not recorded" (full S_q·S_k work counted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# aten SDPA ops: argument positions of is_causal and compute_log_sumexp (None: the op has no such argument), and the
# tensor layout of q: 'bhsd' (SDPA's [batch, heads, seq, dim]) or 'bshd' (the flash/efficient entry points).
# Positions are PyTorch's native_functions.yaml signatures (2.1 … 2.11); a value that is not a bool there is ignored.
# fmt: off
FORWARD_OPS: dict[str, tuple[int | None, int | None, str]] = {
    "aten::scaled_dot_product_attention":                 (5, None, "bhsd"),
    "aten::_scaled_dot_product_flash_attention":          (4, None, "bhsd"),
    "aten::_scaled_dot_product_flash_attention_for_cpu":  (4, None, "bhsd"),
    "aten::_scaled_dot_product_efficient_attention":      (6, 4, "bhsd"),
    "aten::_scaled_dot_product_cudnn_attention":          (6, 4, "bhsd"),
    "aten::_flash_attention_forward":                     (8, None, "bshd"),
    "aten::_efficient_attention_forward":                 (None, 10, "bshd"),  # custom_mask_type at 9
    "aten::_cudnn_attention_forward":                     (10, 8, "bhsd"),  # torch 2.9+: under _scaled_…_cudnn_…
}
BACKWARD_OPS: dict[str, tuple[int | None, str]] = {
    "aten::_scaled_dot_product_flash_attention_backward":     (11, "bhsd"),
    "aten::_scaled_dot_product_efficient_attention_backward": (11, "bhsd"),
    "aten::_scaled_dot_product_cudnn_attention_backward":     (14, "bhsd"),
    "aten::_flash_attention_backward":                        (11, "bshd"),
    "aten::_efficient_attention_backward":                    (None, "bshd"),  # custom_mask_type at 14
    "aten::_cudnn_attention_backward":                        (14, "bhsd"),
}
# fmt: on
_CUSTOM_MASK_TYPE = {"aten::_efficient_attention_forward": 9, "aten::_efficient_attention_backward": 14}
# ops whose forward always writes the softmax logsumexp [B, H, S_q] fp32 (FlashAttention keeps it for backward)
_ALWAYS_LSE = frozenset(
    [
        "aten::_scaled_dot_product_flash_attention",
        "aten::_flash_attention_forward",
        "aten::scaled_dot_product_attention",
    ]
)
ATTENTION_OPS = frozenset(FORWARD_OPS) | frozenset(BACKWARD_OPS)
_LSE_BYTES = 4  # fp32 per (batch, head, query)


@dataclass(frozen=True)
class Attention:
    """One attention call. heads are the query heads; kv_heads < heads is GQA/MQA (K and V read once per KV head)."""

    op: str
    batch: int
    heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    v_head_dim: int
    dtype: str  # the 'Input type' of q
    causal: bool | None  # None: not recorded
    causal_from: str  # 'is_causal argument' | 'kernel name' | 'custom_mask_type argument' | ''
    backward: bool
    lse: bool | None  # the forward writes the logsumexp (None: not recorded)

    @property
    def score_elements(self) -> int:
        """Elements of one [B, H, S_q, S_k] score (or probability) tensor: what an eager attention writes to HBM."""
        return self.batch * self.heads * self.q_len * self.kv_len

    @property
    def forward_flops(self) -> float:
        """2·B·H·S_q·S_k·(D + D_v) (QKᵀ and PV; = 4·B·H·S_q·S_k·D when D_v = D), halved when causal."""
        full = 2.0 * self.batch * self.heads * self.q_len * self.kv_len * (self.head_dim + self.v_head_dim)
        return full / 2 if self.causal else full

    def label(self) -> str:
        gqa = f" H_kv={self.kv_heads}" if self.kv_heads != self.heads else ""
        causal = {True: "causal", False: "not causal", None: "causal not recorded"}[self.causal]
        return (
            f"B={self.batch} H={self.heads}{gqa} S_q={self.q_len} S_k={self.kv_len} D={self.head_dim}"
            + (f" D_v={self.v_head_dim}" if self.v_head_dim != self.head_dim else "")
            + f", {causal}"
        )


def _flag(concrete, i: int | None) -> bool | None:
    if i is None or not isinstance(concrete, (list, tuple)) or i >= len(concrete):
        return None
    v = concrete[i]
    return {"True": True, "False": False, "true": True, "false": False, "1": True, "0": False}.get(
        v.strip() if isinstance(v, str) else v
    )


_FLASH_FLAGS = re.compile(r"flash_(fwd|bwd)(_splitkv)?\w*kernel<")


def causal_from_name(name: str) -> bool | None:
    """FlashAttention-2 (and PyTorch's copy, pytorch_flash::) spell their template flags in the kernel name:
    flash_fwd_kernel<Kernel_traits, Is_dropout, Is_causal, …>, flash_bwd_…_kernel<Kernel_traits, Is_dropout,
    Is_causal, …>, flash_fwd_splitkv_kernel<Kernel_traits, Is_causal, …>. None when the name does not say."""
    m = _FLASH_FLAGS.search(name or "")
    if not m:
        return None
    rest = name[m.end() :]
    comma = _top_level_comma(rest)  # after the Kernel_traits argument (nested <…>)
    if comma < 0:
        return None
    flags = [f.strip() for f in re.split(r"[,>]", rest[comma + 1 :])[:3]]
    pos = 0 if m.group(2) else 1
    if len(flags) <= pos or flags[pos] not in ("true", "false"):
        return None
    return flags[pos] == "true"


def _top_level_comma(text: str) -> int:
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            return i
    return -1


def attention_problem(op: str, args: list, concrete=None, kernel_name: str = "") -> Attention | None:
    """The attention call of an SDPA-family op from its tensor args (objects with .shape and .dtype, in argument
    order, None for non-tensors) and Concrete Inputs. None when the op is not one or q/k/v are not 4-D."""
    if op in FORWARD_OPS:
        causal_at, lse_at, layout = FORWARD_OPS[op]
        backward = False
    elif op in BACKWARD_OPS:
        causal_at, layout = BACKWARD_OPS[op]
        lse_at = None
        backward = True
    else:
        return None
    first = 1 if backward else 0  # backward ops take grad_out first
    qkv = args[first : first + 3] if len(args) >= first + 3 else []
    if len(qkv) != 3 or any(t is None or len(t.shape) != 4 for t in qkv):
        return None
    q, k, v = qkv
    if layout == "bshd":
        (b, sq, h, d), (_, sk, hk, _), dv = q.shape, k.shape, v.shape[3]
    else:
        (b, h, sq, d), (_, hk, sk, _), dv = q.shape, k.shape, v.shape[3]
    causal, source = _flag(concrete, causal_at), "is_causal argument"
    if causal is None and op in _CUSTOM_MASK_TYPE and isinstance(concrete, (list, tuple)):
        i = _CUSTOM_MASK_TYPE[op]
        raw = concrete[i].strip() if i < len(concrete) and isinstance(concrete[i], str) else ""
        causal, source = ({"0": False, "1": True, "2": True}.get(raw), "custom_mask_type argument")
    if causal is None:
        causal, source = causal_from_name(kernel_name), "kernel name"
    if causal is None:
        source = ""
    lse = True if (op in _ALWAYS_LSE and not backward) else _flag(concrete, lse_at)
    return Attention(op, b, h, hk, sq, sk, d, dv, q.dtype, causal, source, backward, lse)


def attention_bytes(att: Attention, args: list, itemsize) -> tuple[float, str]:
    """HBM bytes of a forward (Q, K, V, an explicit mask/bias, O, logsumexp) or backward (its tensor inputs + dQ, dK,
    dV) call, each tensor once: K and V have H_kv heads, so GQA/MQA reads them once per KV head. `itemsize(dtype)`
    gives bytes per element; args' `nbytes` are their stored bytes. Returns (bytes, what was counted)."""
    tensors = [t for t in args if t is not None]
    if att.backward:
        first = 1
        q, k, v = args[first : first + 3]
        total = sum(t.nbytes for t in tensors) + q.nbytes + k.nbytes + v.nbytes
        return float(total), "backward: inputs + dQ dK dV"
    o = att.batch * att.heads * att.q_len * att.v_head_dim * itemsize(att.dtype)
    total = sum(t.nbytes for t in tensors) + o  # q, k, v and an attn_mask / bias when one is passed
    what = "Q+K+V" + ("+mask" if len(tensors) > 3 else "") + "+O"
    if att.lse:
        total += att.batch * att.heads * att.q_len * _LSE_BYTES
        what += "+logsumexp"
    elif att.lse is None:
        what += " (logsumexp not recorded, not counted)"
    return float(total), what


def backward_flops(att: Attention) -> float:
    """2.5 × the forward (five matmuls to the forward's two: the FlashAttention-2 paper's count), causal halved."""
    return 2.5 * att.forward_flops


def is_attention_op(op: str) -> bool:
    return op in ATTENTION_OPS
