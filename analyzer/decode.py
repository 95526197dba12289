"""Typed, columnar decode of Kineto trace events.

Why not ``orjson.loads`` + one dict per event: on a 339 MB trace that takes ~9 s and 2.8 GB RSS, because every
field of every event (call stacks, python_function args, occupancy figures …) becomes a Python object. Here:

* msgspec decodes each event into a ``gc=False`` Struct that lists ONLY the fields we use; unknown keys are
  skipped in C. Big nested args (``Input Dims`` …) stay ``msgspec.Raw`` (a view, no parse).
* The events array is first split into ``Raw`` items and decoded in batches of ``BATCH_EVENTS``, so at most one
  batch of Structs is alive at a time (peak RSS ≈ file bytes + ~60 B per event for the Raw list + one batch).
* Columns are pulled out with ``map(attrgetter(...))`` / ``zip(*…)`` / ``np.array`` (C loops, no per-event
  bytecode). Repeated strings (names) are interned through one dict; repeated ``Input Dims`` / ``grid`` texts are
  factorized, and only the distinct ones are parsed, in ONE ``orjson.loads`` call at the end.
* A batch whose fields have unexpected types (``"dur": "N/A"``, ``"pid": null``) is re-decoded with lenient
  ``Any``-typed Structs and coerced column by column; unknown numbers become NaN / -1, never 0.

Errors: msgspec's ``DecodeError`` (syntax, truncation) and ``ValidationError`` (shape) propagate to
``analyzer.load``, which repairs what real traces need and turns the rest into ``TraceError``.
"""

from __future__ import annotations

import gc
import itertools
import math
import operator
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import orjson
import pandas as pd
from msgspec import Raw

NAN = math.nan
# 32 MiB of JSON per batch (~130k events): per-batch Python overhead is noise (a 1 GB trace is ~30 batches), and
# one batch of Structs (~400 B per event) stays ~50 MB, so peak RSS ≈ the JSON itself + the columns + 50 MB.
CHUNK_BYTES = 32 << 20

# Event groups, by category. Legacy (PyTorch ≤ 1.10) categories are Capitalised; matched case-insensitively.
KERNEL, MEMCPY, MEMSET, CPU_OP, LAUNCH, ANNOTATION, GPU_ANNOTATION = range(1, 8)
GROUP_OF_CATEGORY = {
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "memset": MEMSET,
    "cpu_op": CPU_OP,
    "operator": CPU_OP,  # legacy
    "cuda_runtime": LAUNCH,
    "cuda_driver": LAUNCH,
    "runtime": LAUNCH,  # legacy
    "user_annotation": ANNOTATION,
    "gpu_user_annotation": GPU_ANNOTATION,
}
GPU_KIND = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}
LEGACY_CATEGORIES = frozenset({"Kernel", "Operator", "Runtime", "Memcpy", "Memset"})


# ---------------------------------------------------------------------------------------------------- structs
class Args(msgspec.Struct, frozen=True, gc=False):
    # Numbers are typed `int | str | None` / `float | str | None`: real traces hold "bytes": "1" (ROCm
    # hipMemcpyWithStream) or null; those go through the slow coercion for that column only, not the whole batch.
    external_id: int | str | None = msgspec.field(name="External id", default=-1)
    external_id_legacy: int | str | None = msgspec.field(name="external id", default=-1)  # legacy GPU/runtime rows
    correlation: int | str | None = -1
    device: int | str | None = -1
    stream: int | str | None = -1
    grid: Raw = Raw()
    block: Raw = Raw()
    registers: float | str | None = msgspec.field(name="registers per thread", default=NAN)
    shared_memory: float | str | None = msgspec.field(name="shared memory", default=NAN)
    nbytes: float | str | None = msgspec.field(name="bytes", default=NAN)
    input_dims: Raw = msgspec.field(name="Input Dims", default=Raw())
    input_types: Raw = msgspec.field(name="Input type", default=Raw())
    input_strides: Raw = msgspec.field(name="Input Strides", default=Raw())
    sequence_number: int | str | None = msgspec.field(name="Sequence number", default=-1)
    label: Raw = msgspec.field(name="name", default=Raw())  # metadata events: process_name / thread_name


NO_ARGS = Args()


class Event(msgspec.Struct, gc=False):
    ph: str | None = ""
    cat: str | None = ""
    name: str | None = ""
    pid: int | str | None = -1  # legacy: "25738"; GPU rows "stream 7"; the profiler span "Spans"
    tid: int | str | None = -1
    ts: float | str | None = NAN
    dur: float | str | None = NAN
    args: Args = NO_ARGS


class LenientArgs(msgspec.Struct, gc=False):
    external_id: Any = msgspec.field(name="External id", default=None)
    external_id_legacy: Any = msgspec.field(name="external id", default=None)
    correlation: Any = None
    device: Any = None
    stream: Any = None
    grid: Raw = Raw()
    block: Raw = Raw()
    registers: Any = msgspec.field(name="registers per thread", default=None)
    shared_memory: Any = msgspec.field(name="shared memory", default=None)
    nbytes: Any = msgspec.field(name="bytes", default=None)
    input_dims: Raw = msgspec.field(name="Input Dims", default=Raw())
    input_types: Raw = msgspec.field(name="Input type", default=Raw())
    input_strides: Raw = msgspec.field(name="Input Strides", default=Raw())
    sequence_number: Any = msgspec.field(name="Sequence number", default=None)
    label: Raw = msgspec.field(name="name", default=Raw())


class LenientEvent(msgspec.Struct, gc=False):
    ph: Any = ""
    cat: Any = ""
    name: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Raw = Raw()  # decoded separately: it may not even be an object


class ObjectForm(msgspec.Struct, gc=False):
    """Top level of the usual trace file. Only the keys we show are listed; the rest are skipped in C."""

    schemaVersion: Any = None
    deviceProperties: Any = None
    computeProperties: Any = None  # legacy name of deviceProperties
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    displayTimeUnit: Any = None
    traceName: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    hip_runtime_version: Any = None
    hip_driver_version: Any = None
    roctracer_version: Any = None
    record_shapes: Any = None
    with_stack: Any = None
    trace_id: Any = None


_EVENT_LIST = msgspec.json.Decoder(list[Event])
_LENIENT_LIST = msgspec.json.Decoder(list[LenientEvent])
_LENIENT_ARGS = msgspec.json.Decoder(LenientArgs)
_RAW_LIST = msgspec.json.Decoder(list[Raw])


# ---------------------------------------------------------------------------------------------------- result
@dataclass
class Decoded:
    """Columns of the events we use, one dict of equal-length arrays/lists per group (see trace.build_trace)."""

    header: dict  # top-level keys (ObjectForm fields that were present), traceEvents excluded
    form: str  # 'object' or 'array'
    n_events: int
    trace_start_raw: float  # smallest ts of any non-metadata event, in the file's units (µs); NaN if none
    gpu: dict[str, Any]
    cpu: dict[str, Any]
    launches: dict[str, Any]
    annotations: dict[str, Any]
    categories: dict[str, int]  # event count per cat (for "is this a PyTorch trace?" messages)
    process_labels: list[str]  # process_name metadata values
    legacy: bool  # Capitalised legacy categories seen
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------- coercion
def ints(values, bad: list | None = None) -> np.ndarray:
    """int64 column from Python values; anything that is not an integer-valued number or digit string → -1.

    bad: a one-item list counting values that were present but unreadable (for a warning)."""
    types = set(map(type, values))
    if types <= {int}:
        try:
            return np.array(values, dtype=np.int64) if len(values) else np.empty(0, np.int64)
        except OverflowError:
            pass
    return _ints_slow(values, bad)


def _ints_slow(values, bad: list | None) -> np.ndarray:
    s = pd.Series(list(values), dtype=object)
    is_str = s.map(type).eq(str).to_numpy()
    out = np.full(len(s), -1, dtype=np.int64)
    num = np.full(len(s), np.nan)
    if is_str.any():
        # "stream 7", "25738" (legacy string tids) → the trailing integer
        digits = s[is_str].str.extract(r"(-?\d+)\s*$", expand=False)
        num[is_str] = pd.to_numeric(digits, errors="coerce").to_numpy(dtype=float)
    other = ~is_str
    if other.any():
        num[other] = _floats_slow(s[other].tolist(), None)
    ok = np.isfinite(num) & (num == np.round(num)) & (np.abs(num) < 2**62)
    out[ok] = num[ok].astype(np.int64)
    if bad is not None:
        present = s.notna().to_numpy() & ~s.isin([""]).to_numpy()
        bad[0] += int((present & ~ok).sum())
    return out


def floats(values, bad: list | None = None) -> np.ndarray:
    """float64 column; None / non-numbers → NaN. Typed-path values are already float, so this is one C call."""
    types = set(map(type, values))
    if types <= {float, int}:
        try:
            return np.array(values, dtype=np.float64) if len(values) else np.empty(0)
        except OverflowError:
            pass
    return _floats_slow(values, bad)


def _floats_slow(values, bad: list | None) -> np.ndarray:
    out = np.full(len(values), np.nan)
    unreadable = 0
    for i, v in enumerate(values):  # only for a column holding non-numbers: rare
        if v is None:
            continue
        if isinstance(v, bool):
            unreadable += 1
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError, OverflowError):
            unreadable += 1
    if bad is not None:
        bad[0] += unreadable
    return out


def strings(values, cache: dict) -> list:
    """Interned str column: equal names share one object (a kernel name repeats ~10^4 times in a big trace)."""
    if not set(map(type, values)) <= {str}:
        values = ["" if v is None else v if isinstance(v, str) else str(v) for v in values]
    return list(map(cache.setdefault, values, values))


class RawTable:
    """Factorizes Raw JSON snippets across batches; decodes the distinct ones once (``objects``)."""

    def __init__(self):
        self.code_of: dict[bytes, int] = {b"": -1}

    def codes(self, raws) -> np.ndarray:
        if not len(raws):
            return np.empty(0, np.int64)
        blobs = list(map(bytes, raws))
        local_codes, uniques = pd.factorize(pd.Series(blobs, dtype=object), use_na_sentinel=False)
        code_of = self.code_of
        lut = np.fromiter((code_of.setdefault(u, len(code_of) - 1) for u in uniques), np.int64, len(uniques))
        return lut[local_codes]

    def objects(self) -> list:
        """Python objects for codes 0..n-1 (one orjson call). JSON null decodes to None (= unknown)."""
        blobs = [b for b, c in sorted(self.code_of.items(), key=operator.itemgetter(1)) if c >= 0]
        if not blobs:
            return []
        return orjson.loads(b"[" + b",".join(blobs) + b"]")


def take(objects: list, codes: np.ndarray) -> np.ndarray:
    """Object array: objects[code], None where code == -1. Equal snippets share one object (do not mutate)."""
    table = np.empty(len(objects) + 1, dtype=object)
    table[: len(objects)] = objects
    table[-1] = None
    return table[codes]


# ---------------------------------------------------------------------------------------------------- decode
class ShapeError(ValueError):
    """The JSON is valid but is not a trace (load.py turns it into TraceError)."""


class _TopLevel(ObjectForm, gc=False):
    traceEvents: Raw = Raw()  # a view into the input buffer: validated here, decoded later chunk by chunk


_WS = b" \t\r\n"


def split_document(buf) -> tuple[str, dict, Raw]:
    """Top-level decode: ('object'|'array', header dict, Raw of the events array).

    One msgspec pass that validates the whole document but skips the events (kept as a zero-copy Raw view).
    Raises msgspec.DecodeError (syntax / truncation) or ShapeError (valid JSON, not a trace).
    """
    first = _first_byte(buf)
    if first == ord("["):
        return "array", {}, msgspec.json.decode(buf, type=Raw)
    if first != ord("{"):
        raise ShapeError("not JSON: the file starts with neither '{' nor '['")
    try:
        top = msgspec.json.decode(buf, type=_TopLevel)
    except msgspec.ValidationError as err:
        raise ShapeError(f"JSON of an unexpected shape ({err})") from None
    header = {f: getattr(top, f) for f in ObjectForm.__struct_fields__}
    header = {k: v for k, v in header.items() if v is not None}
    events = top.traceEvents
    if not len(events):
        raise ShapeError("a JSON object without a 'traceEvents' key: not a Chrome/Kineto trace")
    if bytes(memoryview(events)[:1]) != b"[":
        raise ShapeError("'traceEvents' is not a list of events")
    return "object", header, events


def _first_byte(buf) -> int:
    head = bytes(memoryview(buf)[:4096])
    if head.startswith(b"\xef\xbb\xbf"):  # UTF-8 BOM
        head = head[3:]
    head = head.lstrip(_WS)
    return head[0] if head else -1


_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def event_batches(events: Raw, chunk_bytes: int = CHUNK_BYTES):
    """Yield lists of Event Structs, decoding the events array ~chunk_bytes at a time.

    The array is cut at '},{' boundaries. A cut can only be wrong if that text sits inside a string or a nested
    array of objects; then one side has unbalanced quotes/brackets, msgspec says so, and the cut moves to the
    next boundary. So a wrong cut costs time, never correctness.
    """
    view = memoryview(events)
    end = len(view) - 1  # the closing ']'
    pos = 1
    while pos < end and view[pos] in _WS:
        pos += 1
    while end > pos and view[end - 1] in _WS:
        end -= 1
    while pos < end:
        search_from = pos + chunk_bytes
        while True:
            m = _BOUNDARY.search(view, search_from, end) if search_from < end else None
            cut = m.start() + 1 if m else end
            blob = b"".join((b"[", view[pos:cut], b"]"))
            try:
                yield _decode_batch(blob)
            except msgspec.DecodeError:
                if m is None:
                    raise
                search_from = m.end()  # a cut inside a string or a nested object: take the next boundary
                continue
            break
        pos = m.end() - 1 if m else end


def _decode_batch(blob: bytes) -> list:
    try:
        return _EVENT_LIST.decode(blob)
    except (msgspec.ValidationError, OverflowError):
        return _lenient_batch(blob)


def _lenient_batch(blob: bytes) -> list:
    """Re-decode a batch whose values have unexpected types; build Events holding whatever was there.

    Per-event Python, but only for such a batch (none of the 23 public traces needs it)."""
    try:
        items = _LENIENT_LIST.decode(blob)
    except msgspec.ValidationError:
        items = []
        for raw in _RAW_LIST.decode(blob):  # an item that is not an object at all: dropped
            try:
                items.append(msgspec.json.decode(raw, type=LenientEvent))
            except msgspec.ValidationError:
                continue
    out = []
    for ev in items:
        args = NO_ARGS
        if len(ev.args):
            try:
                la = _LENIENT_ARGS.decode(ev.args)
                args = Args(**{f: getattr(la, f) for f in LenientArgs.__struct_fields__})
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass
        out.append(
            Event(
                ph=_text(ev.ph),
                cat=_text(ev.cat),
                name=_text(ev.name),
                pid=_scalar(ev.pid),
                tid=_scalar(ev.tid),
                ts=_scalar(ev.ts),
                dur=_scalar(ev.dur),
                args=args,
            )  # fmt: skip
        )
    out.append(_LENIENT_MARK)
    return out


def _text(v) -> str:
    return v if isinstance(v, str) else "" if v is None else str(v)


def _scalar(v):
    return v if isinstance(v, (int, float, str)) else None


_LENIENT_MARK = Event(ph="", cat="\x00lenient")  # tells the accumulator this batch was coerced (for a warning)


def decode_events(form: str, header: dict, events: Raw) -> Decoded:
    """Columns of every event we use. GC is paused while millions of short-lived objects come and go."""
    acc = _Accumulator()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for batch in event_batches(events):
            acc.add(batch)
            del batch
    finally:
        if gc_was_enabled:
            gc.enable()
    return acc.finish(form, header)


_CAT = operator.attrgetter("cat")
_PH = operator.attrgetter("ph")
_TS = operator.attrgetter("ts")
_NAME = operator.attrgetter("name")
_FIELD = {f: operator.attrgetter(f) for f in Event.__struct_fields__}
_ARG = {f: operator.attrgetter("args." + f) for f in Args.__struct_fields__}


class _Accumulator:
    def __init__(self):
        self.names: dict[str, str] = {}
        self.dims, self.types, self.strides = RawTable(), RawTable(), RawTable()
        self.grids = RawTable()
        self.parts: dict[str, list[dict]] = {"gpu": [], "cpu": [], "launches": [], "annotations": []}
        self.categories: Counter = Counter()
        self.process_labels: list[str] = []
        self.trace_start = math.inf
        self.n_events = 0
        self.lenient = False
        self.bad = [0]  # values present but unreadable as numbers
        self.group_of: dict = {}

    def _group(self, cat) -> int:
        """-1: no category (metadata, instant markers); 0: a category we do not read; else the group."""
        if not cat:
            return -1
        if not isinstance(cat, str):
            return 0
        return GROUP_OF_CATEGORY.get(cat, GROUP_OF_CATEGORY.get(cat.lower(), 0))

    # one batch -------------------------------------------------------------------------------------------
    def add(self, evs: list) -> None:
        if evs and evs[-1] is _LENIENT_MARK:
            evs.pop()
            self.lenient = True
        n = len(evs)
        if not n:
            return
        self.n_events += n
        cats = list(map(_CAT, evs))
        counts = Counter(cats)
        self.categories.update(counts)
        group_of = self.group_of
        for c in counts:
            if c not in group_of:
                group_of[c] = self._group(c)
        group = np.fromiter(map(group_of.__getitem__, cats), np.int8, n)
        del cats

        ts = floats(list(map(_TS, evs)))
        live = ts[group >= 0]
        live = live[np.isfinite(live)]
        if live.size:
            self.trace_start = min(self.trace_start, float(live.min()))

        base = self.n_events - n  # file position of this batch's first event: the tie-breaker for equal ts
        for g, fn in (
            (KERNEL, self._gpu),
            (MEMCPY, self._gpu),
            (MEMSET, self._gpu),
            (CPU_OP, self._cpu),
            (LAUNCH, self._launch),
        ):
            idx = np.flatnonzero(group == g)
            if idx.size:
                fn(*self._complete(evs, idx, base), g)
        idx = np.flatnonzero((group == ANNOTATION) | (group == GPU_ANNOTATION))
        if idx.size:
            self._annotations(*self._complete(evs, idx, base))
        idx = np.flatnonzero(group == -1)
        if idx.size:
            self._metadata(list(map(evs.__getitem__, idx.tolist())))

    @staticmethod
    def _complete(evs: list, idx: np.ndarray, base: int) -> tuple[list, np.ndarray]:
        """The selected events that are complete ('X') events (Kineto writes every op, kernel and launch so),
        and their positions in the file."""
        sel = list(map(evs.__getitem__, idx.tolist()))
        is_x = np.fromiter(map(operator.eq, map(_PH, sel), itertools.repeat("X")), bool, len(sel))
        if not is_x.all():
            sel = list(itertools.compress(sel, is_x))
            idx = idx[is_x]
        return sel, idx + base

    def _common(self, sel: list, pos: np.ndarray) -> dict:
        return {
            "event_index": pos,
            "name": strings(list(map(_NAME, sel)), self.names),
            "pid": ints(list(map(_FIELD["pid"], sel)), self.bad),
            "tid": ints(list(map(_FIELD["tid"], sel)), self.bad),
            "ts": floats(list(map(_TS, sel)), self.bad),
            "dur": floats(list(map(_FIELD["dur"], sel)), self.bad),
        }

    @staticmethod
    def _arg(sel: list, name: str) -> list:
        return list(map(_ARG[name], sel))

    def _external_id(self, sel: list) -> np.ndarray:
        # new 'External id' or legacy lowercase 'external id' (-1 when neither)
        return np.maximum(
            ints(self._arg(sel, "external_id"), self.bad), ints(self._arg(sel, "external_id_legacy"), self.bad)
        )

    def _gpu(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        a = self._arg
        cols.update(
            kind=[GPU_KIND[group]] * len(sel),
            correlation=ints(a(sel, "correlation"), self.bad),
            external_id=self._external_id(sel),
            device=ints(a(sel, "device"), self.bad),
            stream=ints(a(sel, "stream"), self.bad),
            grid=self.grids.codes(a(sel, "grid")),
            block=self.grids.codes(a(sel, "block")),
            registers=floats(a(sel, "registers"), self.bad),
            shared_memory=floats(a(sel, "shared_memory"), self.bad),
            bytes=floats(a(sel, "nbytes"), self.bad),
        )
        self.parts["gpu"].append(cols)

    def _cpu(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        a = self._arg
        cols.update(
            external_id=ints(a(sel, "external_id"), self.bad),
            sequence_number=ints(a(sel, "sequence_number"), self.bad),
            input_dims=self.dims.codes(a(sel, "input_dims")),
            input_types=self.types.codes(a(sel, "input_types")),
            input_strides=self.strides.codes(a(sel, "input_strides")),
        )
        self.parts["cpu"].append(cols)

    def _launch(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        cols.update(correlation=ints(self._arg(sel, "correlation"), self.bad), external_id=self._external_id(sel))
        self.parts["launches"].append(cols)

    def _annotations(self, sel: list, pos: np.ndarray) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        cats = list(map(_CAT, sel))
        on_gpu = np.fromiter(map(self.group_of.__getitem__, cats), np.int8, len(cats)) == GPU_ANNOTATION
        cols.update(on_gpu=on_gpu, external_id=ints(self._arg(sel, "external_id")))
        self.parts["annotations"].append(cols)

    def _metadata(self, sel: list) -> None:
        for ev in sel:  # metadata events: a few dozen per trace
            if ev.name != "process_name" or not len(ev.args.label):
                continue
            try:
                label = msgspec.json.decode(ev.args.label)
            except msgspec.DecodeError:
                continue
            if isinstance(label, str):
                self.process_labels.append(label)

    # all batches -----------------------------------------------------------------------------------------
    def finish(self, form: str, header: dict) -> Decoded:
        tables = {k: _concat(v) for k, v in self.parts.items()}
        gpu, cpu = tables["gpu"], tables["cpu"]
        if gpu:
            grid_text = np.asarray([_dims_text(o) for o in self.grids.objects()] + [""], dtype=object)
            gpu["grid"] = grid_text[gpu["grid"]]
            gpu["block"] = grid_text[gpu["block"]]
        if cpu:
            for key, table in (("input_dims", self.dims), ("input_types", self.types), ("input_strides", self.strides)):
                cpu[key] = take(table.objects(), cpu[key])
        warnings = []
        if self.lenient or self.bad[0]:
            count = f"{self.bad[0]:,} values" if self.bad[0] and not self.lenient else "some values"
            warnings.append(
                f"{count} of unexpected types (e.g. a string where a number belongs) were read as unknown (NaN / -1)"
            )
        categories = {("" if c is None else str(c)): k for c, k in self.categories.items() if c != _LENIENT_MARK.cat}
        return Decoded(
            header=header,
            form=form,
            n_events=self.n_events,
            trace_start_raw=self.trace_start if math.isfinite(self.trace_start) else NAN,
            gpu=gpu,
            cpu=cpu,
            launches=tables["launches"],
            annotations=tables["annotations"],
            categories=categories,
            process_labels=self.process_labels,
            legacy=any(c in LEGACY_CATEGORIES for c in categories),
            warnings=warnings,
        )


def _concat(parts: list[dict]) -> dict:
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    out = {}
    for key in parts[0]:
        if isinstance(parts[0][key], list):
            out[key] = list(itertools.chain.from_iterable(p[key] for p in parts))
        else:
            out[key] = np.concatenate([p[key] for p in parts])
    return out


def _dims_text(obj) -> str:
    """[50, 1, 1] → '50,1,1' (GPU_OPS grid/block); anything else → '' (unknown)."""
    if isinstance(obj, list) and obj and all(isinstance(x, int) and not isinstance(x, bool) for x in obj):
        return ",".join(map(str, obj))
    return ""
