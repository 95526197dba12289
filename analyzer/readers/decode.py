"""Typed, columnar decode of Kineto trace events.

Why not ``orjson.loads`` + one dict per event: every field of every event (call stacks, python_function args,
occupancy figures …) becomes a Python object. On the 1 GiB benchmark trace that is 8.7 GiB of RSS and 3× our
time (bench/results/load.md). Here:

* ``split_document``: one msgspec pass validates the document, decodes the few header keys we show, and keeps
  ``traceEvents`` as a zero-copy ``msgspec.Raw`` view.
* ``event_batches``: the events are decoded ~CHUNK_BYTES at a time (cut at ``},{"`` boundaries, bracketed in
  place) into ``gc=False`` Structs that list ONLY the fields we use, tagged by phase (``ph``): complete events
  become ``Event``, metadata ``Meta``, every other phase (flows, instants …) a field-less Struct. Unknown keys are
  skipped in C and big nested args (``Input Dims`` …) stay ``Raw``. One batch of Structs is alive at a time, so peak RSS ≈ the JSON + the
  columns + one batch (1.56× the file on the 1 GiB benchmark).
* ``_Accumulator``: per batch, events are grouped by category (a dict lookup per event) and each group's columns
  are pulled with list comprehensions over Struct slots + ``np.fromiter`` (measured fastest, see ``_i``).
  Names are interned through one dict; repeated ``Input Dims`` / ``grid`` texts get a code per distinct text,
  and only the distinct ones are parsed, in ONE ``orjson.loads`` call at the end.
* Big files, with a core to spare: this process decodes the first half of the events while a forked worker
  decodes the second and streams its columns back (``_decode_parallel``).
* A batch whose values have unexpected types (``"dur": [1]``, a non-object event) is re-decoded with lenient
  ``Any``-typed Structs; strings or nulls where numbers belong are coerced per column. Unknown numbers become
  NaN / -1, never 0, and ``Decoded.warnings`` says so.

Errors: msgspec's ``DecodeError`` (syntax, truncation) and ``ShapeError`` (valid JSON, not a trace) propagate to
``analyzer.readers.load``, which repairs what real traces need and turns the rest into ``TraceError``.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import mmap
import operator
import re
from collections import Counter
from typing import Any, Union

import msgspec
import numpy as np
import orjson
from msgspec import Raw

from analyzer.schema import RawTrace
from fuselens import settings

NAN = math.nan
# 4 MiB of JSON per batch (~16k events): one batch of Structs (~400 B per event, ~6 MB) stays in the CPU caches
# while its columns are pulled (each pull touches every Struct again): fewer cache misses than 32 MiB batches,
# per-batch Python overhead is still noise (~260 batches per GB), and peak RSS ≈ the JSON itself
# + the columns + 6 MB.
CHUNK_BYTES = 4 << 20

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
    concrete_inputs: Raw = msgspec.field(name="Concrete Inputs", default=Raw())
    sequence_number: int | str | None = msgspec.field(name="Sequence number", default=-1)
    label: Raw = msgspec.field(name="name", default=Raw())  # metadata events: process_name / thread_name


NO_ARGS = Args()


class Event(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A complete ('X') event: every op, kernel, memcpy, launch and annotation Kineto writes is one."""

    cat: str | None = ""
    name: str | None = ""
    pid: int | str | None = -1  # legacy: "25738"; GPU rows "stream 7"; the profiler span "Spans"
    tid: int | str | None = -1
    ts: float | str | None = NAN
    dur: float | str | None = NAN
    args: Args = NO_ARGS


class Meta(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    """A metadata event (process_name / thread_name …)."""

    name: str | None = ""
    args: Args = NO_ARGS


# Every other Chrome-trace phase decodes to a field-less Struct: flows ('s'/'f', ~30% of a Kineto trace),
# instants, counters … are parsed and skipped in C (measured: the batch decode takes 17% less time than with
# one Struct type for all phases). A phase not listed here sends its batch to the lenient path.
_PHASES = [
    "B",
    "E",
    "i",
    "I",
    "C",
    "b",
    "n",
    "e",
    "s",
    "t",
    "f",
    "P",
    "O",
    "N",
    "D",
    "R",
    "(",
    ")",
    "V",
    "v",
    "c",
    "T",
    "p",
    "S",
    "F",
]
_SKIP = tuple(msgspec.defstruct(f"Phase_{ord(ph)}", [], tag_field="ph", tag=ph, gc=False) for ph in _PHASES)
_ANY_EVENT = Union[(Event, Meta, *_SKIP)]  # noqa: UP007 (a runtime tuple of types)


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
    concrete_inputs: Raw = msgspec.field(name="Concrete Inputs", default=Raw())
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


_EVENT_LIST = msgspec.json.Decoder(list[_ANY_EVENT])
_LENIENT_LIST = msgspec.json.Decoder(list[LenientEvent])
_LENIENT_ARGS = msgspec.json.Decoder(LenientArgs)
_RAW_LIST = msgspec.json.Decoder(list[Raw])


# ---------------------------------------------------------------------------------------------------- result
# The decoder's result is the raw-table contract (analyzer.schema: RAW_TABLES, RawTrace), which build_trace reads.
Decoded = RawTrace


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
    import pandas as pd  # here only: a refused gzip bomb is answered before pandas is imported (0.25–3 s)

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


def strings(values, cache: dict, strict: bool = False) -> list:
    """Interned str column: equal names share one object (a kernel name repeats ~10^4 times in a big trace).

    cache must map None → "" (unknown string); it is seeded so by the accumulator. strict: the values come from
    a typed batch (``str | None`` by the Struct's type), so the type check is skipped: touching every string
    once more costs ~140 ns an event on the dev box (a cache miss per object)."""
    out = list(map(cache.setdefault, values, values))
    if not strict and not set(map(type, out)) <= {str}:  # lenient batches: numbers or lists where a name belongs
        out = [v if isinstance(v, str) else cache.setdefault(str(v), str(v)) for v in out]
    return out


def int_col(values: list, bad: list, strict: bool = True) -> np.ndarray:
    """int64 column: one C conversion unless a value is odd (None, "stream 7", a float in a lenient batch)."""
    if strict:
        try:
            return np.fromiter(values, np.int64, len(values))
        except (TypeError, ValueError, OverflowError):
            pass
    return ints(values, bad)


def float_col(values: list, bad: list, strict: bool = True) -> np.ndarray:
    if strict:
        try:
            return np.fromiter(values, np.float64, len(values))
        except (TypeError, ValueError, OverflowError):
            pass
    return floats(values, bad)


class RawTable:
    """Factorizes Raw JSON snippets across batches; decodes the distinct ones once (``objects``)."""

    def __init__(self):
        self.code_of: dict[bytes, int] = {b"": -1}

    def codes_of_bytes(self, blobs: list[bytes]) -> np.ndarray:
        """Code per snippet (-1: absent). Shapes repeat (a training step has a few hundred distinct ones), so
        after the first batch nearly every snippet is a dict hit: one C-level map."""
        if not len(blobs):
            return np.empty(0, np.int64)
        code_of = self.code_of
        codes = list(map(code_of.get, blobs))
        if None in codes:
            for blob in set(itertools.compress(blobs, map(operator.is_, codes, itertools.repeat(None)))):
                code_of[blob] = len(code_of) - 1
            codes = list(map(code_of.__getitem__, blobs))
        return np.fromiter(codes, np.int64, len(codes))

    def blobs(self) -> list[bytes]:
        """The distinct snippets, in code order (codes 0..n-1)."""
        return [b for b, c in sorted(self.code_of.items(), key=operator.itemgetter(1)) if c >= 0]

    def objects(self) -> list:
        """Python objects for codes 0..n-1 (one orjson call). JSON null decodes to None (= unknown)."""
        blobs = self.blobs()
        if not blobs:
            return []
        try:
            return orjson.loads(b"[" + b",".join(blobs) + b"]")
        except orjson.JSONDecodeError:  # one snippet orjson refuses (an escaped lone surrogate "\ud800"): it alone
            return [_loads_or_none(b) for b in blobs]  # becomes unknown, the others keep their values


def _loads_or_none(blob: bytes):
    try:
        return orjson.loads(blob)
    except orjson.JSONDecodeError:
        return None


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


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_HEAD_BYTES = 1 << 20  # the header keys Kineto writes before traceEvents (deviceProperties …) fit in far less
_TAIL_BYTES = 1 << 16  # … and after its closing ']' ("traceName", "}")


def split_events_unchecked(buf) -> tuple[str, dict, Raw] | None:
    """``split_document`` without its validation pass over the events (0.7 s per GiB), or None when the quick
    way does not apply (then split_document). The header and tail around the events array are decoded for real
    (with an empty array in its place); the array itself is decoded batch by batch later, where a syntax error
    in it surfaces as msgspec.DecodeError: the caller then repeats the load with split_document and its repairs.

    The events array is the text between the first '"traceEvents": [' of the first MiB and one of the file's
    last ']': the first, from the end, whose tail decodes (a ']' inside a tail string fails that decode; a
    nested 'traceEvents' fails it or its check that the top-level array is the empty one put in its place) and
    which closes an event: the object before it decodes as one, with its "ph" (a trace that writes
    deviceProperties after its events has a ']' closing a list of objects without "ph" there)."""
    view = memoryview(buf)
    if _first_byte(view[:_HEAD_BYTES]) != ord("{"):
        return None
    m = _EVENTS_KEY.search(view, 0, min(len(view), _HEAD_BYTES))
    if m is None:
        return None
    open_at = m.end() - 1
    head = bytes(view[:open_at])
    tail_from = max(open_at + 1, len(view) - _TAIL_BYTES)
    tail = bytes(view[tail_from:])
    close = len(tail)
    for _ in range(4):  # the last few ']' of the file
        close = tail.rfind(b"]", 0, close)
        if close < 0:
            return None
        try:
            top = msgspec.json.decode(head + b"[]" + tail[close + 1 :], type=_TopLevel)
            if not _closes_an_event(view, open_at, tail_from + close):
                continue
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
            continue
        if bytes(top.traceEvents) != b"[]":
            return None
        header = {f: getattr(top, f) for f in ObjectForm.__struct_fields__}
        events = Raw(view[open_at : tail_from + close + 1])
        return "object", {k: v for k, v in header.items() if v is not None}, events
    return None


def _closes_an_event(view, open_at: int, close: int) -> bool:
    """Is view[close] (a ']') the end of an array of events opened at open_at: empty, or its last object an
    event with a phase? The last object starts after the last event boundary of the 1 MiB before it."""
    start = skip_ws(view, open_at + 1, close)
    if start == close:
        return True  # an empty array
    for m in _BOUNDARY.finditer(view, max(start, close - _HEAD_BYTES), close):
        start = m.end() - 1
    if start < close - _HEAD_BYTES:
        return False  # a last object over 1 MiB: left to split_document
    return bool(_EVENT_LIST.decode(b"[" + bytes(view[start:close]) + b"]"))  # no "ph": ValidationError


def _first_byte(buf) -> int:
    view = memoryview(buf)
    pos = 3 if bytes(view[:3]) == b"\xef\xbb\xbf" else 0  # UTF-8 BOM
    pos = skip_ws(view, pos, len(view))
    return view[pos] if pos < len(view) else -1


_BOUNDARY = re.compile(rb"\}\s*,\s*\{(?=\s*\")")


def event_batches(events: Raw, chunk_bytes: int | None = None, buf: bytearray | None = None, release: bool = False):
    """Yield lists of Event Structs, decoding the events array ~chunk_bytes at a time.

    buf: the bytearray that `events` views. Then each chunk is bracketed IN PLACE (the separator bytes before and
    after it become '[' and ']' for the decode, then are restored) instead of being copied: saves a full copy of
    the file (~0.2 s per GB).
    """
    view, buf, pos, end = _events_span(events, buf)
    yield from _batches(view, buf, pos, end, chunk_bytes or CHUNK_BYTES, release)


def _events_span(events: Raw, buf):
    """(view, buf or None, first byte after '[' and whitespace, index of the closing ']' less trailing space)."""
    off = _offset_in(buf, events)
    if off is None:
        buf, off = None, 0
        view = memoryview(events)
    else:
        view = memoryview(buf)
    end = off + len(events) - 1  # the closing ']'
    pos = skip_ws(view, off + 1, end)
    end = skip_ws_back(view, pos, end)
    return view, buf, pos, end


_WS_BLOCK = 1 << 20


def skip_ws(view, pos: int, end: int) -> int:
    """First index in [pos, end) that is not JSON whitespace (end if none), at memory speed: a 1 MiB block that
    is all whitespace is passed by one C ``translate`` (0.4 s per GiB; ``lstrip`` with four characters takes
    6 ns a byte, a Python loop took 6.6 s for 20 MB of padding); only the block holding the answer is stripped."""
    while pos < end:
        block = bytes(view[pos : min(end, pos + _WS_BLOCK)])
        if block.translate(None, _WS):
            return pos + len(block) - len(block.lstrip(_WS))
        pos += len(block)
    return end


def skip_ws_back(view, start: int, end: int) -> int:
    """Index just after the last non-whitespace byte in [start, end) (start if none), 1 MiB blocks from the end."""
    while end > start:
        lo = max(start, end - _WS_BLOCK)
        block = bytes(view[lo:end])
        if block.translate(None, _WS):
            return lo + len(block.rstrip(_WS))
        end = lo
    return start


def _batches(view, buf, pos: int, end: int, chunk_bytes: int, release: bool = False):
    """Decode the events in view[pos:end] (pos at an event's '{', end just after an event's '}').

    release: once a batch has been consumed, the buffer pages it came from go back to the system (_release): the
    JSON shrinks as the columns grow, instead of both being whole at the end.

    Cuts at '},{"' boundaries: inside a JSON string a quote is escaped (\\"), so that text cannot be in a
    string; it can only be a boundary or sit in a nested array of objects. A wrong cut leaves one side with
    unbalanced brackets: msgspec says so, and the cut moves to the next boundary. A wrong cut costs time, never
    correctness.
    """
    while pos < end:
        search_from = pos + chunk_bytes
        while True:
            m = _BOUNDARY.search(view, search_from, end) if search_from < end else None
            cut = m.start() + 1 if m else end
            try:
                if buf is None:
                    batch = _decode_batch(b"".join((b"[", view[pos:cut], b"]")))
                else:
                    before, after = buf[pos - 1], buf[cut]
                    buf[pos - 1], buf[cut] = 0x5B, 0x5D  # '[' … ']'
                    try:
                        batch = _decode_batch(view[pos - 1 : cut + 1])
                    finally:
                        buf[pos - 1], buf[cut] = before, after
            except msgspec.DecodeError as err:
                at = re.search(r"\(byte (\d+)\)", str(err))
                if m is None or (at is not None and int(at.group(1)) < cut - pos):
                    raise  # a syntax error inside the batch, not at its bracketed end: no other cut helps
                search_from = m.end()  # a cut inside a nested object: take the next boundary
                continue
            yield batch
            del batch
            if release:
                _release(buf, pos, cut)
            break
        pos = m.end() - 1 if m else end


def _offset_in(buf, events: Raw) -> int | None:
    """Where the Raw view `events` starts inside the bytearray buf (msgspec's Raw is zero-copy), else None."""
    if not isinstance(buf, OWNED_BUFFERS) or not len(buf) or not len(events):
        return None
    base = np.frombuffer(buf, np.uint8).ctypes.data
    start = np.frombuffer(events, np.uint8).ctypes.data
    off = start - base
    if off >= 0 and off + len(events) <= len(buf) and buf[off] == 0x5B:  # '['
        return off
    return None


def _decode_batch(blob) -> list:
    try:
        return _typed_or_lenient(blob)
    except UnicodeDecodeError:
        # invalid UTF-8 inside a string (a name holding Latin-1 bytes): U+FFFD for the bad bytes, then again,
        # on the typed and the lenient path alike
        batch = _typed_or_lenient(bytes(blob).decode("utf-8", errors="replace").encode())
        batch.append(_UTF8_MARK)
        return batch


def _typed_or_lenient(blob) -> list:
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
        if ev.ph not in ("X", "M"):
            out.append(_OTHER)  # counted as an event, nothing read
            continue
        args = NO_ARGS
        if len(ev.args):
            try:
                la = _LENIENT_ARGS.decode(ev.args)
                args = Args(**{f: getattr(la, f) for f in LenientArgs.__struct_fields__})
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass
        if ev.ph == "M":
            out.append(Meta(name=_text(ev.name), args=args))
            continue
        out.append(
            Event(
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


_LENIENT_MARK = Meta(name="\x00lenient")  # tells the accumulator this batch was coerced (for a warning)
_UTF8_MARK = Meta(name="\x00utf8")  # … that invalid UTF-8 was replaced
_OTHER = _SKIP[0]()


def decode_events(
    form: str, header: dict, events: Raw, buf: bytearray | None = None, workers: int | None = None
) -> Decoded:
    """Columns of every event we use: ``accumulate_events`` then ``finish``."""
    acc = accumulate_events(events, buf, workers)
    del events, buf
    return finish(acc, form, header)


def accumulate_events(
    events: Raw, buf: bytearray | None = None, workers: int | None = None, release: bool = False
) -> _Accumulator:
    """Decode every event into per-batch columns. GC is paused while millions of short-lived objects come and go.

    The result holds no reference to the input: a caller that drops its own (load.py does) frees the JSON buffer
    BEFORE ``finish`` concatenates the batches, so the buffer and the concatenated columns are never in memory
    together (1 GiB benchmark: peak 1.66 → 1.4x GiB).
    buf: the bytearray `events` views, if any (lets chunks be decoded in place, see event_batches).
    workers: processes for a big file (default: $FUSELENS_DECODE_WORKERS, else up to 2 where fork exists and the
    events are over PARALLEL_MIN_BYTES). Workers are forked, so they read the buffer without a copy.
    release: the caller owns buf and reads nothing from it afterwards: the pages of decoded batches go back to the
    system as decoding goes (the 1 GiB trace's first open peaks ~0.2× the file lower); a parallel decode whose
    worker fails after that raises BufferReleased (read the file again). A syntax error is final either way.
    """
    n_workers = _worker_count(workers, len(events))
    with _gc_paused():
        if n_workers > 1:
            try:
                return _decode_parallel(events, buf, n_workers, release)
            except _ParallelUnavailable:
                pass
        acc = _Accumulator()
        for batch in event_batches(events, buf=buf, release=release):
            acc.add(batch)
            del batch
        return acc


def finish(acc: _Accumulator, form: str, header: dict) -> Decoded:
    """The accumulated batches as one ``Decoded`` (each column concatenated, its batch pieces freed at once)."""
    with _gc_paused():
        return acc.finish(form, header)


@contextlib.contextmanager
def _gc_paused():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Below ~64 MB of events, forking costs more than it saves (a worker start is ~50 ms; decode runs ~150 MB/s).
PARALLEL_MIN_BYTES = 64 << 20
ENV_WORKERS = "FUSELENS_DECODE_WORKERS"


def _worker_count(workers: int | None, n_bytes: int) -> int:
    """Decode processes. Auto (None): $FUSELENS_DECODE_WORKERS, else min(2, cores) for ≥ PARALLEL_MIN_BYTES of
    events when a core is idle — but 1 inside a process that is itself a pool worker (analyzer.ranks already runs
    one rank per core) or that runs other threads (a Streamlit server: forking a threaded process can deadlock
    the child)."""
    import multiprocessing
    import os
    import threading

    if workers is None:
        env = settings.text(ENV_WORKERS)
        if env.isdigit():
            workers = int(env)
        elif (
            n_bytes < PARALLEL_MIN_BYTES
            or threading.active_count() > 1
            or multiprocessing.parent_process()
            or not _idle_core()
        ):
            return 1
        else:
            workers = min(2, os.cpu_count() or 1)
    if workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, workers)


def _idle_core() -> bool:
    """Is a core free for a second worker? Two processes cost more CPU in all than one (the second one's
    transfer and the merge), so on a busy box they are slower; they pay off only with a core to spare. Measured
    over 0.15 s from /proc/stat (this process sleeps meanwhile, so its own core counts as idle): the 1-minute
    load average lags a minute behind, and after any earlier minute of work it still reads ~1 on an idle box."""
    import os
    import time

    cores = os.cpu_count() or 1
    try:
        before = _cpu_times()
        time.sleep(0.15)
        after = _cpu_times()
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0] <= cores - 1.5
        except OSError:
            return False
    busy, total = after[0] - before[0], after[1] - before[1]
    return total > 0 and (total - busy) / total * cores >= 1.5


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from the first line of /proc/stat (idle and iowait are not busy)."""
    with open("/proc/stat", "rb") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    return sum(values) - values[3] - values[4], sum(values)


# Writable buffers a reader fills (analyzer.readers.load): decoded in place, their pages given back as it goes.
OWNED_BUFFERS = (bytearray, mmap.mmap)


class _ParallelUnavailable(Exception):
    pass


class BufferReleased(Exception):
    """The parallel decode failed after handing back pages of the caller's buffer: decode the source again."""


def _release(buf, a: int, b: int) -> None:
    """Hand the whole memory pages inside buf[a:b] back to the system (madvise MADV_DONTNEED: they read as zeros
    from now on). Only pages wholly inside the range: the allocation's header page is never touched. No-op
    where madvise is missing."""
    import ctypes

    if not isinstance(buf, OWNED_BUFFERS) or b <= a:
        return
    page = mmap.PAGESIZE
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    lo, hi = -(-(base + a) // page) * page, (base + b) // page * page
    if hi > lo:
        with contextlib.suppress(OSError, AttributeError, TypeError):  # no libc madvise (Windows): keep the pages
            ctypes.CDLL(None, use_errno=True).madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), 4)


def _decode_parallel(events: Raw, buf, n_workers: int, release: bool = False) -> _Accumulator:
    """Split the events into n_workers byte ranges at event boundaries. This process decodes the first range
    while forked children decode the others (they read the buffer without a copy); each child streams its
    columns back through a pipe, array by array into arrays allocated here (no pickled copy of the columns on
    either side), and
    they are merged in file order. Any failure (no fork, a child killed, a split inside a nested object, a
    syntax error) falls back to decoding everything in this process, which then says what is wrong.
    release: every process drops the pages outside its own range at its start (so each page has one owner) and
    gives back its own batches' pages as it goes: the 1 GiB trace peaked at 1.45× the file without it. A failure
    after that raises BufferReleased."""
    import multiprocessing

    view, buf, pos, end = _events_span(events, buf)
    ranges, start = [], pos
    for k in range(1, n_workers):
        m = _BOUNDARY.search(view, max(start, pos + (end - pos) * k // n_workers), end)
        if m is None:
            break
        ranges.append((start, m.start() + 1))  # up to just after this range's last '}'
        start = m.end() - 1  # the next range starts at its first '{'
    ranges.append((start, end))
    if len(ranges) < 2:
        raise _ParallelUnavailable
    ctx = multiprocessing.get_context("fork")
    children = []
    released = False
    try:
        for a, b in ranges[1:]:
            recv, send = ctx.Pipe(duplex=False)
            child = ctx.Process(target=_decode_child, args=(view, buf, a, b, send, release), daemon=True)
            child.start()
            send.close()
            children.append((child, recv))
        if release and buf is not None:  # the children's ranges are theirs alone from here
            _release(buf, ranges[0][1] + 1, len(buf))
            released = True
        acc = _Accumulator()
        for batch in _batches(view, buf, *ranges[0], CHUNK_BYTES, release):
            acc.add(batch)
            del batch
        for child, recv in children:
            acc.merge(_receive(recv))  # in file order; each part is freed once merged
            child.join()
            if child.exitcode != 0:
                raise _ParallelUnavailable(f"decode worker exited with {child.exitcode}")
        return acc
    except (_ParallelUnavailable, OSError, EOFError, msgspec.DecodeError) as err:
        if released:
            raise BufferReleased from err
        raise _ParallelUnavailable from err  # … then decode in this process: slower, same result
    finally:
        for child, recv in children:
            recv.close()
            if child.is_alive():
                child.kill()
                child.join()


def _decode_child(view, buf, a: int, b: int, conn, release: bool) -> None:
    """A forked worker: decode view[a:b], send the export, exit without running the parent's exit handlers."""
    import os

    code = 1
    try:
        gc.disable()
        if release:  # pages this worker never reads: so that the parent's own release frees them
            _release(buf, 0, a - 1)
            _release(buf, b + 1, len(buf))
        acc = _Accumulator()
        for batch in _batches(view, buf, a, b, CHUNK_BYTES, release):
            acc.add(batch)
            del batch
        _send(conn, acc.export())
        code = 0
    except BaseException as err:  # the parent falls back to decoding in one process
        with contextlib.suppress(Exception):
            conn.send(("error", repr(err)))
    finally:
        with contextlib.suppress(Exception):
            conn.close()
        os._exit(code)


def _send(conn, part: dict) -> None:
    """A worker's export: the small things pickled, then each array as raw bytes (the receiver allocates it),
    each freed here once sent, so the columns move from this process to the parent instead of being in both."""
    layout = {}
    for table, cols in part["parts"].items():
        layout[table] = {
            key: (col.dtype.str, len(col)) if isinstance(col, np.ndarray) and col.dtype != object else col
            for key, col in cols.items()  # a list column (gpu kind) is pickled as is
        }
    conn.send(("ok", {**part, "parts": layout}))
    for table, cols in part["parts"].items():
        for key in list(cols):
            if isinstance(layout[table][key], tuple):
                arr = np.ascontiguousarray(cols.pop(key))
                conn.send_bytes(memoryview(arr).cast("B"))
                del arr


def _receive(conn) -> dict:
    status, part = conn.recv()
    if status != "ok":
        raise _ParallelUnavailable(f"decode worker failed: {part}")
    for cols in part["parts"].values():
        for key, spec in cols.items():
            if isinstance(spec, tuple):
                arr = np.empty(spec[1], dtype=np.dtype(spec[0]))
                got = conn.recv_bytes_into(memoryview(arr).cast("B")) if arr.nbytes else len(conn.recv_bytes())
                if got != arr.nbytes:
                    raise _ParallelUnavailable("a decode worker sent a column of the wrong size")
                cols[key] = arr
    return part


class _Accumulator:
    def __init__(self):
        self.names: dict = {None: ""}
        # A cpu_op's four shape snippets (Input Dims, types, strides, Concrete Inputs) are keyed TOGETHER, joined
        # by NUL (never in JSON text), and a kernel's grid and block likewise: one bytes object and one dict hit
        # per event instead of four (bytes(Raw) is ~400 ns: 2.6 µs per cpu_op went to keying shapes). ``finish``
        # splits the few distinct keys into each column's snippets.
        self.cpu_shapes, self.launch_dims = RawTable(), RawTable()
        self.parts: dict[str, list[dict]] = {"gpu": [], "cpu": [], "launches": [], "annotations": []}
        self.categories: Counter = Counter()
        self.process_labels: list[str] = []
        self.trace_start = math.inf
        self.n_events = 0
        self.n_x = 0  # complete events so far
        self.lenient = False
        self.bad_utf8 = False
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
        if evs and evs[-1] is _UTF8_MARK:
            evs.pop()
            self.bad_utf8 = True
        self.lenient_batch = bool(evs) and evs[-1] is _LENIENT_MARK
        if self.lenient_batch:
            evs.pop()
            self.lenient = True
        self.n_events += len(evs)
        # one pass reads every event's class; the selections below only compare the pointers it returned
        classes = list(map(type, evs))
        xs = list(itertools.compress(evs, map(operator.is_, classes, itertools.repeat(Event))))
        if len(xs) != len(evs):
            self._metadata(list(itertools.compress(evs, map(operator.is_, classes, itertools.repeat(Meta)))))
        del evs, classes
        n = len(xs)
        if not n:
            return
        cats = [e.cat for e in xs]
        counts = Counter(cats)
        self.categories.update(counts)
        group_of = self.group_of
        for c in counts:
            if c not in group_of:
                group_of[c] = self._group(c)
        group = np.fromiter(map(group_of.__getitem__, cats), np.int8, n)  # few distinct keys: dict hits
        del cats

        self.strict = not self.lenient_batch
        ts_values = [e.ts for e in xs]
        ts = None
        if self.strict:
            with contextlib.suppress(TypeError, ValueError, OverflowError):
                ts = np.fromiter(ts_values, np.float64, n)
        self.batch_ts = ts  # every ts a number: each group takes its rows from here (_common)
        if ts is None:
            ts = floats(ts_values, [0])
        del ts_values
        live = ts[group >= 0]
        live = live[np.isfinite(live)]
        if live.size:
            self.trace_start = min(self.trace_start, float(live.min()))

        base = self.batch_base = self.n_x  # ordinal of this batch's first complete event: the tie-breaker for equal ts
        self.n_x += n
        for g, fn in (
            (KERNEL, self._gpu),
            (MEMCPY, self._gpu),
            (MEMSET, self._gpu),
            (CPU_OP, self._cpu),
            (LAUNCH, self._launch),
        ):
            idx = np.flatnonzero(group == g)
            if idx.size:
                fn(self._select(xs, idx), idx + base, g)
        idx = np.flatnonzero((group == ANNOTATION) | (group == GPU_ANNOTATION))
        if idx.size:
            self._annotations(self._select(xs, idx), idx + base)

    @staticmethod
    def _select(xs: list, idx: np.ndarray) -> list:
        return list(map(xs.__getitem__, idx.tolist()))

    # Column extraction. List comprehensions over Struct slots, measured on 64k real events (CPython 3.11):
    # [e.args.correlation for e in sel] 65 ns/event vs 168 ns for map(attrgetter("args.correlation")) and
    # 500+ ns for astuple + zip: the specialised slot load beats every C-level detour, so it is used here.
    def _i(self, values: list) -> np.ndarray:
        return int_col(values, self.bad, self.strict)

    def _f(self, values: list) -> np.ndarray:
        return float_col(values, self.bad, self.strict)

    def _common(self, sel: list, pos: np.ndarray) -> dict:
        return {
            "event_index": pos,
            "name": strings([e.name for e in sel], self.names, self.strict),
            "pid": self._i([e.pid for e in sel]),
            "tid": self._i([e.tid for e in sel]),
            "ts": self._f([e.ts for e in sel]) if self.batch_ts is None else self.batch_ts[pos - self.batch_base],
            "dur": self._f([e.dur for e in sel]),
        }

    def _external_id(self, args: list) -> np.ndarray:
        # new 'External id' or legacy lowercase 'external id' (-1 when neither)
        return np.maximum(self._i([a.external_id for a in args]), self._i([a.external_id_legacy for a in args]))

    def _gpu(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        args = [e.args for e in sel]
        launch = self.launch_dims.codes_of_bytes([_SEP.join((a.grid, a.block)) for a in args])
        cols.update(
            kind=[GPU_KIND[group]] * len(sel),
            correlation=self._i([a.correlation for a in args]),
            external_id=self._external_id(args),
            device=self._i([a.device for a in args]),
            stream=self._i([a.stream for a in args]),
            grid=launch,  # the joined key's code for both: finish() splits it
            block=launch,
            registers=self._f([a.registers for a in args]),
            shared_memory=self._f([a.shared_memory for a in args]),
            bytes=self._f([a.nbytes for a in args]),
        )
        self.parts["gpu"].append(cols)

    def _cpu(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        args = [e.args for e in sel]
        shapes = self.cpu_shapes.codes_of_bytes(
            [_SEP.join((a.input_dims, a.input_types, a.input_strides, a.concrete_inputs)) for a in args]
        )
        cols.update(
            external_id=self._i([a.external_id for a in args]),
            sequence_number=self._i([a.sequence_number for a in args]),
            # the joined key's code for all four: finish() splits it
            input_dims=shapes,
            input_types=shapes,
            input_strides=shapes,
            concrete_inputs=shapes,
        )
        self.parts["cpu"].append(cols)

    def _launch(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        args = [e.args for e in sel]
        cols.update(correlation=self._i([a.correlation for a in args]), external_id=self._external_id(args))
        self.parts["launches"].append(cols)

    def _annotations(self, sel: list, pos: np.ndarray) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        group_of = self.group_of
        on_gpu = np.fromiter([group_of[e.cat] for e in sel], np.int8, len(sel)) == GPU_ANNOTATION
        cols.update(on_gpu=on_gpu, external_id=self._i([e.args.external_id for e in sel]))
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

    # across processes ------------------------------------------------------------------------------------
    def export(self) -> dict:
        """This worker's columns in a compact, picklable form: names and shapes as codes + distinct values."""
        name_list = list(dict.fromkeys(self.names.values()))  # distinct interned names ("" once)
        index_of = {v: i for i, v in enumerate(name_list)}
        parts = {}
        for table, cols in self.parts.items():
            merged = _concat(cols)
            if merged:
                merged["name"] = np.fromiter(map(index_of.__getitem__, merged["name"]), np.int64, len(merged["name"]))
            parts[table] = merged
        raw_tables = {k: [b for b, c in sorted(t.code_of.items(), key=operator.itemgetter(1)) if c >= 0]
                      for k, t in self._raw_tables().items()}  # fmt: skip
        return dict(
            parts=parts, names=name_list, raw_tables=raw_tables, categories=dict(self.categories),
            process_labels=self.process_labels, trace_start=self.trace_start, n_events=self.n_events,
            lenient=self.lenient, bad=self.bad[0], bad_utf8=self.bad_utf8, n_x=self.n_x,
        )  # fmt: skip

    def _raw_tables(self) -> dict:
        return {"cpu_shapes": self.cpu_shapes, "launch_dims": self.launch_dims}

    def merge(self, part: dict) -> None:
        """Append a worker's export (parts arrive in file order)."""
        names = part["names"]
        name_lut = np.empty(len(names), dtype=object)
        name_lut[:] = [self.names.setdefault(x, x) for x in names]
        luts = {}
        for key, table in self._raw_tables().items():
            blobs = part["raw_tables"][key]
            for blob in blobs:
                table.code_of.setdefault(blob, len(table.code_of) - 1)
            luts[key] = np.fromiter((table.code_of[b_] for b_ in blobs), np.int64, len(blobs))
        for table, cols in part["parts"].items():
            if not cols:
                continue
            cols["name"] = name_lut[cols["name"]]
            cols["event_index"] = cols["event_index"] + self.n_x
            if table == "gpu":
                for key in ("grid", "block"):
                    cols[key] = _remap(cols[key], luts["launch_dims"])
            if table == "cpu":
                for key in _SHAPE_COLUMNS:
                    cols[key] = _remap(cols[key], luts["cpu_shapes"])
            self.parts[table].append(cols)
        self.categories.update(part["categories"])
        self.process_labels += part["process_labels"]
        self.trace_start = min(self.trace_start, part["trace_start"])
        self.n_events += part["n_events"]
        self.n_x += part["n_x"]
        self.lenient |= part["lenient"]
        self.bad_utf8 |= part["bad_utf8"]
        self.bad[0] += part["bad"]

    # all batches -----------------------------------------------------------------------------------------
    def finish(self, form: str, header: dict) -> Decoded:
        tables = {k: _concat(v) for k, v in self.parts.items()}
        gpu, cpu = tables["gpu"], tables["cpu"]
        if gpu:
            grids = RawTable()
            luts = _split_keys(self.launch_dims, grids, 2)
            grid_text = np.asarray([_dims_text(o) for o in grids.objects()] + [""], dtype=object)
            gpu["grid"] = grid_text[luts[0][gpu["grid"]]]
            gpu["block"] = grid_text[luts[1][gpu["block"]]]
        if cpu:
            shape_tables = [RawTable() for _ in _SHAPE_COLUMNS]
            luts = _split_keys(self.cpu_shapes, shape_tables, len(_SHAPE_COLUMNS))
            for key, table, lut, ok in zip(
                _SHAPE_COLUMNS,
                shape_tables,
                luts,
                (_list_of_lists, _list_of_str, _list_of_lists, _list_of_str),
                strict=True,
            ):
                # the contract: a list (of lists / of str) or None; anything else in the file is unknown
                cpu[key] = take([o if ok(o) else None for o in table.objects()], lut[cpu[key]])
        warnings = []
        if self.lenient or self.bad[0]:
            count = f"{self.bad[0]:,} values" if self.bad[0] and not self.lenient else "some values"
            warnings.append(
                f"{count} of unexpected types (e.g. a string where a number belongs) were read as unknown (NaN / -1)"
            )
        if self.bad_utf8:
            warnings.append("invalid UTF-8 inside some strings was replaced by U+FFFD")
        categories = {("" if c is None else str(c)): k for c, k in self.categories.items()}
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


_SEP = b"\x00"  # joins an event's snippets into one key: a NUL byte cannot occur in JSON text (msgspec rejects it)
_SHAPE_COLUMNS = ("input_dims", "input_types", "input_strides", "concrete_inputs")


def _split_keys(joined: RawTable, tables, n: int) -> list[np.ndarray]:
    """Per part j of the joined keys: the code in tables[j] (one table for every part when a single table is
    given) of each joined key, indexable by the joined code."""
    parts = [b.split(_SEP) for b in joined.blobs()]  # n parts each: msgspec refuses a NUL even inside a Raw
    if isinstance(tables, RawTable):
        tables = [tables] * n
    return [tables[j].codes_of_bytes([p[j] for p in parts]) for j in range(n)]


def _remap(codes: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Worker codes → merged codes; -1 (absent) stays -1."""
    if not len(lut):
        return np.full(len(codes), -1, dtype=np.int64)
    return np.where(codes >= 0, lut[np.maximum(codes, 0)], -1)


def _concat(parts: list[dict]) -> dict:
    """One dict of columns from per-batch dicts. Consumes `parts`: each column's pieces are popped and freed as
    soon as that column is joined, so the peak is the pieces + ONE joined column, not twice every column."""
    if not parts:
        return {}
    if len(parts) == 1:
        return parts.pop()
    out = {}
    for key in list(parts[0]):
        pieces = [p.pop(key) for p in parts]
        if isinstance(pieces[0], list):
            out[key] = list(itertools.chain.from_iterable(pieces))
        else:
            out[key] = np.concatenate(pieces)
        del pieces
    parts.clear()
    return out


def _list_of_lists(obj) -> bool:
    return isinstance(obj, list) and all(isinstance(x, list) for x in obj)


def _list_of_str(obj) -> bool:
    return isinstance(obj, list) and all(isinstance(x, str) for x in obj)


def _dims_text(obj) -> str:
    """[50, 1, 1] → '50,1,1' (GPU_OPS grid/block); anything else → '' (unknown)."""
    if isinstance(obj, list) and obj and all(isinstance(x, int) and not isinstance(x, bool) for x in obj):
        return ",".join(map(str, obj))
    return ""
