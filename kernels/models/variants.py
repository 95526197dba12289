"""Variant registry: how a workload's forward is executed. Every variant wraps the SAME module (same weights).

  eager                 the module as written: cuBLAS GEMMs + ATen elementwise kernels
  compile               torch.compile(module) (default mode: Inductor fuses the elementwise tail)
  compile-max-autotune  torch.compile(module, mode="max-autotune"): Triton GEMM templates + CUDA graphs
  compile-triton-gemm   torch.compile with max_autotune, GEMMs through Triton templates only, no CUDA graphs: every
                        GEMM is a `triton_tem_fused_…` kernel whose cpu_op records its buffers (shapes for the analyzer)
  liger                 Liger-Kernel's GEGLU/SwiGLU MLP: cuBLAS GEMMs + Liger's gating kernel (gated MLPs only;
                        skipped with a clear message when liger-kernel is not installed)
  fuselens-gating       cuBLAS GEMMs + FuseLens's fused gating kernel (gated MLPs only)
  fuselens              the fastest FuseLens path for the shape, measured at the first call (kernels.models.dispatch):
                        dual-GEMM (gated) or GEMM+bias+GELU epilogue (plain) + cuBLAS for the last layer, or cuBLAS +
                        our gating kernel, or the ATen forward where fusion cannot pay
  fuselens-graph        fuselens captured in a CUDA graph and replayed (launch-bound shapes timed by GPU work)

`build(name, model, train)` returns a callable x -> y or raises VariantUnavailable with a one-line reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

VARIANTS = (
    "eager",
    "compile",
    "compile-max-autotune",
    "compile-triton-gemm",
    "liger",
    "fuselens-gating",
    "fuselens",
    "fuselens-graph",
)
DEFAULT_VARIANTS = ("eager", "compile", "liger", "fuselens")
# Decoder-layer workloads (kernels.models.layer): the attention implementation is part of the variant
#   eager             attn_implementation="eager" (matmul, + causal mask, fp32 softmax, cast, matmul)
#   sdpa              attn_implementation="sdpa", is_causal (flash / cuDNN / memory-efficient: PyTorch picks)
#   compile           torch.compile of the sdpa layer
#   compile-fuselens  the sdpa layer with its MLP through the FuseLens dual-GEMM op, then torch.compile
#   fuselens          the sdpa layer with the FuseLens MLP, not compiled
LAYER_VARIANTS = ("eager", "sdpa", "compile", "compile-max-autotune", "compile-fuselens", "fuselens")
DEFAULT_LAYER_VARIANTS = ("eager", "sdpa", "compile", "compile-fuselens")


# Inductor config for compile-triton-gemm: autotune GEMMs among Triton templates only (so every GEMM is a template
# kernel, as max-autotune picks on some shapes and GPUs), and no CUDA graphs (so each kernel keeps its cpu_op's shapes)
TRITON_GEMM_OPTIONS = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON", "triton.cudagraphs": False}


class VariantUnavailable(Exception):
    """This variant cannot run here (missing optional package, unsupported workload or mode); message says why."""


@dataclass(frozen=True)
class VariantInfo:
    name: str
    description: str
    trains: bool  # has a backward


INFO = {
    "eager": VariantInfo("eager", "PyTorch eager: cuBLAS GEMMs + ATen elementwise kernels", True),
    "compile": VariantInfo("compile", "torch.compile default mode (Inductor)", True),
    "compile-max-autotune": VariantInfo(
        "compile-max-autotune", "torch.compile mode=max-autotune (Triton GEMM templates, CUDA graphs)", True
    ),
    "compile-triton-gemm": VariantInfo(
        "compile-triton-gemm", "torch.compile max_autotune, Triton template GEMMs only, no CUDA graphs", True
    ),
    "liger": VariantInfo("liger", "Liger-Kernel GEGLU/SwiGLU MLP: cuBLAS GEMMs + Liger gating kernel", True),
    "fuselens-gating": VariantInfo("fuselens-gating", "cuBLAS GEMMs + FuseLens fused gating kernel", False),
    "fuselens": VariantInfo(
        "fuselens",
        "FuseLens: the measured-fastest of dual-GEMM (gated) / GEMM+bias+GELU epilogue (plain) + cuBLAS last layer,"
        " cuBLAS + FuseLens gating, or ATen; training: the FuseLens training op (fused activation backward) or ATen",
        True,
    ),
    "fuselens-graph": VariantInfo("fuselens-graph", "fuselens captured in a CUDA graph and replayed", False),
    "sdpa": VariantInfo("sdpa", "decoder layer with attn_implementation='sdpa' (flash / cuDNN / efficient)", True),
    "compile-fuselens": VariantInfo(
        "compile-fuselens", "torch.compile of the sdpa decoder layer with its MLP through the FuseLens dual GEMM", False
    ),
}


def liger_gating_fn(activation: str) -> Callable:
    """Liger's autograd gating function for this activation, or VariantUnavailable."""
    try:
        if activation == "gelu_tanh":
            from liger_kernel.ops.geglu import LigerGELUMulFunction

            return LigerGELUMulFunction.apply
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction

        return LigerSiLUMulFunction.apply
    except ImportError as exc:
        raise VariantUnavailable(f"liger-kernel is not installed (pip install liger-kernel): {exc}") from exc
    except Exception as exc:  # a liger release that does not import against this torch/triton
        raise VariantUnavailable(f"liger-kernel failed to import: {type(exc).__name__}: {exc}") from exc


def build(name: str, model, train: bool = False) -> Callable:
    """A callable x -> y for variant `name` over `model`."""
    import torch

    from kernels.models.workloads import GatedMLP

    if getattr(model, "is_decoder_layer", False):  # a decoder layer or a whole model (kernels.models.whole_model)
        return _build_layer(name, model, train)
    if name in LAYER_VARIANTS and name not in VARIANTS:
        raise VariantUnavailable(
            f"{name} applies to the decoder-layer and whole-model workloads (gemma-/llama-layer, -model) only"
        )
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; expected one of {VARIANTS}")
    info = INFO[name]
    if train and not info.trains:
        raise VariantUnavailable(f"{name} is forward-only (inference kernels, no backward); use eager or compile")
    gated = isinstance(model, GatedMLP)
    if name == "eager":
        return model
    if name == "compile":
        return torch.compile(model)
    if name == "compile-max-autotune":
        return torch.compile(model, mode="max-autotune")
    if name == "compile-triton-gemm":
        return torch.compile(model, options=TRITON_GEMM_OPTIONS)
    if name == "liger":
        if not gated:
            raise VariantUnavailable("liger has no kernel for the plain MLP (Linear-GELU-Linear); gated MLPs only")
        fn = liger_gating_fn(model.activation)
        return lambda x: model.down_proj(fn(model.gate_proj(x), model.up_proj(x)))
    if torch.version.hip is not None:  # a ROCm build: torch.cuda.is_available() is True there too
        raise VariantUnavailable(
            "FuseLens kernels are written for NVIDIA GPUs (inline PTX in their epilogues, TMA on sm_90) and this torch"
            " is a ROCm build; eager, compile and liger still run"
        )
    try:
        from kernels.models.fused_mlp import GraphReplay, fuselens_forward, fuselens_gating_forward
    except ImportError as exc:
        raise VariantUnavailable(f"FuseLens kernels need triton: {exc}") from exc
    if name == "fuselens-gating":
        if not gated:
            raise VariantUnavailable("fuselens-gating applies to gated MLPs (geglu, swiglu) only")
        return lambda x: fuselens_gating_forward(model, x)
    if name == "fuselens-graph":
        if not torch.cuda.is_available():
            raise VariantUnavailable("fuselens-graph replays a CUDA graph and needs a CUDA GPU")
        return GraphReplay(lambda x: fuselens_forward(model, x))
    return lambda x: fuselens_forward(model, x)


def _build_layer(name: str, model, train: bool) -> Callable:
    """Layer variants: each runs its own copy of the layer (same weights) under its attention implementation."""
    import torch

    if name not in LAYER_VARIANTS:
        raise VariantUnavailable(f"{name} is an MLP variant; decoder layers take {', '.join(LAYER_VARIANTS)}")
    if train and not INFO[name].trains:
        raise VariantUnavailable(f"{name} is forward-only (inference kernels, no backward); use eager, sdpa or compile")
    if train and name == "fuselens":  # the layer's MLP runs the inference dual GEMM (kernels.models.layer)
        raise VariantUnavailable("fuselens on a decoder layer is forward-only; train the MLP workloads instead")
    layer = model.variant_copy("eager" if name == "eager" else "sdpa")
    if name in ("eager", "sdpa"):
        return layer
    if name in ("fuselens", "compile-fuselens"):
        if torch.version.hip is not None:
            raise VariantUnavailable("FuseLens kernels are written for NVIDIA GPUs and this torch is a ROCm build")
        try:
            from kernels.models.layer import fuselens_mlp_forward

            for mlp in layer.mlps():
                mlp.forward = fuselens_mlp_forward(mlp, layer.activation)
        except ImportError as exc:
            raise VariantUnavailable(f"FuseLens kernels need triton: {exc}") from exc
        return layer if name == "fuselens" else torch.compile(layer)
    if name == "compile-max-autotune":
        return torch.compile(layer, mode="max-autotune")
    return torch.compile(layer)
