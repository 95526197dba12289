"""Who can take a fusion opportunity today, and what our own kernels measured where they apply.

TAKERS maps a group's kind / pattern to the tools that fuse it, each with how to turn it on. A plan for a set of
takers (plan.choose) takes, of overlapping opportunities, the one those takers save most with.

FuseLens kernels carry their measured speed from bench/results/kernels_<gpu>.json (`python -m kernels.bench`,
CUDA events, L2 flushed before every call): the MLP forward at the GEMM problem of the opportunity (M = tokens,
K = d_model, N = hidden, dtype), or the gating kernel at [M, N]. A shape the bench did not run says so; no figure
is carried over from another shape.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from analyzer import gpus

COMPILE = "torch.compile"
AUTOTUNE = "torch.compile max-autotune"
SDPA = "SDPA"
LIGER = "Liger"
FL_DUAL = "FuseLens dual GEMM"
FL_ACT = "FuseLens GEMM+act"
FL_GATING = "FuseLens gating"
FUSED_OPT = "fused optimizer"
FUSELENS = (FL_DUAL, FL_ACT, FL_GATING)
ALL = (COMPILE, AUTOTUNE, SDPA, LIGER, FL_DUAL, FL_ACT, FL_GATING, FUSED_OPT)
# The FuseLens MLP paths train (fuselens::glu_mlp_train / gelu_mlp_train: kernels/models/train_ops.py); the
# standalone gating kernel (the fuselens-gating variant) is forward-only
INFERENCE_ONLY = frozenset({FL_GATING})

HOW = {
    COMPILE: "torch.compile(model): Inductor fuses the chain into one Triton kernel",
    AUTOTUNE: 'torch.compile(model, mode="max-autotune"): Triton GEMM templates with the pointwise work as epilogue',
    SDPA: 'F.scaled_dot_product_attention / attn_implementation="sdpa" (flash / cuDNN / memory-efficient kernel)',
    LIGER: "liger_kernel.transformers.apply_liger_kernel_to_<model>() (Triton kernels for norm, RoPE, gating, "
    "cross-entropy)",
    FL_DUAL: "fuselens::dual_gemm_glu (kernels/ops/dual_gemm.py; the fuselens variant of kernels.profile)",
    FL_ACT: "fuselens::gemm_bias_act (kernels/ops/gemm_act.py; the fuselens variant of kernels.profile)",
    FL_GATING: "fuselens::glu_gating (kernels/ops/gating.py; the fuselens-gating variant of kernels.profile)",
    FUSED_OPT: "torch.optim.AdamW(..., fused=True) (one multi-tensor kernel per step)",
}


def takers_for(kind: str, pattern: str) -> list[str]:
    """The tools that fuse a group of this kind / pattern (analyzer.opportunities.detect names them)."""
    p = pattern.lower()
    if kind in ("attention", "attention_backward"):
        return [SDPA]
    if kind == "optimizer":
        return [FUSED_OPT, COMPILE]
    if kind == "dual_gemm":
        return [FL_DUAL]
    if kind == "epilogue":
        return [FL_ACT, AUTOTUNE] if any(a in p for a in ("gelu", "relu", "silu")) else [AUTOTUNE]
    if "optimizer" in p:
        return [FUSED_OPT, COMPILE]
    if "gating" in p or "gated activation" in p:
        return [COMPILE, LIGER, FL_GATING] if "backward" not in p else [COMPILE, LIGER]
    if "rmsnorm" in p or "layernorm" in p or "rope" in p or "cross-entropy" in p:
        return [COMPILE, LIGER]
    return [COMPILE]


def available(takers: list[str], training: bool, amd: bool = False) -> tuple[list[str], list[str]]:
    """(takers usable in this run, notes on those left out): FuseLens ops are inference-only, and NVIDIA-only (their
    inline PTX does not compile on a ROCm build of torch: docs/KERNELS.md)."""
    kept, notes = list(takers), []
    for t in takers:
        if t in tk_fuselens and amd:
            kept.remove(t)
            notes.append(f"{t}: NVIDIA only (its inline PTX does not compile on ROCm)")
        elif t in INFERENCE_ONLY and training:
            kept.remove(t)
            notes.append(f"{t}: inference only (the standalone gating op has no backward)")
    return kept, notes


tk_fuselens = frozenset(FUSELENS)


BENCH_DIR = Path(__file__).resolve().parents[2] / "bench" / "results"


def gpu_slug(gpu_name: str | None) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100_80gb_hbm3' (bench/results/kernels_<slug>.json)."""
    s = re.sub(r"[^a-z0-9]+", "_", str(gpu_name or "").lower()).strip("_")
    return s.removeprefix("nvidia_")


@lru_cache(maxsize=8)
def _bench(slug: str) -> tuple[dict | None, str]:
    path = BENCH_DIR / f"kernels_{slug}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")), f"bench/results/{path.name}"
    except (OSError, ValueError):
        return None, f"bench/results/{path.name}"


def measured(taker: str, gpu_name: str | None, m: int, k: int, n: int, dtype: str, act: str = "") -> str | None:
    """One line: what the FuseLens kernel measured at this problem on this GPU, or why there is no figure."""
    if taker not in FUSELENS:
        return None
    doc, where = _bench(gpu_slug(gpu_name))
    if doc is None:
        return f"not benchmarked on {gpu_name or 'this GPU'} ({where} absent)"
    if taker == FL_GATING:
        for row in doc.get("gating") or []:
            if row.get("shape") == f"{m}x{n}" and row.get("dtype") == dtype and row.get("impl") == "fuselens":
                if act and act not in str(row.get("activation", "")):
                    continue
                return (
                    f"measured {row['us']:.1f} µs at [{m}, {n}] {dtype} {row.get('activation', '')} "
                    f"({row.get('gbps', 0):,.0f} GB/s; eager's two kernels: "
                    f"{_gating_eager(doc, m, n, dtype, row.get('activation')):s}) — {where}"
                )
        return f"gating kernel not benchmarked at [{m}, {n}] {dtype} ({where})"
    row = _mlp_row(doc, taker, m, k, n, dtype)
    if row is not None:
        v = row.get("variants") or {}
        fl, eager, comp = (v.get(x, {}).get("us") for x in ("fuselens", "eager", "compile"))
        parts = [f"{row.get('workload')} MLP forward measured {fl:.1f} µs at M={m} K={k} N={n} {dtype}"]
        if eager:
            parts.append(f"eager {eager:.1f} µs")
        if comp:
            parts.append(f"compile {comp:.1f} µs")
        return ", ".join(parts) + f" — {where}"
    kind = "plain" if taker == FL_ACT else "gated"
    return f"{kind} MLP not benchmarked at M={m} K={k} N={n} {dtype} ({where})"


# The MLP a FuseLens GEMM taker stands for in the forward bench: GEMM+act is the plain MLP's up projection,
# the dual GEMM the gated MLPs' gate/up pair (the bench's `workload` column).
_BENCH_WORKLOADS = {FL_ACT: ("plain",), FL_DUAL: ("geglu", "swiglu")}


def _mlp_row(doc: dict, taker: str, m: int, k: int, n: int, dtype: str) -> dict | None:
    """The forward-bench row of this taker's MLP at exactly this problem with a FuseLens time, or None."""
    for row in doc.get("shapes") or []:
        if row.get("workload") not in _BENCH_WORKLOADS.get(taker, ()):
            continue
        if (row.get("tokens"), row.get("d_model"), row.get("hidden"), row.get("dtype")) != (m, k, n, dtype):
            continue
        if ((row.get("variants") or {}).get("fuselens") or {}).get("us"):
            return row
    return None


def measured_saving_us(
    taker: str, gpu_name: str | None, m: int, k: int, n: int, dtype: str
) -> tuple[float, str] | None:
    """(µs a FuseLens GEMM kernel saved at exactly this MLP problem on this GPU, the arithmetic), or None.

    The saving is the forward bench's eager MLP time minus its FuseLens time at the same (M, K, N, dtype): what our
    kernel measured, not the cuBLAS-rate ideal. On an H200 the plain 8192 × 768 → 3072 MLP's GEMM+GELU kernel takes
    about 78 µs where cuBLAS's GEMM alone takes 57.6 µs, so the ideal saving (37.7 µs) is twice what it saved."""
    if taker not in (FL_ACT, FL_DUAL):
        return None
    for doc, where, other in _benches_for(gpu_name):
        row = _mlp_row(doc, taker, m, k, n, dtype)
        v = (row or {}).get("variants") or {}
        eager = (v.get("eager") or {}).get("us")
        if row is None or not eager or "launch_bound_us" in v["fuselens"]:
            # a launch-bound row (the bench flags rows of <= 512 tokens): its µs are the host's pace, not the GPU's
            # (the plain MLP at one token: 18.9 µs eager in the bench, 11.2 µs busy in the recorded trace)
            continue
        fl = v["fuselens"]["us"]
        on = f", on the {other}" if other else ""
        return eager - fl, (
            f"{taker}: measured at this problem ({row.get('workload')} MLP forward M={m} K={k} N={n} {dtype}, "
            f"{where}{on}): eager {eager:,.1f} µs − FuseLens {fl:,.1f} µs = {eager - fl:,.1f} µs saved"
        )
    return None


def _benches_for(gpu_name: str | None) -> list[tuple[dict, str, str]]:
    """(bench doc, its path, '' or the other GPU's note): this GPU's bench, then the bench of a GPU with the same
    dense tensor peaks. The H100 SXM5 and H200 SXM are one GH100 chip (989.5 bf16 TFLOP/s, 132 SMs) with different
    HBM: the plain HF MLP's GEMM+GELU saved 18.3 µs in the H100 bench and 17.9 µs between the H200's recorded
    eager and FuseLens runs (sample_traces/h200_plain_8192tok_bf16), so a compute-bound kernel's saving carries."""
    out = []
    doc, where = _bench(gpu_slug(gpu_name))
    if doc is not None:
        out.append((doc, where, ""))
    me = gpus.lookup([], gpu_name)
    if me is None:
        return out
    for path in sorted(BENCH_DIR.glob("kernels_*.json")):
        slug = path.stem.removeprefix("kernels_")
        if slug == gpu_slug(gpu_name) or slug.startswith("train_"):
            continue
        other_doc, other_where = _bench(slug)
        name = (((other_doc or {}).get("env") or {}).get("gpu") or {}).get("name")
        spec = gpus.lookup([], name)
        if spec is not None and spec.name != me.name and _same_compute(spec, me):
            note = f"{name}: same dense tensor peaks as this {me.name}, which was not benchmarked at this problem"
            out.append((other_doc, other_where, note))
    return out


def _same_compute(a, b) -> bool:
    return all(a.tflops.get(d) == b.tflops.get(d) for d in ("bf16", "fp16", "fp32"))


def _gating_eager(doc: dict, m: int, n: int, dtype: str, act) -> str:
    for row in doc.get("gating") or []:
        same = row.get("shape") == f"{m}x{n}" and row.get("dtype") == dtype and row.get("activation") == act
        if same and str(row.get("impl", "")).startswith("eager"):
            return f"{row['us']:.1f} µs"
    return "not measured"
