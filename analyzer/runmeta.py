"""The runner's side files (manifest.json, <variant>.ncu.json) read at the boundary, into typed structs.

Side files are hand-editable JSON that travel with traces (uploads, run folders, sample sets), so every reader
takes them through here: bytes → a size cap → msgspec's JSON decode (its recursion guard refuses ~1,000-deep
nesting in C) → a depth, node-count and integer-range check → msgspec.convert into the structs below, which type
every field a page, the CLI or the diff reads. What comes out is the document as a plain dict (the rest of the
code and the Diff's JSON keep the shape they always had), now known to hold the right types where it is read.

Anything off-schema is one line naming the file and the field ("manifest.json: variants[0].name: expected
`str`, got `object`"), and the caller goes on without that side file. Figures stay loosely typed
(`int | float | str | bool | None`): a figure that is not a finite non-negative number is the figure's problem
(analyzer.diff.facts.side_number, entry_problems), not the file's, so the other figures still count.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import msgspec

MANIFEST_MAX_BYTES = 1 << 20  # a runner manifest is a few kB (the largest sample set's: 18 kB)
NCU_MAX_BYTES = 4 << 20  # one row per kernel of a step: the recorded ones are 16-18 kB; ~2,000 rows would be ~1 MB
MAX_DEPTH = 16  # ours nest 5 deep (variants[i].conditions.profiled.power_w.median)
MAX_NODES = 1_000_000  # values in one document; 4 MB of `[],` holds 1.4 M, each a Python object
INT_LIMIT = 1 << 63  # orjson (the CLI's --json) refuses integers outside 64 bits: such a figure is refused here
TEXT_MAX = 1 << 16  # one string; kernel names run to ~2 kB

Figure = int | float | str | bool | None  # judged per figure by facts.side_number, not per file
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
