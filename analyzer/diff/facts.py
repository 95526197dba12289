"""Facts a diff's numbers rest on: GPU, PyTorch version, workload, shapes, dtype — from the trace and, when the
FuseLens runner recorded it, the manifest.json beside the trace (kernels/lab/profile.py writes one per run folder).

Kineto traces carry no PyTorch version and no workload description, so without a manifest those facts are None.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

MANIFEST_MAX_BYTES = 1 << 20  # a runner manifest is a few kB; anything bigger is not one of ours
MANIFEST_KEY = "fuselens_manifest"  # where attach_manifest() stores the facts in TraceMeta.extra


def manifest_facts(trace_path: str | os.PathLike) -> dict | None:
    """Facts for one trace from the manifest.json in its folder, or None (no manifest, unreadable, or the trace
    is not listed in it). Never raises: a broken manifest only means fewer facts."""
    p = Path(trace_path)
    m = p.parent / "manifest.json"
    try:
        if not m.is_file() or m.stat().st_size > MANIFEST_MAX_BYTES:
            return None
        doc = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return manifest_doc_facts(doc, p.name)


def manifest_doc_facts(doc: Mapping, trace_name: str | os.PathLike) -> dict | None:
    """Facts for one trace from a runner manifest DOCUMENT (e.g. an uploaded manifest.json, parsed), or None when
    doc is not a mapping or lists no variant whose "trace" is trace_name's file name ('eager.json.gz';
    folders are ignored). Never raises."""
    if not isinstance(doc, Mapping):
        return None
    name = Path(trace_name).name
    for v in doc.get("variants") or []:
        if isinstance(v, Mapping) and v.get("trace") == name:
            return manifest_entry_facts(doc, v)
    return None


def manifest_entry_facts(doc: Mapping, entry: Mapping) -> dict:
    """Facts for one variant `entry` of a runner manifest `doc` (the run context: GPU, torch, workload, shapes,
    dtype, … from doc; variant name, median time and Nsight Compute DRAM bytes from entry). Missing or malformed
    facts are left out; never raises. doc's own "variants" list is not read, so a context without it works too."""
    doc = doc if isinstance(doc, Mapping) else {}
    entry = entry if isinstance(entry, Mapping) else {}
    gpu = doc.get("gpu") if isinstance(doc.get("gpu"), Mapping) else {}
    facts = {
        "variant": entry.get("name"),
        "gpu": gpu.get("name"),
        "torch": doc.get("torch"),
        "cuda": doc.get("cuda"),
        "triton": doc.get("triton"),
        "liger_kernel": doc.get("liger_kernel"),
        "driver": doc.get("driver"),
        "git_commit": doc.get("git_commit"),
        "workload": doc.get("workload"),
        "shapes": dict(doc["shapes"]) if isinstance(doc.get("shapes"), Mapping) else None,
        "dtype": doc.get("dtype"),
        "train": doc.get("train"),
        "median_us": entry.get("median_us"),
        "p10_us": entry.get("p10_us"),
        "p90_us": entry.get("p90_us"),
        "timing": doc.get("timing"),
        "dram_bytes_read": entry.get("dram_bytes_read"),
        "dram_bytes_write": entry.get("dram_bytes_write"),
    }
    return {k: v for k, v in facts.items() if v is not None}


def attach_manifest(trace, trace_path: str | os.PathLike) -> None:
    """Store manifest facts (if any) in trace.meta.extra so a Diff built from it can state them."""
    facts = manifest_facts(trace_path)
    if facts:
        trace.meta.extra[MANIFEST_KEY] = facts


def run_facts(meta) -> dict:
    """{'gpu', 'torch', 'workload', 'shapes', 'dtype', 'variant', …} for one trace; missing facts are absent."""
    extra = meta.extra if isinstance(getattr(meta, "extra", None), dict) else {}
    facts = dict(extra.get(MANIFEST_KEY) or {})
    if not facts.get("gpu") and meta.gpu_name:
        facts["gpu"] = meta.gpu_name
    return facts


_WORKLOAD_NAMES = {
    "geglu": "GEGLU MLP",
    "swiglu": "SwiGLU MLP",
    "plain": "Linear→GELU→Linear MLP",
}


def workload_parts(facts: dict) -> dict:
    """{'workload', 'shapes', 'dtype'} as short texts from manifest facts (each None when unknown):
    'GEGLU MLP (forward+backward)', '64×128 tokens, d=768 → 3072', 'bf16'."""
    w = facts.get("workload")
    workload = None
    if w:
        workload = _WORKLOAD_NAMES.get(str(w), str(w)) + (" (forward+backward)" if facts.get("train") else "")
    s = facts.get("shapes") or {}
    parts = []
    if s.get("batch") and s.get("seq"):
        parts.append(f"{s['batch']}×{s['seq']} tokens")
    elif s.get("tokens"):
        parts.append(f"{s['tokens']} tokens")
    if s.get("d_model") and s.get("hidden"):
        parts.append(f"d={s['d_model']} → {s['hidden']}")
    return {"workload": workload, "shapes": ", ".join(parts) or None, "dtype": facts.get("dtype")}


def workload_text(facts: dict) -> str | None:
    """'GEGLU MLP, 64×128 tokens, d=768 → 3072, bf16' from manifest facts; None without a workload."""
    p = workload_parts(facts)
    if not p["workload"]:
        return None
    return ", ".join(x for x in (p["workload"], p["shapes"], p["dtype"]) if x)


def diff_context(diff) -> dict:
    """{'gpu', 'workload', 'shapes', 'dtype'} for chart subtitles and the report headline, from the baseline run:
    the manifest when there is one, else the trace (GPU name; the GEMM with the most time stands for shapes)."""
    runs = diff.runs
    base = runs[0]
    gpus = []
    for r in runs:
        if r.gpu and r.gpu not in gpus:
            gpus.append(r.gpu)
    ctx = workload_parts(base.facts)
    ctx["gpu"] = " vs ".join(gpus) if gpus else None
    if not ctx["shapes"] and base.top_gemm:
        ctx["shapes"] = f"main GEMM {base.top_gemm}"  # carries its dtype
    elif not ctx["dtype"] and base.dtype:
        ctx["dtype"] = base.dtype
    return ctx


def measured_dram_bytes(facts: dict) -> float | None:
    """DRAM bytes read + written in one step, measured by Nsight Compute when the runner recorded them."""
    r, w = facts.get("dram_bytes_read"), facts.get("dram_bytes_write")
    if isinstance(r, (int, float)) and isinstance(w, (int, float)):
        return float(r + w)
    return None
