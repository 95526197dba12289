"""The batch stage: the events array decoded ~CHUNK_BYTES at a time into lists of event Structs.

Chunks are cut at ``},{"`` boundaries and bracketed in place in the reader's own buffer (no copy of the file); a batch
whose values have unexpected types (``"dur": [1]``, a non-object event) is decoded again with the lenient structs,
and one holding invalid UTF-8 with U+FFFD for the bad bytes. Marks at the end of a batch tell the accumulator
(analyzer.readers.columns) so, for its warnings. One batch of Structs is alive at a time.
"""

from __future__ import annotations

import contextlib
import mmap
import re

import msgspec
import numpy as np
from msgspec import Raw

from analyzer.readers.document import EVENT_BOUNDARY, skip_ws, skip_ws_back
from analyzer.readers.events import (
    EVENT_LIST,
    LENIENT_ARGS,
    LENIENT_LIST,
    NO_ARGS,
    RAW_LIST,
    SKIP_TYPES,
    Args,
    Event,
    LenientArgs,
    LenientEvent,
    Meta,
)

# 4 MiB of JSON per batch (~16k events): one batch of Structs (~400 B per event, ~6 MB) stays in the CPU caches
# while its columns are pulled (each pull touches every Struct again): fewer cache misses than 32 MiB batches,
# per-batch Python overhead is still noise (~260 batches per GB), and peak RSS ≈ the JSON itself
# + the columns + 6 MB.
CHUNK_BYTES = 4 << 20

# Writable buffers a reader fills (analyzer.readers.load): decoded in place, their pages given back as it goes.
OWNED_BUFFERS = (bytearray, mmap.mmap)


def event_batches(events: Raw, chunk_bytes: int | None = None, buf: bytearray | None = None, release: bool = False):
    """Yield lists of Event Structs, decoding the events array ~chunk_bytes at a time.

    buf: the bytearray that `events` views. Then each chunk is bracketed IN PLACE (the separator bytes before and
    after it become '[' and ']' for the decode, then are restored) instead of being copied: saves a full copy of
    the file (~0.2 s per GB).
    """
    view, buf, pos, end = events_span(events, buf)
    yield from batches_in(view, buf, pos, end, chunk_bytes or CHUNK_BYTES, release)


def events_span(events: Raw, buf):
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


def batches_in(view, buf, pos: int, end: int, chunk_bytes: int, release: bool = False):
    """Decode the events in view[pos:end] (pos at an event's '{', end just after an event's '}').

    release: once a batch has been consumed, the buffer pages it came from go back to the system (release_pages): the
    JSON shrinks as the columns grow, instead of both being whole at the end.

    Cuts at '},{"' boundaries: inside a JSON string a quote is escaped (\\"), so that text cannot be in a
    string; it can only be a boundary or sit in a nested array of objects. A wrong cut leaves one side with
    unbalanced brackets: msgspec says so, and the cut moves to the next boundary. A wrong cut costs time, never
    correctness.
    """
    while pos < end:
        search_from = pos + chunk_bytes
        while True:
            m = EVENT_BOUNDARY.search(view, search_from, end) if search_from < end else None
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
                release_pages(buf, pos, cut)
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
        batch.append(UTF8_MARK)
        return batch


def _typed_or_lenient(blob) -> list:
    try:
        return EVENT_LIST.decode(blob)
    except (msgspec.ValidationError, OverflowError):
        return _lenient_batch(blob)


def _lenient_batch(blob: bytes) -> list:
    """Re-decode a batch whose values have unexpected types; build Events holding whatever was there.

    Per-event Python, but only for such a batch (none of the 23 public traces needs it)."""
    try:
        items = LENIENT_LIST.decode(blob)
    except msgspec.ValidationError:
        items = []
        for raw in RAW_LIST.decode(blob):  # an item that is not an object at all: dropped
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
                la = LENIENT_ARGS.decode(ev.args)
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
    out.append(LENIENT_MARK)
    return out


def _text(v) -> str:
    return v if isinstance(v, str) else "" if v is None else str(v)


def _scalar(v):
    return v if isinstance(v, (int, float, str)) else None


LENIENT_MARK = Meta(name="\x00lenient")  # tells the accumulator this batch was coerced (for a warning)
UTF8_MARK = Meta(name="\x00utf8")  # … that invalid UTF-8 was replaced
_OTHER = SKIP_TYPES[0]()


def release_pages(buf, a: int, b: int) -> None:
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
