"""analyzer.opinfo.classify on real kernel names: every distinct name in the real traces, plus the decodes the issue names."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

from analyzer.opinfo.classify import OTHER_ALLOWLIST, RULES, classify_names, classify_one
from analyzer.schema import CATEGORIES
from tests.conftest import ROOT, TRACES, loaded_trace, sample_trace_paths

SHARED_REAL = ROOT.parent / "shared" / "real_traces"  # the team's full copy; CI has it beside the clone


def sample_traces() -> list[Path]:
    """Kineto traces in sample_traces/ (not the .ncu.json Nsight Compute files beside them)."""
    return [p for p in sample_trace_paths() if ".ncu." not in p.name]


def _all_trace_paths() -> list[Path]:
    paths = list(TRACES.values()) + sample_traces()
    if SHARED_REAL.is_dir():
        paths += sorted(p for p in SHARED_REAL.rglob("*") if p.name.endswith((".json", ".json.gz")))
    return paths


@lru_cache(maxsize=1)
def all_real_names() -> dict[str, str]:
    """Every distinct GPU op name in every real trace → the first file it was seen in."""
    names: dict[str, str] = {}
    seen_files: set[str] = set()
    for p in _all_trace_paths():
        key = p.name if p.parent.parent.name != "sample_traces" else f"{p.parent.name}/{p.name}"
        if key in seen_files:  # tests/data and shared/ hold the same public files
            continue
        seen_files.add(key)
        for n in loaded_trace(p).gpu_ops["name"].unique():
            names.setdefault(str(n), p.name)
    return names


def _allowed_other(name: str) -> bool:
    return any(re.search(p, name) for p, _why in OTHER_ALLOWLIST)


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_every_real_kernel_name_has_a_category():
    names = all_real_names()
    assert len(names) > 500  # 600+ distinct names across the public traces: the collection really ran
    got = classify_names(pd.Series(list(names), dtype=object))
    unexplained = [n for n, c in zip(names, got["category"], strict=True) if c == "other" and not _allowed_other(n)]
    assert unexplained == [], "classify these (or allowlist with a reason):\n" + "\n".join(
        f"{names[n]}: {n[:160]}" for n in unexplained
    )
    assert set(got["category"]) <= set(CATEGORIES)


@pytest.mark.slow  # the slow tier (README): a sweep or a heavy check, several seconds
def test_allowlisted_names_really_are_other_and_exist():
    names = all_real_names()
    for pattern, why in OTHER_ALLOWLIST:
        hits = [n for n in names if re.search(pattern, n)]
        assert hits, f"allowlist entry {pattern!r} ({why}) matches no real kernel any more: remove it"
        assert all(classify_one(n)[0] == "other" for n in hits)


def _real(substring: str) -> str:
    """A real kernel name containing substring (so the decode tests run on what traces actually hold)."""
    hits = sorted(n for n in all_real_names() if substring in n)
    assert hits, f"no real kernel name contains {substring!r}"
    return hits[0]


@pytest.mark.parametrize(
    "substring, category, library, ops",
    [
        ("GeluCUDAKernelImpl", "pointwise", "ATen", "gelu"),
        ("silu_kernel(", "pointwise", "ATen", "silu"),
        (
            "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor",
            "pointwise",
            "ATen",
            "mul",
        ),
        ("CUDAFunctor_add<c10::BFloat16>", "pointwise", "ATen", "add"),
        ("AddFunctor<float>", "pointwise", "ATen", "add"),
        ("direct_copy_kernel_cuda", "pointwise", "ATen", "copy"),  # "elementwise" that is a copy
        ("FillFunctor<float>", "pointwise", "ATen", "fill"),  # … a fill
        (
            "index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_kernel_impl",
            "pointwise",
            "ATen",
            "index",
        ),
        ("masked_fill_kernel", "pointwise", "ATen", "masked_fill"),
        ("CatArrayBatchedCopy", "pointwise", "ATen", "cat"),
        ("void splitKreduce_kernel<float", "gemm", "cuBLAS", "splitk_reduce"),  # split-K reduce is GEMM work
        ("cublasLt::splitKreduce_kernel", "gemm", "cuBLASLt", "splitk_reduce"),
        ("cutlass_80_tensorop_bf16_s16816gemm_relu", "gemm", "CUTLASS", "mm+relu"),  # epilogue in the name
        ("nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN", "gemm", "cuBLASLt", "mm+bias"),
        ("nvjet_tst_192x8", "gemm", "cuBLASLt", "mm"),
        ("sm90_xmma_gemm_bf16bf16", "gemm", "cuBLAS", "mm"),
        ("volta_sgemm_128x64_nn", "gemm", "cuBLAS", "mm"),
        ("ampere_sgemm_128x128_tn", "gemm", "cuBLAS", "mm"),
        ("Cijk_Alik_Bljk", "gemm", "ROCm Tensile/hipBLASLt", "mm"),
        ("implicit_convolve_sgemm", "gemm", "cuDNN", "conv"),
        ("volta_scudnn_winograd_128x128_ldg1_ldg4_relu", "gemm", "cuDNN", "conv+relu"),
        ("nchwToNhwcKernel", "pointwise", "cuDNN", "copy"),
        ("pytorch_flash::flash_fwd_kernel", "attention", "flash-attn", "sdpa"),
        ("fmhaSm100aKernel", "attention", "TensorRT-LLM/FlashInfer", "sdpa"),
        ("ncclDevKernel_AllGather_RING_LL", "communication", "NCCL", "all_gather"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "communication", "NCCL", "all_reduce"),
        ("multimem_all_reduce_kernel", "communication", "PyTorch SymmMem", "all_reduce"),
        ("vectorized_layer_norm_kernel<c10::BFloat16", "normalization", "ATen", "layer_norm"),
        ("GammaBetaBackwardCUDAKernel<", "normalization", "ATen", "layer_norm_backward"),
        ("softmax_warp_forward", "normalization", "ATen", "softmax"),
        ("MIOpenBatchNormFwdTrainSpatial", "normalization", "MIOpen", "batch_norm"),
        ("ReduceOp<float, at::native::MeanOps", "reduction", "ATen", "mean"),
        ("cub::DeviceRadixSortOnesweepKernel", "reduction", "CUB", "sort"),
        ("triton_poi_fused__unsafe_view_mul_silu_2", "pointwise", "Triton-Inductor", "mul+silu"),
        ("triton_red_fused_add_mean_mul_pow_rsqrt_0", "normalization", "Triton-Inductor", "add+mean+mul+pow+rsqrt"),
        ("Memcpy HtoD (Pageable -> Device)", "memcpy", "CUDA/HIP runtime", "copy"),
        ("Memset (Device)", "memset", "CUDA/HIP runtime", "fill"),
        # our GPU recordings of the HF case (sample_traces/)
        ("triton_poi_fused__unsafe_view_gelu_mul_0", "pointwise", "Triton-Inductor", "gelu+mul"),
        (
            "triton_poi_fused__unsafe_view_gelu_gelu_backward_mul",
            "pointwise",
            "Triton-Inductor",
            "gelu+gelu_backward+mul",
        ),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "gemm", "cuBLASLt", "mm"),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TN", "gemm", "cuBLASLt", "mm+bias"),
        ("_geglu_tanh_forward_kernel", "pointwise", "Triton-user", "gelu+mul"),
        ("_geglu_tanh_backward_kernel", "pointwise", "Triton-user", "gelu_backward+mul"),
        # our own kernels, launched inside the fuselens:: custom ops (the activation is not recorded: 'act')
        ("fuselens_dual_gemm_glu_kernel", "gemm", "Triton-user", "mm+mm+act+mul"),
        ("fuselens_gemm_bias_act_kernel", "gemm", "Triton-user", "mm+bias+act"),
        ("fuselens_gemm_bias_act_ptr_kernel", "gemm", "Triton-user", "mm+bias+act"),
        ("fuselens_glu_gating_kernel", "pointwise", "Triton-user", "act+mul"),
    ],
)
def test_real_names_decode(substring, category, library, ops):
    assert classify_one(_real(substring)) == (category, library, ops)


@pytest.mark.parametrize(
    "name, expected",
    [
        # the Hugging Face post's torch.compile kernel: views dropped, Inductor's op order kept
        ("triton_poi_fused__unsafe_view_gelu_mul_0", ("pointwise", "Triton-Inductor", "gelu+mul")),
        # a GEMM template's name also lists its inputs' producers: by the name alone it claims its
        # GEMM only; its buffers add an epilogue (template_ops, tested on recorded templates)
        ("triton_tem_fused__unsafe_view_gelu_mm_mul_t_view_1", ("gemm", "Triton-template", "mm")),
        ("triton_tem_fused_addmm_relu_0", ("gemm", "Triton-template", "addmm")),
        ("triton_per_fused__softmax_0", ("normalization", "Triton-Inductor", "_softmax")),
        ("triton_red_fused_native_layer_norm_2", ("normalization", "Triton-Inductor", "native_layer_norm")),
        ("triton_poi_fused__to_copy_clone_3", ("pointwise", "Triton-Inductor", "copy")),
        # Liger's GEGLU kernel (user Triton) and our own
        ("_geglu_tanh_forward_kernel", ("pointwise", "Triton-user", "gelu+mul")),
        ("_swiglu_forward_kernel", ("pointwise", "Triton-user", "silu+mul")),
        ("_fuselens_geglu_fwd_kernel", ("pointwise", "Triton-user", "gelu+mul")),
        ("fuselens_mm_gelu_mul_kernel", ("gemm", "Triton-user", "mm+gelu+mul")),
        ("fuselens_dual_gemm_glu_ptr_kernel", ("gemm", "Triton-user", "mm+mm+act+mul")),  # decode shapes
        ("fuselens_dual_gemm_glu_2dot_kernel", ("gemm", "Triton-user", "mm+mm+act+mul")),  # bench only
        # earlier recordings, before the fuselens:: ops, named the same kernels by their first function names
        ("_gating_kernel", ("pointwise", "Triton-user", "act+mul")),
        ("_dual_gemm_kernel", ("gemm", "Triton-user", "mm+mm+act+mul")),
        ("_gemm_act_kernel", ("gemm", "Triton-user", "mm+bias+act")),
    ],
)
def test_named_decodes(name, expected):
    assert classify_one(name) == expected


def test_vectorised_over_unique_names_keeps_the_index():
    names = list(all_real_names())[:50]
    s = pd.Series(names * 200, index=pd.RangeIndex(10_000, 20_000), dtype=object)  # repeated, odd index
    got = classify_names(s)
    assert got.index.equals(s.index)
    assert list(got.columns) == ["category", "library", "ops"]
    one = {n: classify_one(n) for n in names}
    assert [tuple(r) for r in got.itertuples(index=False)] == [one[n] for n in s]


def test_empty_and_missing_names():
    assert classify_names(pd.Series([], dtype=object)).empty
    got = classify_names(pd.Series([None, ""], dtype=object))
    assert list(got["category"]) == ["other", "other"]


def test_table_is_small_data():
    # the table is data a reviewer reads in one screen: rows of (regex, category, library, ops rule)
    assert 20 <= len(RULES) <= 60
    for regex, category, _lib, _ops in RULES:
        re.compile(regex)
        assert category in CATEGORIES or category.startswith("@")


def test_template_arguments_never_pick_the_library():
    """vLLM's MoE finalize on B200 carries `cutlass::bfloat16_t` in its template arguments; it is
    a gather/reduce of the expert outputs, not a CUTLASS GEMM. A generic launcher's argument still counts."""
    t = loaded_trace(TRACES["b200_vllm"])
    k = t.kernels
    fin = k[k["name"].str.contains("finalizeKernelVecLoad", regex=False)]
    assert len(fin) > 0 and "cutlass::bfloat16_t" in fin["name"].iloc[0]
    assert set(zip(fin["category"], fin["library"], fin["ops"], strict=True)) == {
        ("reduction", "TensorRT-LLM", "moe_finalize")
    }
    assert (k[k["library"] == "CUTLASS"]["category"] == "gemm").all()
    # CUTLASS names its kernel in the launcher's template argument: that argument decides (epilogue included)
    relu = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(x::Params)"
    assert classify_one(relu) == ("gemm", "CUTLASS", "mm+relu")


def test_group_norm_kernels_are_group_norm():
    """ATen's group norm runs kernels named like layer norm's (RowwiseMomentsCUDAKernel,
    ComputeFusedParamsCUDAKernel, GammaBetaBackwardCUDAKernel1…); the launching op decides. RMS norm backward
    runs cuComputeGradGammaBeta. TraceLens's MI300 normalization trace runs all three."""
    k = loaded_trace(TRACES["mi300_norm"]).kernels
    by_op = k.groupby("op_name")["ops"].agg(set).to_dict()
    assert by_op["aten::native_group_norm"] == {"group_norm"}
    assert by_op["aten::native_group_norm_backward"] == {"group_norm_backward"}
    assert by_op["aten::_fused_rms_norm_backward"] == {"rms_norm_backward"}
    assert by_op["aten::native_layer_norm_backward"] == {"layer_norm_backward"}
    assert (k[k["op_name"].str.contains("_norm")]["category"] == "normalization").all()


def test_cudnn_backward_kernels_are_dgrad_and_wgrad():
    """cuDNN runs forward-named kernels (volta_scudnn_…_stridedB, winogradForward…, volta_sgemm)
    for a convolution's data and weight gradients; the launching op says which (legacy ResNet-50 trace)."""
    k = loaded_trace(TRACES["legacy_resnet"]).kernels
    conv = k[k["op_name"].str.contains("convolution") & (k["category"] == "gemm") & (k["ops"] != "conv_setup")]
    ops = conv.groupby("op_name")["ops"].agg(set).to_dict()
    assert ops["aten::cudnn_convolution_backward_weight"] == {"conv_wgrad"}
    assert ops["aten::cudnn_convolution_backward_input"] == {"conv_dgrad"}
    assert {o.split("+")[0] for o in ops["aten::cudnn_convolution"]} == {"conv"}  # conv, conv+relu
    # the name alone cannot say (volta_scudnn_128x64_stridedB_splitK_… runs for weight grads here)
    assert classify_one("volta_scudnn_128x128_stridedB_splitK_medium_nn_v1")[2] == "conv"
