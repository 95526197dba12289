"""Kernel classification: name → category, library, ops, by one pattern table (first match wins).

classify_names(names) runs the table over the UNIQUE names only (a 1M-kernel trace has a few hundred
distinct names) and maps the answers back, so cost is O(unique names), not O(kernels).
docs/CLASSIFICATION.md explains every row and the decisions behind it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from analyzer.codes import factorize
from analyzer.opinfo import gemm as gemm_reader
from analyzer.opinfo import names
from analyzer.opinfo.tensors import tensors

# ---------------------------------------------------------------------------------------------------
# The table. Each row: (regex searched anywhere in the name, category, library, ops rule).
# ops rule: a literal ops string, or "@name" of a decoder in _DECODERS below.
# Order matters: specific rows sit above the generic "elementwise" rows that would also match.
# ---------------------------------------------------------------------------------------------------
# fmt: off
RULES: tuple[tuple[str, str, str, str], ...] = (
    # runtime copies and fills (kind memcpy/memset); device copy *kernels* are pointwise, see below
    (r"^Memcpy\b", "memcpy", "CUDA/HIP runtime", "copy"),
    (r"^Memset\b", "memset", "CUDA/HIP runtime", "fill"),
    # collectives
    (r"nccl(?:Dev)?Kernel_", "communication", "NCCL", "@nccl"),
    (r"multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce", "communication", "PyTorch SymmMem", "all_reduce"),
    (r"cross_device_reduce|custom_all_reduce", "communication", "vLLM custom all-reduce", "all_reduce"),
    # Inductor-generated Triton (PyTorch >= 2.1 names carry the fused aten ops)
    (r"^triton_tem_fused_", "gemm", "Triton-template", "@inductor"),
    (r"^triton_(?:poi|red|per)_", "@inductor", "Triton-Inductor", "@inductor"),
    # a foreach kernel: one launch updating many tensors (a compiled optimizer step); its name lists no ops
    (r"^triton_for_", "pointwise", "Triton-Inductor", "foreach"),
    (r"^triton_tem_", "other", "Triton-Inductor", "@inductor"),
    # user Triton kernels: Liger, and our own. FuseLens kernels (docs/KERNELS.md) by name: the activation is a
    # constexpr and the op's activation string is not recorded (Concrete Inputs ''), so it is 'act'
    (r"^_?fuselens_dual_gemm_glu\w*_kernel$", "gemm", "Triton-user", "mm+mm+act+mul"),
    (r"^_?fuselens_gemm_bias_act\w*_kernel$", "gemm", "Triton-user", "mm+bias+act"),
    (r"^_?fuselens_glu_gating\w*_kernel$", "pointwise", "Triton-user", "act+mul"),
    # the training backward's dH = dY W_down GEMM with the activation's backward (and the gate/up products) in its
    # epilogue (kernels/ops/mlp_backward.py)
    (r"^_?fuselens_mlp_bwd_dh\w*_kernel$", "gemm", "Triton-user", "mm+act_backward+mul"),
    (r"^_?fuselens_", "@tokens", "Triton-user", "@tokens"),
    # earlier FuseLens traces (before the fuselens:: ops): the same kernels under their first function names
    (r"^_gating_kernel$", "pointwise", "Triton-user", "act+mul"),
    (r"^_dual_gemm_kernel$", "gemm", "Triton-user", "mm+mm+act+mul"),
    (r"^_gemm_act_kernel$", "gemm", "Triton-user", "mm+bias+act"),
    (r"^_?(?:liger_)?(?:geglu|swiglu|rms_norm|layer_norm|cross_entropy|rope|fused_linear)\w*_kernel", "@tokens",
     "Triton-user", "@tokens"),
    # attention: FlashAttention-2 (PyTorch's copy pytorch_flash::, flash-attn), FlashAttention-3 (flash::FlashAttn*Sm90),
    # memory-efficient (xFormers' CUTLASS fmha), cuDNN SDPA (cudnn_generated_fort_native_sdpa_*), FlashInfer, Triton
    (r"pytorch_flash::|flash::flash_|flash_(?:fwd|bwd)\w*kernel|flash::(?:FlashAttn|CollectiveMainloop|flash_fwd)"
     r"|FlashAttn(?:Fwd|Bwd)Sm\d+", "attention", "flash-attn", "sdpa"),
    (r"fmha_cutlass|cutlass\w*fmha|mem_eff|efficient_attention", "attention", "xFormers/mem-efficient", "sdpa"),
    (r"cudnn\w*(?:sdpa|fmha|flash)|generated_fmha|sm\d+_fmha", "attention", "cuDNN", "sdpa"),
    # cuDNN SDPA backward's own pre- and post-passes (rowsum of dO·O, the dQ cast), launched by the same op call
    (r"cudnn::fusion::(?:compute_dot_do_o|convert_dq|fmha_reduc)", "attention", "cuDNN", "sdpa"),
    (r"flashinfer::\w*(?:Prefill|Decode|Attention|MLA|mla)|BatchPrefillWith|BatchDecodeWith|SinglePrefillWith"
     r"|SingleDecodeWith", "attention", "FlashInfer", "sdpa"),
    (r"fmha", "attention", "TensorRT-LLM/FlashInfer", "sdpa"),
    (r"^_?attn_(?:fwd|bwd)|flex_attention|paged_attention|unified_attention", "attention", "Triton-user", "sdpa"),
    # GEMM (incl. split-K reduce and cuBLASLt epilogue kernels: GEMM work launched by the same call)
    (r"splitKreduce|ReduceSplitK", "gemm", "@lib", "splitk_reduce"),
    (r"^nvjet_", "gemm", "cuBLASLt", "@epilogue"),
    (r"sm\d+_xmma_gemm|xmma_gemm", "gemm", "cuBLAS", "@epilogue"),
    (r"epilogue::impl::globalKernel", "gemm", "cuBLASLt", "epilogue"),
    (r"\b(?:ampere|volta|turing|maxwell|hopper|sm\d+)_[sdhcz]?[a-z]*gemm", "gemm", "cuBLAS", "@epilogue"),
    (r"gemv|gemmSN|gemmk1|sgemm_largek|magma_sgemm|\bscal_kernel", "gemm", "cuBLAS", "@gemv"),
    (r"^Cijk_", "gemm", "ROCm Tensile/hipBLASLt", "mm"),  # 'Bias' in Tensile names is a capability, not an epilogue
    (r"\bck::|ck_tile|device_gemm", "gemm", "ROCm CK", "mm"),
    (r"^bmm_\w+_sm\d+", "gemm", "TensorRT-LLM", "@epilogue"),
    # convolutions are GEMM-class work (implicit GEMM, Winograd, FFT); their layout helpers are not
    (r"nchwToNhwc|nhwcToNchw|im2col", "pointwise", "cuDNN", "copy"),
    (r"scalePackedTensor", "pointwise", "cuDNN", "mul"),
    (r"(?i:implicit_?gemm|implicit_convolve|explicit_convolve|scudnn|winograd|fft2d_|wgrad|dgrad|fprop)|cask_cudnn",
     "gemm", "cuDNN", "@conv"),
    (r"cutlass", "gemm", "CUTLASS", "@epilogue"),
    # normalization (above the generic elementwise rows: some of these run inside elementwise kernels)
    (r"softmax|SoftMax", "normalization", "ATen", "@norm"),
    (r"layer_norm|LayerNorm|rms_norm|RMSNorm|rmsnorm|GroupNorm|group_norm|batch_norm|BatchNorm|bn_fw|bn_bw"
     r"|RowwiseMoments|GammaBeta|ComputeFusedParams|ComputeInternalGradients|ComputeBackwardFusedParams"
     r"|cuComputePartGradGammaBeta|cuComputeGradGammaBeta", "normalization", "@lib", "@norm"),
    # reductions, scans, sorts, pooling, losses
    (r"reduce_kernel|ReduceOp|cub::Device|at_cuda_detail::cub|DeviceScan|RadixSort|cumsum|\bscan|kernel_scan_", "reduction",
     "@lib", "@reduce"),
    (r"max_pool|avg_pool|adaptive_average_pool|adaptive_max_pool", "reduction", "ATen", "@reduce"),
    (r"ClassNLLCriterion|nll_loss", "reduction", "ATen", "nll_loss"),
    (r"moe::dev::(?:routing|finalize)", "reduction", "TensorRT-LLM", "@reduce"),
    # pointwise: ATen TensorIterator kernels (ops from the functor), indexing, concatenation, RNG, quantize
    (r"index_elementwise_kernel|indexSelect|indexFunc|index_select|gather|scatter|split_embedding"
     r"|embedding_(?:bag|dense|backward)|_copy_page_indices", "pointwise", "@lib", "@index"),
    (r"CatArrayBatchedCopy", "pointwise", "ATen", "cat"),
    # aten::embedding_dense_backward's segment kernels (sort by index, partial sums per segment, scatter)
    (r"partials_per_segment|num_of_partial_segments|partial_segment_offset|compute_grad_weight|sum_and_scatter",
     "pointwise", "ATen", "embedding_dense_backward"),
    (r"elementwise_kernel|multi_tensor_apply_kernel|fused_dropout|elementwise_grid_stride", "pointwise", "@lib",
     "@functor"),
    (r"reshape_and_cache|rotary_embedding|quant|FP8|qparam|permute|bucketize|searchsorted|offsets_range|to_dense"
     r"|recat_copy|bounds_check_indices|linearize_index|compute_cuda_kernel", "pointwise", "@lib", "@words"),
    # PyTorch 2.0 Inductor kernels were named by signature only (triton__0d1d2d): nothing says what they do
    (r"^triton_", "other", "Triton-Inductor", ""),
)
# fmt: on

# Kernels that truly are 'other' in the real traces (tests/analyzer/test_classify.py checks every real name is either
# classified or listed here). Keep it short and say why.
OTHER_ALLOWLIST: tuple[tuple[str, str], ...] = (
    (r"^triton__\d", "PyTorch 2.0 Inductor naming (signature only, e.g. triton__0d1d2d): no op in the name"),
)

# ---------------------------------------------------------------------------------------------------
# ops decoders (names, words and epilogues come from analyzer.opinfo.names, the one decoder)
# ---------------------------------------------------------------------------------------------------
_GEMM_WORDS = ("mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "convolution")
_NO_GEMM_WORDS = ("mm", "bmm", "_scaled_mm", "matmul", "linear")


def _inductor(name: str) -> tuple[str, str]:
    """Category and ops of an Inductor kernel from its name (ops in Inductor's order, views and copies dropped)."""
    dec = names.inductor(name)
    if dec is None:
        return "other", ""
    ops = list(dec.ops)
    if dec.kind in ("tem", "mm", "bmm"):
        # a GEMM template: its name also lists the producers of its inputs, so the name alone claims only the GEMM;
        # template_ops adds what rides on it when the kernel's buffers show a fused operand
        if "flex_attention" in dec.words:
            return "attention", "+".join(ops)
        return "gemm", _template_gemm(dec)[0]
    # a pointwise / reduction kernel lists the GEMM whose output it reads (an addmm's bias add, RoPE's gradient
    # beside a bmm): it computes none of the product (names.inductor_ops)
    ops = list(dict.fromkeys("add" if w in ("addmm", "baddbmm") else w for w in ops if w not in _NO_GEMM_WORDS))
    if not ops:
        ops = ["copy"] if dec.words else []
    category = {"poi": "pointwise", "red": "reduction", "per": "reduction", "spl": "reduction"}.get(dec.kind, "other")
    if category == "reduction" and names.is_norm(ops):
        category = "normalization"
    return category, "+".join(ops)


def _template_gemm(dec: names.InductorName) -> tuple[str, list[str]]:
    """(the GEMM op, the other ops its name lists) of an Inductor template name."""
    ops = list(dec.ops)
    gemm = next((w for w in ops if w in _GEMM_WORDS), "mm")
    return gemm, [w for w in ops if w not in _GEMM_WORDS]


def _words(name: str) -> str:
    return "+".join(names.word_ops(name))


def _tokens(name: str) -> tuple[str, str]:
    """User Triton kernels: category from the words (mm → gemm with the rest as epilogue)."""
    parts = list(names.word_ops(name))
    if names.is_backward_text(name):  # _geglu_tanh_backward_kernel → gelu_backward+mul
        parts = [p + "_backward" if p in names.HAS_BACKWARD else p for p in parts]
    ops = "+".join(parts)
    if "mm" in parts:
        return "gemm", "+".join(["mm"] + [p for p in parts if p != "mm"])
    norms = {"rms_norm", "layer_norm", "group_norm", "softmax"}
    if (norms | {n + "_backward" for n in norms}) & set(parts):
        return "normalization", ops
    if {"cross_entropy", "cross_entropy_backward"} & set(parts):
        return "reduction", ops
    return "pointwise", ops


def _epilogue(name: str, base: str = "mm") -> str:
    return names.epilogue_ops(name, base)


def _gemv(name: str) -> str:
    if "scal_kernel" in name:
        return "scal"  # cuBLAS C *= beta before accumulation
    return "mv" if "gemv" in name else "mm"


def _conv(name: str) -> str:
    low = name.lower()
    if "offsets" in low:
        return "conv_setup"
    step = "conv_wgrad" if "wgrad" in low else "conv_dgrad" if "dgrad" in low else "conv"
    return _epilogue(name, step)


def _nccl(name: str) -> str:
    m = re.search(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", name)
    coll = m.group(1) if m else "collective"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", coll).lower()  # AllReduce → all_reduce


# ATen TensorIterator functors → op. Copy/fill/index first (they share the "elementwise" kernel names).
_FUNCTOR_OPS: tuple[tuple[str, str], ...] = (
    (r"direct_copy_kernel|copy_device_to_device|_copy_kernel_cuda|copy_kernel", "copy"),
    (r"masked_fill", "masked_fill"),
    (r"FillFunctor|fill_kernel", "fill"),
    (r"index_put_kernel", "index_put"),
    (r"index_copy_kernel", "index_copy"),
    (r"index_kernel|elementwise_kernel_with_index<[^>]*arange|arange", "index"),
    (r"GeluBackwardCUDAKernelImpl|gelu_backward", "gelu_backward"),
    (r"GeluCUDAKernelImpl", "gelu"),
    (r"AdamFunctor|AdamWFunctor|fused_adam", "adam"),
    (r"fused_dropout", "dropout"),
    (r"normal_and_transform", "normal"),
    (r"uniform_and_transform", "uniform"),
    (r"MulScalarFunctor|MulFunctor", "mul"),
    (r"DivFunctor|div_true|div_floor|div_trunc", "div"),
    (r"CUDAFunctor(?:OnSelf|OnOther)?_add|AddFunctor", "add"),
    (r"SubFunctor", "sub"),
    (r"CompareEqFunctor", "eq"),
    (r"CompareGEFunctor", "ge"),
    (r"CompareFunctor|compare_scalar_kernel", "compare"),
    (r"AbsFunctor", "abs"),
    (r"batch_norm_calc_invstd|batch_norm_update_stats", "batch_norm"),
    (r"GroupNorm\w*Kernel", "group_norm"),
    (r"BinaryOp\w*Functor|UnaryOp\w*Functor|PointwiseOp\w*Functor", "foreach"),
    (r"launch_clamp_scalar", "clamp"),
    (r"_to_hfp8|_hfp8_to|quantize", "quantize"),
)
# Generic: the functor's own name, e.g. '::silu_kernel(' → silu, '::tanh_backward_kernel_cuda(' → tanh_backward.
_FUNCTOR_GENERIC = re.compile(
    r"::(?:\(anonymous namespace\)::)?([a-z][a-z0-9_]*?)(?:_kernel_cuda|_cuda_kernel|_kernel_impl|_kernel)\b"
)
_NOT_FUNCTORS = frozenset(
    [
        "gpu",
        "gpu_index",
        "vectorized_elementwise",
        "unrolled_elementwise",
        "elementwise",
        "elementwise_kernel_manual_unroll",
        "multi_tensor_apply",
        "index_elementwise",
    ]
)


def _functor(name: str) -> str:
    for pattern, op in _FUNCTOR_OPS:
        if re.search(pattern, name):
            return op
    for m in _FUNCTOR_GENERIC.finditer(name):
        word = m.group(1)
        if word not in _NOT_FUNCTORS and not word.startswith("gpu_"):
            return word.removesuffix("_tensor_scalar").removesuffix("_scalar")
    return ""


# substring of the lower-cased name → op, first match wins (indexing kernels; reductions, scans, sorts, pooling)
_INDEX_WORDS = (
    ("index_put", "index_put"), ("index_copy", "index_copy"), ("embedding", "embedding"), ("scatter", "scatter"),
    ("gather", "gather"), ("indexfunc", "index_add"), ("page_indices", "copy"),
)  # fmt: skip
_REDUCE_WORDS = (
    ("radixsort", "sort"), ("scan", "scan"), ("cumsum", "scan"), ("compact", "scan"), ("reducebykey", "reduce_by_key"),
    ("max_pool", "max_pool"), ("avg_pool", "avg_pool"), ("average_pool", "avg_pool"), ("routing", "moe_routing"),
    ("finalize", "moe_finalize"), ("meanops", "mean"), ("welford", "var_mean"), ("normtwo", "norm"),
    ("maxops", "max"), ("minops", "min"), ("argmax", "argmax"), ("and_kernel", "all"), ("or_kernel", "any"),
    ("sum_functor", "sum"), ("prod", "prod"),
)  # fmt: skip


def _first_word(name: str, table: tuple[tuple[str, str], ...], default: str) -> str:
    low = name.lower()
    return next((op for word, op in table if word in low), default)


def _index(name: str) -> str:
    op = _first_word(name, _INDEX_WORDS, "index")
    return op + ("_add" if op == "scatter" and "reduceadd" in name.lower() else "")


def _norm(name: str) -> str:
    low = name.lower()
    if "softmax" in low:
        op = "log_softmax" if "log_softmax" in low else "softmax"
    elif "rms" in low:
        op = "add+rms_norm" if "fused_add_rms" in low else "rms_norm"
    elif "group" in low:
        op = "group_norm"
    elif "batch" in low or "bn_" in low:
        op = "batch_norm"
    else:
        op = "layer_norm"
    backward = any(w in low for w in ("backward", "_bw", "bwd", "grad"))
    return op + "_backward" if backward else op


def _reduce(name: str) -> str:
    return _first_word(name, _REDUCE_WORDS, "reduce")


def _library(name: str) -> str:
    if "fbgemm" in name or "split_embedding" in name or "bounds_check_indices" in name:
        return "FBGEMM"
    if "vllm::" in name:
        return "vLLM"
    if "tensorrt_llm" in name or "moe::dev" in name:
        return "TensorRT-LLM"
    if "MIOpen" in name:
        return "MIOpen"
    if "cudnn" in name:
        return "cuDNN"
    if "cublasLt" in name:
        return "cuBLASLt"
    if "cublas" in name:
        return "cuBLAS"
    if "cub::" in name:
        return "CUB"
    if "at::native" in name or "at::" in name:
        return "ATen"
    if "multi_tensor_apply" in name:
        return "Apex/ATen"
    return ""


_DECODERS: dict[str, Callable[[str], str]] = {
    "@epilogue": _epilogue,
    "@gemv": _gemv,
    "@conv": _conv,
    "@nccl": _nccl,
    "@functor": _functor,
    "@index": _index,
    "@norm": _norm,
    "@reduce": _reduce,
    "@words": _words,
}

_COMPILED = tuple((re.compile(p), c, lib, ops) for p, c, lib, ops in RULES)


def classify_one(name: str) -> tuple[str, str, str]:
    """(category, library, ops) of one kernel name. First matching row wins; no match → ('other', '', '')."""
    head = names.function_name(name)  # template arguments name types, not work: they never pick the row
    for rx, category, library, ops_rule in _COMPILED:
        if not rx.search(head):
            continue
        if library == "@lib":
            library = _library(head)
        if ops_rule == "@inductor":
            cat, ops = _inductor(name)
            return (cat if category == "@inductor" else category), library, ops
        if ops_rule == "@tokens":
            cat, ops = _tokens(name)
            return (cat if category == "@tokens" else category), library, ops
        ops = _DECODERS[ops_rule](name) if ops_rule.startswith("@") else ops_rule
        return category, library, ops
    return "other", _library(head), ""


# Fused GEMM kernels that also write their GEMM outputs to HBM beside their epilogue's result: a training forward
# saves them for its backward (kernels/ops/mlp_backward.py: fuselens_dual_gemm_glu_save_kernel stores g = x·Wgᵀ and
# u = x·Wuᵀ into gu [M, 2h] as well as act(g)·u). A GEMM output such a kernel replaces is still written; only its
# reads are avoided.
SAVES_GEMM_OUTPUTS = (r"^_?fuselens_\w*_save\w*_kernel$",)
_SAVES = tuple(re.compile(p) for p in SAVES_GEMM_OUTPUTS)


@dataclass(frozen=True)
class NameFacts:
    """What a kernel's own name rules in and out, where the classifier's table spells its ops out (the FuseLens
    kernels: 'mm+mm+act+mul' for the dual GEMM, 'mm+act_backward+mul' for the dH kernel)."""

    gemms: int | None = None  # GEMMs it runs: it never replaces more; None where the name does not say
    epilogue_only: bool = False  # a GEMM kernel whose other ops run after its GEMMs (no prologue): it reads its A
    # and B operands from HBM, so no kernel that wrote them can have been fused into it
    saves_gemm_outputs: bool = False  # it also writes its GEMM outputs (SAVES_GEMM_OUTPUTS)


@lru_cache(maxsize=4096)
def name_facts(name: str) -> NameFacts:
    """NameFacts of one kernel name (none for vendor kernels, capped per op call elsewhere, or Inductor's, read from
    their names' op lists)."""
    head = names.function_name(name)
    for rx, category, library, ops_rule in _COMPILED:
        if rx.search(head):
            if library != "Triton-user" or ops_rule.startswith("@"):
                return NameFacts()
            n = sum(op in names.GEMM_OPS for op in ops_rule.split("+"))
            return NameFacts(
                gemms=n or None,
                epilogue_only=bool(n) and category == "gemm",
                saves_gemm_outputs=bool(n) and any(x.search(head) for x in _SAVES),
            )
    return NameFacts()


def gemm_capacity(name: str) -> int | None:
    """How many GEMMs a kernel computes by its own name (NameFacts.gemms): a fused kernel never replaces more GEMMs
    than it runs."""
    return name_facts(name).gemms


# The launching op says what a shared kernel computes for it: ATen's group norm runs kernels named like layer norm's
# (RowwiseMomentsCUDAKernel, ComputeFusedParamsCUDAKernel, GammaBetaBackwardCUDAKernel1), RMS norm backward runs
# layer norm's cuComputeGradGammaBeta, and cuDNN runs forward-named kernels (volta_scudnn_…, winogradForward…,
# volta_sgemm_…) for the data and weight gradients of a convolution. Rows: (launching op regex, the kernel's ops
# regex, ops). First match wins; a kernel whose ops match no row keeps its name's answer.
# fmt: off
OP_RULES: tuple[tuple[str, str, str], ...] = (
    (r"^aten::(?:cudnn_|miopen_|mkldnn_)?convolution_backward_weight$", r"^(?:conv|mm)(?:\+|$)", "conv_wgrad"),
    (r"^aten::(?:cudnn_|miopen_|mkldnn_)?convolution_backward_input$", r"^(?:conv|mm)(?:\+|$)", "conv_dgrad"),
    (r"^aten::(?:cudnn_|miopen_)?convolution_backward$", r"^(?:conv|mm)(?:\+|$)", "conv_backward"),
    (r"^aten::(?:cudnn_|miopen_|_)?convolution$|^aten::conv\dd$", r"^mm$", "conv"),
    (r"^aten::native_group_norm_backward$", r"^(?:layer|rms|batch)_norm", "group_norm_backward"),
    (r"^aten::native_group_norm$", r"^(?:layer|rms|batch)_norm", "group_norm"),
    (r"^aten::_fused_rms_norm_backward$", r"^(?:layer|group|batch)_norm", "rms_norm_backward"),
    (r"^aten::(?:_fused_)?rms_norm$", r"^(?:layer|group|batch)_norm", "rms_norm"),
    (r"^aten::native_layer_norm_backward$", r"^(?:rms|group|batch)_norm", "layer_norm_backward"),
)
# fmt: on
_OP_COMPILED = tuple((re.compile(o), re.compile(k), ops) for o, k, ops in OP_RULES)


def refine_one(ops: str, op_name: str) -> str:
    """The ops of a kernel given its launching op (OP_RULES); the name's answer when no row applies."""
    for op_rx, ops_rx, new in _OP_COMPILED:
        if op_rx.search(op_name) and ops_rx.search(ops):
            return new
    return ops


def template_ops(name: str, ops: str, dims, types) -> str:
    """The ops of an Inductor GEMM template given its buffers (it runs under a cpu_op of its own name); by its name
    alone a template claims its GEMM only.

    Inductor names a template after the nodes whose code it holds AND the producers of its inputs:
    `triton_tem_fused__unsafe_view_gelu_mm_mul_t_view_1` is a plain mm over the gated product that a separate
    `triton_poi_fused__unsafe_view_gelu_mul_0` wrote (gelu and mul are the producers of its A). A fused prologue or
    epilogue shows in the buffers: an operand beyond A, B and the output (a bias, a residual, the second input of a
    product). Without one, the name's other ops are the inputs' producers, and the kernel is its GEMM alone."""
    dec = names.inductor(name)
    if dec is None or "flex_attention" in dec.words:
        return ops
    gemm, rest = _template_gemm(dec)
    ts = tensors(dims, types)
    g = gemm_reader.read(name, ts)
    if not rest or not isinstance(g, gemm_reader.Gemm):
        return ops
    used = {id(g.a), id(g.b), id(g.out)}
    if any(id(t) not in used for t in ts):
        return "+".join([gemm, *rest])
    return gemm


def refine_templates(gpu: pd.DataFrame) -> pd.Series:
    """template_ops for the rows of Inductor GEMM templates launched under their own cpu_op (others: ops as is),
    worked out once per distinct (name, input dims, input types)."""
    ops = gpu["ops"]
    names_ = gpu["name"].astype(object)
    codes, uniques = factorize(names_.to_numpy(dtype=object), na_sentinel=True)
    is_tem = np.array([isinstance(u, str) and gemm_reader.is_template(u) for u in uniques], dtype=bool)
    rows = np.flatnonzero(is_tem[codes]) if len(gpu) else np.zeros(0, dtype=np.int64)
    op_names = gpu["op_name"].to_numpy(dtype=object)
    rows = rows[names_.to_numpy(dtype=object)[rows] == op_names[rows]]
    if len(rows) == 0:
        return ops
    out = ops.to_numpy(dtype=object).copy()
    cache: dict = {}
    dims, types = gpu["input_dims"].to_numpy(dtype=object), gpu["input_types"].to_numpy(dtype=object)
    for i in rows:
        key = (names_.iat[i], out[i], repr(dims[i]), repr(types[i]))
        if key not in cache:
            cache[key] = template_ops(names_.iat[i], str(out[i]), dims[i], types[i])
        out[i] = cache[key]
    return pd.Series(out, index=ops.index, dtype=object)


def refine_by_op(ops: pd.Series, op_names: pd.Series) -> pd.Series:
    """refine_one over every row, worked out once per distinct (ops, op) pair (integer codes, no per-row text).
    Same index as ops."""
    o_codes, o_uni = factorize(ops.to_numpy(dtype=object))
    p_codes, p_uni = factorize(op_names.to_numpy(dtype=object))
    codes, uniq = pd.factorize(o_codes.astype(np.int64) * max(len(p_uni), 1) + p_codes)
    if len(uniq) == 0:
        return ops.copy()
    at = np.zeros(len(uniq), dtype=np.int64)
    at[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)  # first row of each pair
    answers = np.empty(len(at), dtype=object)
    for j, i in enumerate(at):
        o, p = o_uni[o_codes[i]], p_uni[p_codes[i]]
        answers[j] = refine_one(o, p) if isinstance(o, str) and isinstance(p, str) else o
    return pd.Series(answers[codes], index=ops.index, dtype=object)


def classify_names(names: pd.Series) -> pd.DataFrame:
    """Category, library and ops for every name; same index as names. Work is per UNIQUE name."""
    codes, uniques = pd.factorize(names.astype(object).fillna(""), sort=False)
    table = [classify_one(str(u)) for u in uniques]
    cats = [t[0] for t in table]
    libs = [t[1] for t in table]
    ops = [t[2] for t in table]
    take = pd.Index(codes)
    if len(table) == 0:
        return pd.DataFrame({"category": [], "library": [], "ops": []}, index=names.index, dtype=object)
    return pd.DataFrame(
        {
            "category": pd.Series(cats, dtype=object).take(take).to_numpy(),
            "library": pd.Series(libs, dtype=object).take(take).to_numpy(),
            "ops": pd.Series(ops, dtype=object).take(take).to_numpy(),
        },
        index=names.index,
    )
