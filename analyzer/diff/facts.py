"""Facts a diff's numbers rest on: GPU, PyTorch version, workload, shapes, dtype — from the trace and, when the
FuseLens runner recorded it, the manifest.json beside the trace (kernels/lab/profile.py writes one per run folder).

Kineto traces carry no PyTorch version and no workload description, so without a manifest those facts are None.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

from analyzer import runmeta

MANIFEST_MAX_BYTES = runmeta.MANIFEST_MAX_BYTES  # a runner manifest is a few kB; anything bigger is not one of ours
SIDE_NUMBER_MAX = 1e18  # µs or bytes: above any real figure (1e18 µs is 31,000 years), and int() of it fits 64 bits
MANIFEST_KEY = "fuselens_manifest"  # where attach_manifest() stores the facts in TraceMeta.extra


def manifest_facts(trace_path: str | os.PathLike) -> dict | None:
    """Facts for one trace from the manifest.json in its folder, or None (no manifest, unreadable, or the trace
    is not listed in it). Never raises: a broken manifest only means fewer facts."""
    doc, _ = manifest_beside(trace_path)
    return None if doc is None else manifest_doc_facts(doc, Path(trace_path).name)


def manifest_beside(trace_path: str | os.PathLike) -> tuple[dict | None, str | None]:
    """(the manifest.json beside `trace_path`, checked by analyzer.runmeta, or None; one line saying why a
    manifest that is there was left out, or None). Never raises and never blocks (a FIFO there is refused)."""
    m = Path(trace_path).parent / "manifest.json"
    try:
        return runmeta.read_manifest(m), None
    except runmeta.SideFileError as err:
        return None, f"{err}; run context left out"


def manifest_note(trace_path: str | os.PathLike) -> str | None:
    """One line when the manifest.json beside `trace_path` is not of the runner's schema (the command goes on
    without it), else None."""
    return manifest_beside(trace_path)[1]


def manifest_doc_facts(doc: Mapping, trace_name: str | os.PathLike) -> dict | None:
    """Facts for one trace from a runner manifest DOCUMENT (e.g. an uploaded manifest.json, parsed), or None when
    doc is not a mapping or lists no variant whose "trace" is trace_name's file name ('eager.json.gz';
    folders are ignored). Never raises."""
    if not isinstance(doc, Mapping):
        return None
    name = Path(trace_name).name
    variants = doc.get("variants")
    for v in variants if isinstance(variants, list) else []:
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
        "median_us": side_number(entry.get("median_us")),
        "p10_us": side_number(entry.get("p10_us")),
        "p90_us": side_number(entry.get("p90_us")),
        "timing": doc.get("timing"),
        "dram_bytes_read": side_number(entry.get("dram_bytes_read")),
        "dram_bytes_write": side_number(entry.get("dram_bytes_write")),
        "warm_dram_bytes_read": side_number(entry.get("warm_dram_bytes_read")),
        "warm_dram_bytes_write": side_number(entry.get("warm_dram_bytes_write")),
        "conditions": recorded_conditions(entry),
        "control_probe": recorded_probe(doc, entry),
        "ceilings": recorded_ceilings(doc),
    }
    return {k: v for k, v in facts.items() if v is not None}


def recorded_ceilings(doc: Mapping) -> dict | None:
    """{'copy_gbps', 'matmul_tflops'} the runner measured on the run's GPU (manifest "ceilings"), malformed figures
    left out; None when none were recorded."""
    c = doc.get("ceilings") if isinstance(doc.get("ceilings"), Mapping) else {}
    out = {k: side_number(c.get(k)) for k in ("copy_gbps", "matmul_tflops")}
    out = {k: v for k, v in out.items() if v}
    return out or None


CONDITION_METRICS = (("sm_clock_mhz", "MHz"), ("power_w", "W"), ("temperature_c", "°C"))


def recorded_conditions(entry: Mapping) -> dict | None:
    """The GPU conditions the runner sampled while a variant's steps ran (kernels/lab/conditions.py):
    {'sm_clock_mhz': {'median', 'min', 'max'}, 'power_w': …, 'temperature_c': …, 'n_samples'} from the entry's
    conditions.profiled, or None. Malformed figures are left out (a hand-edited side file never shows an
    impossible clock)."""
    cond = entry.get("conditions") if isinstance(entry, Mapping) else None
    prof = cond.get("profiled") if isinstance(cond, Mapping) else None
    if not isinstance(prof, Mapping):
        return None
    out: dict = {}
    for key, _unit in CONDITION_METRICS:
        m = prof.get(key)
        if isinstance(m, Mapping):
            vals = {k: side_number(m.get(k)) for k in ("median", "min", "max")}
            if vals["median"] is not None:
                out[key] = {k: v for k, v in vals.items() if v is not None}
    if not out:
        return None
    n = side_number(prof.get("n_samples"))
    if n is not None:
        out["n_samples"] = int(n)
    return out


PROBE_MAX_TURNS = 1000


def recorded_probe(doc: Mapping, entry: Mapping) -> dict | None:
    """The runner's control probe for one variant (kernels/lab/control.py): {'spec': the manifest's probe spec,
    'roles': ['settle', 'gemm', 'copy'], 'controls': roles that are controls, 'kernels': [name per role], 'us':
    [[µs per role] per turn]}, or None (not recorded, an error, or malformed: a hand-edited side file never yields a
    factor)."""
    spec = doc.get("control_probe") if isinstance(doc, Mapping) else None
    got = entry.get("control_probe") if isinstance(entry, Mapping) else None
    if not isinstance(spec, Mapping) or "error" in spec or not isinstance(got, Mapping):
        return None
    roles, controls, kernels, us = spec.get("roles"), spec.get("controls"), got.get("kernels"), got.get("us")
    if not (isinstance(roles, list) and isinstance(controls, list) and isinstance(kernels, list)):
        return None
    if not all(isinstance(x, str) for x in (*roles, *controls)):
        return None  # a role that is a list or object: no factor (set() of it would raise)
    if not (set(controls) <= set(roles) and len(kernels) == len(roles) and all(isinstance(k, str) for k in kernels)):
        return None
    if not isinstance(us, list) or not 0 < len(us) <= PROBE_MAX_TURNS:
        return None
    turns = []
    for row in us:
        vals = [side_number(x) for x in row] if isinstance(row, list) and len(row) == len(roles) else [None]
        if any(v is None or v <= 0 for v in vals):
            return None
        turns.append(vals)
    return {
        "spec": {k: v for k, v in spec.items() if k != "error"},
        "roles": list(roles),
        "controls": list(controls),
        "kernels": list(kernels),
        "us": turns,
    }


def conditions_text(cond: Mapping | None) -> str | None:
    """'SM 1,980 MHz (1,965–1,980) · 512 W · 48 °C' from recorded_conditions(); None when nothing was recorded."""
    if not isinstance(cond, Mapping):
        return None
    parts = []
    for key, unit in CONDITION_METRICS:
        m = cond.get(key)
        if not isinstance(m, Mapping) or m.get("median") is None:
            continue
        text = f"{m['median']:,.0f} {unit}"
        lo, hi = m.get("min"), m.get("max")
        if key == "sm_clock_mhz":
            text = "SM " + text
            if lo is not None and hi is not None and lo != hi:
                text += f" ({lo:,.0f}–{hi:,.0f})"
        parts.append(text)
    return " · ".join(parts) or None


# Figures a runner manifest entry holds as numbers (kernels/profile.py writes them); anything else there is damage.
ENTRY_NUMBERS = ("median_us", "p10_us", "p90_us", "median_launch_bound_us", "dram_bytes_read", "dram_bytes_write")


def entry_problems(entry: Mapping) -> list[str]:
    """What is malformed in one manifest variant entry: 'median_us is "abc", not a number' (empty when fine)."""
    out = []
    for k in ENTRY_NUMBERS:
        v = entry.get(k) if isinstance(entry, Mapping) else None
        if v is not None and side_number(v) is None:
            out.append(f"{k} is {json.dumps(v)[:40]}, not a finite non-negative number")
    return out


def manifest_problem(trace_path: str | os.PathLike) -> str | None:
    """One line naming the manifest.json beside `trace_path` and what is malformed in this trace's entry, or None
    (no manifest, a well-formed one, or one not of the runner's schema: see manifest_note). The CLI refuses such a
    folder (exit 2) rather than reporting around a figure it would state."""
    p = Path(trace_path)
    m = p.parent / "manifest.json"
    doc, _ = manifest_beside(p)  # an off-schema manifest is left out with one line (manifest_note), not refused
    if not isinstance(doc, Mapping):
        return None
    variants = doc.get("variants")
    for v in variants if isinstance(variants, list) else []:
        if isinstance(v, Mapping) and v.get("trace") == p.name:
            bad = entry_problems(v)
            if bad:
                return f"{m}: variant {json.dumps(str(v.get('name')))[:60]}: " + "; ".join(bad)
    return None


def ncu_problem(doc) -> str | None:
    """What is malformed in a runner <variant>.ncu.json document ({'kernels': [{'kernel', 'dram_bytes_read',
    'dram_bytes_write'}, …]}), or None. One bad counter makes the step's measured total unknowable, so the caller
    refuses the whole file rather than summing around the hole."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("kernels"), list):
        return "not a runner Nsight Compute file (no 'kernels' list)"
    for i, k in enumerate(doc["kernels"]):
        if not isinstance(k, Mapping):
            return f"kernel entry {i} is not an object"
        for f in ("dram_bytes_read", "dram_bytes_write"):
            if f in k and side_number(k[f]) is None:
                return f"kernel {i}: {f} is {json.dumps(k[f])[:40]}, not a finite non-negative number"
    return None


def side_number(value) -> float | None:
    """A runner side-file figure (µs, bytes) as a float, or None when it is not a finite non-negative number.

    Side files are hand-editable JSON: `"median_us": "abc"`, `true`, `-1` or `1e400` must mean "not recorded",
    never a crash or an impossible figure further down; so must `1e308` (`int()` of it overflows 64-bit JSON)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) and 0 <= v <= SIDE_NUMBER_MAX else None


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
    "gemma-layer": "Gemma-style decoder layer",
    "llama-layer": "Llama-style decoder layer",
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


def measured_dram_bytes(facts: dict, warm: bool = False) -> float | None:
    """DRAM bytes read + written in one step, measured by Nsight Compute when the runner recorded them: flushed
    (ncu's default cache flush before every kernel) or warm (`--cache-control none`, steps in a row: what the step
    really moves, docs/KERNELS.md)."""
    pre = "warm_" if warm else ""
    r, w = facts.get(f"{pre}dram_bytes_read"), facts.get(f"{pre}dram_bytes_write")
    if isinstance(r, (int, float)) and isinstance(w, (int, float)):
        return float(r + w)
    return None
