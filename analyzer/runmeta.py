"""Runner metadata: the side files the FuseLens runner writes beside its traces (manifest.json, <variant>.ncu.json),
read at the boundary into typed structs, and the facts a diff, the report and the pages state from them.

The runner (kernels.lab.profile) writes one manifest.json per run folder: the run context (GPU, torch, CUDA, workload,
shapes, dtype, measured ceilings, control probe spec) and one entry per variant (its trace, CUDA-event times, Nsight
Compute DRAM bytes, sampled GPU conditions). Kineto traces carry no PyTorch version and no workload description, so
without a manifest those facts are None.

Side files are hand-editable JSON that travel with traces (uploads, run folders, sample sets), so every reader
takes them through here: bytes → a size cap → msgspec's JSON decode (its recursion guard refuses ~1,000-deep
nesting in C) → a depth, node-count and integer-range check → msgspec.convert into the structs below, which type
every field a page, the CLI or the diff reads. What comes out is the document as a plain dict (the rest of the
code and the Diff's JSON keep the shape they always had), now known to hold the right types where it is read.
The structs' JSON Schema (``json_schemas``; ``python -m analyzer schema manifest|ncu``) is committed as
docs/schemas/*.schema.json, and the tests validate every bundled manifest against it.

Anything off-schema is one line naming the file and the field ("manifest.json: variants[0].name: expected
`str`, got `object`"), and the caller goes on without that side file. Figures stay loosely typed
(`int | float | str | bool | None`): a figure that is not a finite non-negative number is the figure's problem
(``side_number``, ``entry_problems``), not the file's, so the other figures still count.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import msgspec

MANIFEST_SCHEMA = "fuselens.profile/1"  # the "schema" string of the runner's manifest.json
MANIFEST_MAX_BYTES = 1 << 20  # a runner manifest is a few kB (the largest sample set's: 18 kB)
NCU_MAX_BYTES = 4 << 20  # one row per kernel of a step: the recorded ones are 16-18 kB; ~2,000 rows would be ~1 MB
MAX_DEPTH = 16  # ours nest 5 deep (variants[i].conditions.profiled.power_w.median)
MAX_NODES = 1_000_000  # values in one document; 4 MB of `[],` holds 1.4 M, each a Python object
INT_LIMIT = 1 << 63  # orjson (the CLI's --json) refuses integers outside 64 bits: such a figure is refused here
TEXT_MAX = 1 << 16  # one string; kernel names run to ~2 kB
SIDE_NUMBER_MAX = 1e18  # µs or bytes: above any real figure (1e18 µs is 31,000 years), and int() of it fits 64 bits
MANIFEST_KEY = "fuselens_manifest"  # where attach_manifest() stores the facts in TraceMeta.extra

Figure = int | float | str | bool | None  # judged per figure by side_number, not per file
Text = Annotated[str, msgspec.Meta(max_length=TEXT_MAX)]
Dim = Annotated[int, msgspec.Meta(ge=0, le=1 << 40)]  # a shape: tokens, d_model, heads …


class Gpu(msgspec.Struct):
    name: Text | None = None


class Shapes(msgspec.Struct):
    # no null: the dashboard multiplies batch by seq where tokens is missing (the runner writes every one as a number)
    batch: Dim = 0
    seq: Dim = 0
    tokens: Dim = 0
    d_model: Dim = 0
    hidden: Dim = 0
    heads: Dim = 0
    kv_heads: Dim = 0
    head_dim: Dim = 0
    intermediate: Dim = 0


class Ceilings(msgspec.Struct):
    copy_gbps: Figure = None
    matmul_tflops: Figure = None
    matmul_dtype: Text | None = None


class ProbeSpec(msgspec.Struct):
    roles: list[Text] | None = None
    controls: list[Text] | None = None
    error: Text | None = None


class Metric(msgspec.Struct):
    median: Figure = None
    min: Figure = None
    max: Figure = None


class Profiled(msgspec.Struct):
    sm_clock_mhz: Metric | None = None
    power_w: Metric | None = None
    temperature_c: Metric | None = None
    n_samples: Figure = None


class Conditions(msgspec.Struct):
    profiled: Profiled | None = None


class ProbeRecord(msgspec.Struct):
    kernels: list[Text] | None = None
    us: list[list[Figure]] | None = None


class Variant(msgspec.Struct):
    name: Text | None = None
    status: Text | None = None
    trace: Text | None = None
    ncu: Text | None = None
    message: Text | None = None
    median_us: Figure = None
    p10_us: Figure = None
    p90_us: Figure = None
    median_launch_bound_us: Figure = None
    dram_bytes_read: Figure = None
    dram_bytes_write: Figure = None
    warm_dram_bytes_read: Figure = None
    warm_dram_bytes_write: Figure = None
    conditions: Conditions | None = None
    control_probe: ProbeRecord | None = None
    fuselens_path: Text | None = None
    fuselens_fused: bool | None = None
    fuselens_probe_us: dict[Text, Figure] | None = None


class Manifest(msgspec.Struct):
    schema: Text | None = None
    gpu: Gpu | None = None
    torch: Text | None = None
    cuda: Text | None = None
    triton: Text | None = None
    liger_kernel: Text | None = None
    driver: Text | None = None
    git_commit: Text | None = None
    workload: Text | None = None
    dtype: Text | None = None
    timing: Text | None = None
    train: bool | None = None
    shapes: Shapes | None = None
    ceilings: Ceilings | None = None
    control_probe: ProbeSpec | None = None
    variants: list[Variant] = []


class NcuKernel(msgspec.Struct):
    kernel: Text = ""
    dram_bytes_read: Figure = None
    dram_bytes_write: Figure = None
    warm_dram_bytes_read: Figure = None
    warm_dram_bytes_write: Figure = None


class Ncu(msgspec.Struct):
    kernels: list[NcuKernel]
    metrics: list[Text] | None = None


class SideFileError(ValueError):
    """A side file that is not of the runner's schema. str(err) is one line: '<file>: <field>: <problem>'."""


def _where(where) -> str:
    return " ".join(str(where).split())[:200]


def _shape_problem(doc) -> str | None:
    """Depth, size and integer range of a decoded document, walked without recursion."""
    stack = [(doc, 1, "")]
    nodes = 0
    while stack:
        v, depth, path = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"more than {MAX_NODES:,} values; not a runner side file"
        if isinstance(v, dict):
            if depth > MAX_DEPTH:
                return f"{path or '$'}: nested deeper than {MAX_DEPTH} levels"
            stack.extend((x, depth + 1, f"{path}.{k}" if path else str(k)) for k, x in v.items())
        elif isinstance(v, list):
            if depth > MAX_DEPTH:
                return f"{path or '$'}: nested deeper than {MAX_DEPTH} levels"
            stack.extend((x, depth + 1, f"{path}[{i}]") for i, x in enumerate(v))
        elif isinstance(v, int) and not isinstance(v, bool) and not -INT_LIMIT <= v < INT_LIMIT:
            return f"{path or '$'}: integer {str(v)[:20]}… is outside 64 bits"
    return None


def decode_json(data: bytes, where, limit: int = MANIFEST_MAX_BYTES):
    """The plain document in `data` (a side file named `where`), after the size, depth, node and integer checks.
    Raises SideFileError (one line naming the file) otherwise."""
    w = _where(where)
    if len(data) > limit:
        raise SideFileError(f"{w}: {len(data):,} bytes is too big for a runner side file (limit {limit:,})")
    try:
        doc = msgspec.json.decode(data)
    except RecursionError:
        raise SideFileError(f"{w}: nested deeper than {MAX_DEPTH} levels; not a runner side file") from None
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as err:
        raise SideFileError(f"{w}: not valid JSON ({' '.join(str(err).split())[:120]})") from None
    problem = _shape_problem(doc)
    if problem:
        raise SideFileError(f"{w}: {problem}")
    return doc


def _typed(doc, kind: type, w: str):
    try:
        return msgspec.convert(doc, kind, strict=True)
    except msgspec.ValidationError as err:
        text = " ".join(str(err).split())
        msg, _, at = text.partition(" - at `")
        field = at.rstrip("`").removeprefix("$").lstrip(".") or "the top level"
        raise SideFileError(f"{w}: {field}: {msg[:1].lower() + msg[1:]}"[:300]) from None


def check_manifest(doc, where="manifest.json") -> Manifest:
    """The typed view of a decoded manifest document; SideFileError (one line naming file and field) if off-schema."""
    return _typed(doc, Manifest, _where(where))


def check_ncu(doc, where="<variant>.ncu.json") -> Ncu:
    """The typed view of a decoded Nsight Compute side file; SideFileError if off-schema."""
    return _typed(doc, Ncu, _where(where))


def load_manifest(data: bytes, where="manifest.json") -> dict:
    """A runner manifest from bytes: the checked plain document. Raises SideFileError."""
    doc = decode_json(data, where, MANIFEST_MAX_BYTES)
    check_manifest(doc, where)
    return doc


def load_ncu(data: bytes, where="<variant>.ncu.json") -> dict:
    """A runner <variant>.ncu.json from bytes: the checked plain document. Raises SideFileError."""
    doc = decode_json(data, where, NCU_MAX_BYTES)
    check_ncu(doc, where)
    return doc


def read_file(path: str | os.PathLike, limit: int = MANIFEST_MAX_BYTES) -> bytes | None:
    """The bytes of a side file on disk, or None when there is none. A FIFO, device or socket, a symlink loop,
    an unreadable or too-big file raise SideFileError (one line) without blocking: the file is opened with
    O_NONBLOCK and checked to be a regular file before a byte is read."""
    from analyzer.readers.files import open_regular  # one rule for every file FuseLens reads

    p = Path(path)
    try:
        f = open_regular(p, limit=limit, what="runner side file")
    except FileNotFoundError:
        return None
    except OSError as err:
        raise SideFileError(f"{_where(p)}: {err.strerror or err}") from None
    with f:
        return f.read(limit + 1)


def read_manifest(path: str | os.PathLike) -> dict | None:
    """The manifest at `path` (checked plain document), None when there is no such file; SideFileError else."""
    data = read_file(path, MANIFEST_MAX_BYTES)
    return None if data is None else load_manifest(data, path)


def read_ncu(path: str | os.PathLike) -> dict | None:
    """The <variant>.ncu.json at `path` (checked plain document), None when absent; SideFileError else."""
    data = read_file(path, NCU_MAX_BYTES)
    return None if data is None else load_ncu(data, path)


SCHEMA_FILES = {"manifest": "docs/schemas/runner_manifest.schema.json", "ncu": "docs/schemas/runner_ncu.schema.json"}


def json_schemas() -> dict[str, dict]:
    """{'manifest': JSON Schema of manifest.json, 'ncu': of <variant>.ncu.json}, generated from the structs above
    (msgspec.json.schema). Unknown keys are allowed (the runner may add facts before a reader uses them)."""
    titles = {"manifest": "FuseLens runner manifest.json", "ncu": "FuseLens runner <variant>.ncu.json"}
    out = {}
    for kind, struct in (("manifest", Manifest), ("ncu", Ncu)):
        doc = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": titles[kind]}
        out[kind] = {**doc, **msgspec.json.schema(struct)}
    return out


def schema_text(kind: str) -> str:
    """The committed text of SCHEMA_FILES[kind] (`python -m analyzer schema KIND` prints it; a test checks both)."""
    return json.dumps(json_schemas()[kind], indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------------- facts
def manifest_facts(trace_path: str | os.PathLike) -> dict | None:
    """Facts for one trace from the manifest.json in its folder, or None (no manifest, unreadable, or the trace
    is not listed in it). Never raises: a broken manifest only means fewer facts."""
    doc, _ = manifest_beside(trace_path)
    return None if doc is None else manifest_doc_facts(doc, Path(trace_path).name)


def manifest_beside(trace_path: str | os.PathLike) -> tuple[dict | None, str | None]:
    """(the manifest.json beside `trace_path`, checked here, or None; one line saying why a
    manifest that is there was left out, or None). Never raises and never blocks (a FIFO there is refused)."""
    m = Path(trace_path).parent / "manifest.json"
    try:
        return read_manifest(m), None
    except SideFileError as err:
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


# Figures a runner manifest entry holds as numbers (the runner writes them so); anything else there is damage.
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


def side_number(value) -> float | None:
    """A runner side-file figure (µs, bytes) as a float, or None when it is not a finite non-negative number.

    Side files are hand-editable JSON: `"median_us": "abc"`, `true`, `-1` or `1e400` must mean "not recorded",
    never a crash or an impossible figure further down; so must `1e308` (`int()` of it overflows 64-bit JSON)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) and 0 <= v <= SIDE_NUMBER_MAX else None


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


def attach_manifest(
    trace, trace_path: str | os.PathLike | None = None, *, manifest: Mapping | None = None, entry: Mapping | None = None
) -> None:
    """Store a run's manifest facts (if any) in trace.meta.extra[MANIFEST_KEY], where run_facts (and so a Diff built
    from the trace) finds them: from the manifest.json beside `trace_path`, or from a `manifest` document (an upload,
    a sample set; its "variants" list is not read) and the run's variant `entry` in it."""
    if manifest is not None:
        facts = manifest_entry_facts(manifest, entry or {})
    else:
        facts = manifest_facts(trace_path) if trace_path is not None else None
    if facts:
        trace.meta.extra[MANIFEST_KEY] = facts
    else:  # a run whose manifest states nothing keeps no facts from an earlier one
        trace.meta.extra.pop(MANIFEST_KEY, None)


def ncu_problem(doc, where: str | None = None) -> str | None:
    """What is malformed in a runner <variant>.ncu.json document ({'kernels': [{'kernel', 'dram_bytes_read',
    'dram_bytes_write'}, …]}), or None; prefixed with '<where>: ' when the file is named. One bad counter makes the
    step's measured total unknowable, so the caller refuses the whole file rather than summing around the hole."""
    why = _ncu_problem(doc)
    return f"{where}: {why}" if why and where else why


def _ncu_problem(doc) -> str | None:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("kernels"), list):
        return "not a runner Nsight Compute file (no 'kernels' list)"
    for i, k in enumerate(doc["kernels"]):
        if not isinstance(k, Mapping):
            return f"kernel entry {i} is not an object"
        for f in ("dram_bytes_read", "dram_bytes_write"):
            if f in k and side_number(k[f]) is None:
                return f"kernel {i}: {f} is {json.dumps(k[f])[:40]}, not a finite non-negative number"
    return None
