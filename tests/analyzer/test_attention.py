"""Attention calls: causal from the op's is_causal argument or the kernel name, FLOPs halved when causal, bytes
Q + K + V + O + logsumexp with K/V at their own (KV) heads. On real traces: TraceLens's H100 Qwen (causal, flash),
H100 BERT (not causal) and MI300 compiled transformer block (not causal, Triton attn_fwd under the flash op)."""

from __future__ import annotations

from analyzer.opinfo.attention import causal_from_name
from tests.conftest import DATA, loaded_trace

TL = DATA / "tracelens"
QWEN_FLASH = (
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, "
    "false, false, false, true, false>(pytorch_flash::Flash_fwd_params)"
)
BERT_FLASH = QWEN_FLASH.replace("false, true, false, false, false, true", "false, false, false, false, false, true")


def test_causal_from_flash_template_flags():
    assert causal_from_name(QWEN_FLASH) is True  # Is_dropout=false, Is_causal=true
    assert causal_from_name(BERT_FLASH) is False
    assert causal_from_name("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3") is None
    assert causal_from_name("attn_fwd") is None


def _attention(path):
    t = loaded_trace(path)
    k = t.kernels
    return k[(k["category"] == "attention") & k["bytes"].notna()]


def test_qwen_causal_flash_cost():
    a = _attention(TL / "h100_qwen1.5-0.5b_eager.json.gz")
    assert len(a) > 0
    b, h, s, d = 16, 16, 559, 64
    qkvo = 4 * b * s * h * d * 2
    lse = b * h * s * 4
    assert (a["bytes"] == qkvo + lse).all()  # 73,841,664
    assert (a["flops"] == 4 * b * h * s * s * d / 2).all()  # causal: half of 4·B·H·S²·D
    assert a["cost_basis"].str.contains("causal from the is_causal argument").all()


def test_not_causal_block_full_flops():
    a = _attention(TL / "mi300_compiled_transformer_block_triton.json.gz")
    assert len(a) == 1
    b, h, s, d = 8, 16, 4096, 128
    assert a["flops"].iloc[0] == 4 * b * h * s * s * d
    assert a["bytes"].iloc[0] == 4 * b * h * s * d * 2 + b * h * s * 4
    assert "not causal" in a["cost_basis"].iloc[0]


def test_recorded_layer_cudnn_attention_cost():
    """The Gemma-style layer's SDPA on an H100 (tests/data/layer_h100): cuDNN attention, 8 query heads over ONE KV
    head (enable_gqa), causal, no logsumexp in inference (compute_log_sumexp False)."""
    a = _attention(DATA / "layer_h100" / "sdpa.json.gz")
    assert len(a) == 3 and (a["library"] == "cuDNN").all()  # one per profiled step
    q = o = 1 * 8 * 2048 * 256 * 2
    k = v = 1 * 1 * 2048 * 256 * 2  # read once for the single KV head, not once per query head
    assert (a["bytes"] == q + k + v + o).all()  # 18,874,368
    assert (a["flops"] == 4 * 1 * 8 * 2048 * 2048 * 256 / 2).all()
    basis = a["cost_basis"].iloc[0]
    assert "H_kv=1" in basis and "causal from the is_causal argument" in basis
    assert basis.endswith("from aten::_cudnn_attention_forward")
