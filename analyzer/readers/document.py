"""The document stage: the top level of a trace file split from its events array, which stays a zero-copy view.

``split_document`` validates the whole document in one msgspec pass and decodes the few header keys we show;
``split_events_unchecked`` finds the events array without that pass (0.7 s per GiB), leaving its syntax to the batch
decode. Both raise msgspec's ``DecodeError`` (syntax, truncation) or ``ShapeError`` (valid JSON, not a trace);
analyzer.readers.repair turns those into repairs or ``TraceError``.
"""

from __future__ import annotations

import re

import msgspec
from msgspec import Raw

from analyzer.readers.events import EVENT_LIST, ObjectForm

BOM = b"\xef\xbb\xbf"  # Windows editors prepend a UTF-8 byte-order mark; JSON parsers reject it


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
    for m in EVENT_BOUNDARY.finditer(view, max(start, close - _HEAD_BYTES), close):
        start = m.end() - 1
    if start < close - _HEAD_BYTES:
        return False  # a last object over 1 MiB: left to split_document
    return bool(EVENT_LIST.decode(b"[" + bytes(view[start:close]) + b"]"))  # no "ph": ValidationError


def _first_byte(buf) -> int:
    view = memoryview(buf)
    pos = len(BOM) if bytes(view[: len(BOM)]) == BOM else 0
    pos = skip_ws(view, pos, len(view))
    return view[pos] if pos < len(view) else -1


EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{(?=\s*\")")

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
