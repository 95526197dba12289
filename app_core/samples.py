"""The bundled traces in sample_traces/: discovered from the runner's manifest.json files, loaded like uploads.

A sample set is a folder holding a `kernels.profile` manifest.json and the <variant>.json.gz traces it lists
(sample_traces/ itself or one level of sub-folders). Paths come only from this listing, never from user input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import streamlit as st

from analyzer import api
from app_core import state
from app_core.text import esc

# The set the app opens on: the Hugging Face post's GEGLU MLP (64 x 128 tokens, d 768, hidden 3072, bf16).
DEFAULT_CASE = {"workload": "geglu", "batch": 64, "seq": 128, "d_model": 768, "hidden": 3072, "dtype": "bf16"}
INDEX_SCHEMA = "fuselens.samples/1"
# What the app opens on: the four variants the HF case is about (the set may hold more, e.g. fuselens-gating).
OPENING_VARIANTS = ("eager", "compile", "liger", "fuselens")
WORKLOAD_NAMES = {
    "geglu": "GEGLU MLP",
    "swiglu": "SwiGLU MLP",
    "plain": "MLP (Linear-GELU-Linear)",
    "gemma-layer": "Gemma-style decoder layer",
    "llama-layer": "Llama-style decoder layer",
    "llama-model": "Llama (whole model, Hugging Face)",
    "gemma-model": "Gemma (whole model, Hugging Face)",
}


@dataclass(frozen=True)
class SampleSet:
    name: str  # folder name relative to sample_traces/ ('.' for the top level)
    title: str  # human title: workload, shapes, dtype
    manifest: dict
    traces: tuple[tuple[dict, Path], ...]  # (variant entry, trace path) for variants that were recorded

    @property
    def is_default(self) -> bool:
        s = self.manifest.get("shapes") or {}
        m = self.manifest
        return (
            m.get("workload") == DEFAULT_CASE["workload"]
            and m.get("dtype") == DEFAULT_CASE["dtype"]
            and not m.get("train")
            and all(s.get(k) == DEFAULT_CASE[k] for k in ("batch", "seq", "d_model", "hidden"))
        )


def case_title(m: dict) -> str:
    """'GEGLU MLP · 64×128 tokens (M=8192) · d_model 768 · hidden 3072 · bf16 · forward' from a manifest."""
    s = m.get("shapes") or {}
    parts = [WORKLOAD_NAMES.get(str(m.get("workload")), str(m.get("workload") or "workload"))]
    if s:
        tokens = s.get("tokens") or (s.get("batch", 0) * s.get("seq", 0))
        parts.append(f"{s.get('batch')}×{s.get('seq')} tokens (M={tokens})")
        if s.get("heads"):  # a decoder layer (kernels.models.layer): hidden size, heads, MLP intermediate size
            parts.append(
                f"hidden {s.get('d_model')} · {s.get('heads')} q / {s.get('kv_heads')} KV heads × {s.get('head_dim')}"
                f" · intermediate {s.get('intermediate') or s.get('hidden')}"
            )
        else:
            parts.append(f"d_model {s.get('d_model')} · hidden {s.get('hidden')}")
    if m.get("dtype"):
        parts.append(str(m["dtype"]))
    parts.append("training step" if m.get("train") else "forward")
    return " · ".join(parts)


def read_set(folder: Path) -> SampleSet | None:
    try:
        manifest = api.read_manifest(folder / "manifest.json")  # typed at the boundary, like an upload's
    except api.SideFileError as err:
        state.log.warning("sample set %s left out: %s", folder.name, err)
        return None
    if not state.is_manifest(manifest):
        return None
    traces = []
    for v in manifest["variants"]:
        if not isinstance(v, dict) or v.get("status") != "done" or not v.get("trace"):
            continue
        p = folder / Path(str(v["trace"])).name  # a bare file name inside the set's folder, nothing else
        if p.is_file():
            traces.append((v, p))
    if not traces:
        return None
    name = "." if folder == state.SAMPLES_DIR else folder.name
    return SampleSet(name=name, title=case_title(manifest), manifest=manifest, traces=tuple(traces))


def _index() -> dict:
    """sample_traces/manifest.json (schema fuselens.samples/1): default case, case order and titles, or {}."""
    try:
        doc = json.loads((state.SAMPLES_DIR / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("schema") == INDEX_SCHEMA else {}


@st.cache_data(ttl=60, show_spinner=False)
def discover() -> list[SampleSet]:
    """Sample sets in sample_traces/ (top level and one folder down), the default (HF GEGLU) case first.

    Order and titles come from the top-level index when there is one; any other folder holding a runner manifest
    is still offered after them."""
    if not state.SAMPLES_DIR.is_dir():
        return []
    index = _index()
    cases = [c for c in index.get("cases", []) if isinstance(c, dict)]
    order = {str(c.get("folder")): i for i, c in enumerate(cases)}
    titles = {str(c.get("folder")): str(c.get("title")) for c in cases if c.get("title")}
    default = str(index.get("default_case") or "")
    folders = [state.SAMPLES_DIR] + sorted(p for p in state.SAMPLES_DIR.iterdir() if p.is_dir())
    sets = []
    for f in folders:
        s = read_set(f)
        if s is None:
            continue
        if s.name in titles:
            s = replace(s, title=titles[s.name])
        sets.append(s)

    def first(s: SampleSet) -> bool:
        return s.name == default if default else s.is_default

    return sorted(sets, key=lambda s: (not first(s), order.get(s.name, 1e9), s.name))


def load_set(sample: SampleSet, origin: str = "sample", variants: tuple[str, ...] | None = None) -> list[state.Run]:
    """Load the recorded variants of a set (all, or those named), parsed once per server, with manifest and ncu."""
    loaded = []
    context = state.context_from_manifest(sample.manifest)
    if origin == "sample":
        context["_sample_set"] = sample.name  # lets a shared link name the set (app_core.share)
    folder = sample.traces[0][1].parent
    traces = [(v, p) for v, p in sample.traces if variants is None or v.get("name") in variants] or list(sample.traces)
    n = len(traces)
    bar = st.progress(0.0, text=f"Loading {esc(sample.title, 120)}") if n > 1 else None
    for i, (variant, path) in enumerate(traces):
        if bar is not None:
            bar.progress(i / n, text=f"Parsing {path.name} ({i + 1}/{n})")
        measured = None
        variant, problems = state.clean_entry(variant, f"{folder.name}/manifest.json")
        state.add_errors(problems)
        if variant.get("ncu"):
            ncu_name = Path(str(variant["ncu"])).name
            try:
                measured = api.read_ncu(folder / ncu_name)
            except api.SideFileError as err:
                state.add_error(f"{err}; not attached")
                measured = None
            problem = state.ncu_refusal(ncu_name, measured) if measured is not None else None
            if problem:
                state.add_error(problem)
                measured = None
        run = state.add_trace(
            path.name,
            path.read_bytes(),
            origin=origin,
            label=str(variant.get("name") or path.name),
            context=context,
            variant=variant,
            measured=measured,
        )
        if run is not None:
            loaded.append(run)
    if bar is not None:
        bar.empty()
    state.prefer_baseline()
    return loaded
