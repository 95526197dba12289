"""Bytes in: paths and uploads, gzip with a cap, JSON repair, truncation recovery → ``Trace``.

``load_trace(src, name=None, *, max_decompressed_bytes=None, max_gzip_ratio=None)``

* ``src``: a path (``str`` / ``os.PathLike``) or the raw bytes of an upload (then ``name`` names it in messages).
  Gzip is detected by its magic bytes (1f 8b), never by the file name.
* Decompression is streamed in 1 MiB steps and refused as soon as the output passes the cap, so a gzip bomb
  (a few KB inflating to many GB) costs at most ``cap`` bytes of memory. Cap: argument
  ``max_decompressed_bytes``, else env ``FUSELENS_MAX_DECOMPRESSED_BYTES``, else 8 GiB (a 2 GB trace on a
  24 GiB machine peaks near 4 GB RSS; 8 GiB of JSON would not fit in memory on such a machine anyway).
  The same cap bounds an uncompressed file or upload.
* Bomb and padding guard (``GzipGuard``): past 256 MiB of output, a gzip inflating more than 50:1 (argument
  ``max_gzip_ratio``, else env ``FUSELENS_MAX_GZIP_RATIO``; 0 = off) or holding ≥ 95% whitespace/NUL is
  refused while it inflates, so a 4 MB file of 4 GiB of spaces is answered after 256 MiB, not 4 GiB.
  The gzip trailer's size field is never used to allocate.
* Repairs (only tried after the fast decode has failed, so a clean trace pays nothing):
  - truncated JSON (a killed run leaves the array unclosed; a cut gzip stream): keep every complete event,
    drop the partial tail, say how many bytes were dropped in ``trace.meta.warnings``;
  - raw control characters inside strings, ``NaN`` / ``Infinity`` / ``nan`` / ``inf`` / bare ``N/A`` values
    (→ null, i.e. unknown), trailing commas before ``]`` / ``}``: fixed by targeted byte substitutions;
  - anything else: ``TraceError('<file>: invalid JSON at line L, column C: …')``.
* Outcomes by input (tests/data/broken/EXPECTED.json is the tested table):
  empty file / whitespace → TraceError; not JSON → TraceError; JSON of another shape → TraceError;
  no events / only metadata events → TraceError; a Chrome, JAX or TensorFlow trace without Kineto
  categories → TraceError naming what it looks like; a PyTorch trace with CPU ops but no GPU activity →
  loads, with a warning; gzip with a bad CRC → loads, with a warning (inflate succeeded; only the checksum
  disagrees); a truncated gzip stream → loads what inflated, with a warning.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import numpy as np
from msgspec import Raw

from analyzer.errors import TraceError
from analyzer.readers.decode import (
    OWNED_BUFFERS,
    BufferReleased,
    ShapeError,
    accumulate_events,
    finish,
    skip_ws,
    split_document,
    split_events_unchecked,
)
from analyzer.readers.files import open_regular
from analyzer.readers.limits import ENV_MAX_DECOMPRESSED, ENV_MAX_GZIP_RATIO, default_limits
from fuselens import settings

try:  # zlib-ng: the same inflate, ~3.5× faster on runs of whitespace (a bomb is refused sooner), CRC-32 ~5×
    from zlib_ng import zlib_ng as zlib
except ImportError:  # a machine without it (a bare GPU box, a Ray node): the standard library's, same results
    import zlib

if TYPE_CHECKING:  # analyzer.trace imports pandas: a gzip bomb is refused before that (0.25 s idle, 2–3 s busy)
    from analyzer.trace import Trace

DEFAULT_MAX_DECOMPRESSED_BYTES = 8 * 1024**3
# 50: real Kineto traces deflate 8-30:1 (the public ResNet-50 traces 28-30:1, the 2 M-kernel dense one 13:1); valid
# JSON built to deflate 59:1 (3.2 GB from 54 MB) passed 100 and cost 3.2 GB of memory before this answered it.
DEFAULT_MAX_GZIP_RATIO = 50.0
_CHUNK = 1 << 20  # 1 MiB of output per inflate step: the overshoot past the cap is at most this
_GZIP_MAGIC = b"\x1f\x8b"


def decompression_cap(override: int | None = None) -> int:
    """The decompression cap in force: argument, else $FUSELENS_MAX_DECOMPRESSED_BYTES (> 0), else 8 GiB."""
    if override is not None:
        return int(override)
    value = _env_number(ENV_MAX_DECOMPRESSED, "a number of bytes")
    return int(value) if value is not None and value > 0 else DEFAULT_MAX_DECOMPRESSED_BYTES


def _env_number(name: str, what: str) -> float | None:
    """A limit from the environment: None when unset or blank; TraceError naming the variable when not a number."""
    env = settings.text(name)
    if not env:
        return None
    try:
        return float(env)
    except ValueError:
        raise TraceError(name, f"not {what}: {env!r}") from None


def load_trace(
    src: str | os.PathLike | bytes,
    name: str | None = None,
    *,
    max_decompressed_bytes: int | None = None,
    max_gzip_ratio: float | None = None,
    cache: bool | None = None,
    key: str | None = None,
) -> Trace:
    """Read a Kineto trace (path or upload bytes, plain or gzip) into a ``Trace``. Raises ``TraceError``.

    cache: reuse / write the columnar cache (analyzer.readers.cache); None = on unless $FUSELENS_NO_CACHE. A
    load with a non-default limit (argument or environment) neither reads nor writes it: a cached trace was
    accepted under the default limits, and must not slip past a stricter (or looser) one.
    key: the content key of `src` when the caller already has it (cache.load_summary), so the bytes are not
    hashed a second time (0.1–0.35 s per GB).
    """
    from analyzer.readers import cache as cache_mod

    is_bytes = isinstance(src, (bytes, bytearray, memoryview))
    source = name or ("upload" if is_bytes else Path(src).name)
    known, key = key, None
    if cache_mod.enabled(cache) and default_limits(max_decompressed_bytes, max_gzip_ratio):
        try:
            key = known if known is not None else cache_mod.content_key(src)
        except (OSError, ValueError):
            key = None  # a missing file, a directory …: the reader below says what is wrong
        if key is not None:
            hit = cache_mod.lookup(key, source)
            if hit is not None:
                return hit
    trace = _parse(src, source, is_bytes, max_decompressed_bytes, max_gzip_ratio)
    if key is not None:
        cache_mod.store(key, trace)
    return trace


def _parse(
    src, source: str, is_bytes: bool, max_decompressed_bytes, max_gzip_ratio, workers=None, quick: bool = True
) -> Trace:
    cap = decompression_cap(max_decompressed_bytes)
    guard = GzipGuard(source, max_gzip_ratio)
    if is_bytes:
        data, warnings = read_bytes(bytes(src) if isinstance(src, memoryview) else src, source, cap, guard)
    else:
        data, warnings = read_path(Path(src), source, cap, guard)
    damaged = any("checksum" in w or "corrupt" in w for w in warnings)
    # the quick split leaves the events' syntax to the batch decode; anything it objects to is read again, the
    # whole way (validation pass, repairs, their warnings)
    unchecked = split_events_unchecked(data) if quick and not damaged and bytes(data[:3]) != _BOM else None
    form, header, events, more = (*unchecked, []) if unchecked else parse_document(data, source, damaged)
    warnings += more
    buf = data if isinstance(data, OWNED_BUFFERS) else None
    del data  # `events` is a view that keeps the buffer alive exactly as long as decoding needs it
    try:
        # release: a buffer read or inflated here (not the caller's upload) is read by nothing after this, so a
        # parallel decode may give its pages back
        acc = accumulate_events(events, buf, workers, release=buf is not None and buf is not src)
    except BufferReleased:  # a decode worker failed after pages were given back: once more, in this process
        del events, buf
        return _parse(src, source, is_bytes, max_decompressed_bytes, max_gzip_ratio, workers=1, quick=False)
    except (msgspec.DecodeError, RecursionError) as err:
        if unchecked:  # the events were not validated up front: read the file again, the whole way
            del events, buf
            return _parse(src, source, is_bytes, max_decompressed_bytes, max_gzip_ratio, workers, quick=False)
        if isinstance(err, RecursionError):
            raise TraceError(source, "JSON nested too deeply to read (msgspec stops at ~1,000 levels)") from None
        # the validation pass skips strings' contents; a batch can still object
        raise TraceError(source, f"invalid JSON inside traceEvents ({err})") from None
    del events, buf  # the JSON buffer is freed here, before the batches are joined into columns
    decoded = finish(acc, form, header)
    del acc
    decoded.warnings[:0] = warnings
    from analyzer.trace import build_trace

    return build_trace(decoded, source)


# ---------------------------------------------------------------------------------------------------- bytes
def read_path(path: Path, source: str, cap: int, guard: GzipGuard | None = None) -> tuple[bytearray | bytes, list[str]]:
    try:
        with open_regular(path) as f:
            head = f.read(2)
            f.seek(0)
            if head == _GZIP_MAGIC:
                return _gunzip(f, source, cap, guard)
            size = os.fstat(f.fileno()).st_size
            if size > cap:
                raise TraceError(
                    source, f"file is {size:,} bytes, over the {cap:,}-byte limit ({ENV_MAX_DECOMPRESSED})"
                )
            buf = _new_buffer(size)
            got = f.readinto(buf)
            if got != size:
                buf = buf[:got] if isinstance(buf, bytearray) else bytearray(memoryview(buf)[:got])
            return buf, []
    except FileNotFoundError:
        raise TraceError(source, "no such file") from None
    except IsADirectoryError:
        raise TraceError(source, "is a directory, not a trace file") from None
    except PermissionError:
        raise TraceError(source, "permission denied") from None
    except OSError as err:  # a FIFO, device or socket, a symlink loop, a name too long …: one line, never a hang
        raise TraceError(source, err.strerror or str(err)) from None


_BIG_READ_BYTES = 64 << 20


def _new_buffer(size: int):
    """A writable buffer of `size` bytes to read a file into (f.read() would peak at 2× for a moment).

    A big one is a private anonymous map: ``bytearray(size)`` zero-fills it first, one more pass over the
    memory, while the map's pages are zeroed by the kernel as the read first touches them (1 GiB: 0.8–1.0 s
    against 1.1–1.6 s on the 2-core dev box; transparent huge pages were slower and erratic there, compaction).
    Private: a forked decode worker's in-place bracketing stays its own. Elsewhere: a bytearray."""
    import mmap

    if size >= _BIG_READ_BYTES and hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS"):
        with contextlib.suppress(OSError):
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return bytearray(size)


def read_bytes(
    data: bytes | bytearray, source: str, cap: int, guard: GzipGuard | None = None
) -> tuple[bytes | bytearray, list[str]]:
    if data[:2] == _GZIP_MAGIC:
        import io

        return _gunzip(io.BytesIO(data), source, cap, guard)
    if len(data) > cap:
        raise TraceError(source, f"upload is {len(data):,} bytes, over the {cap:,}-byte limit ({ENV_MAX_DECOMPRESSED})")
    return data, []


def _gunzip(f, source: str, cap: int, guard: GzipGuard | None = None) -> tuple[bytearray, list[str]]:
    """Inflate a (possibly multi-member) gzip stream in bounded steps, under the cap and the bomb guard.

    Raw deflate with our own header/trailer handling (not wbits=31): zlib would raise on a bad CRC and throw
    away the last chunk of output; here a bad CRC or a cut stream keeps everything that inflated, with a warning.
    The output grows by appending (glibc moves a big buffer with mremap, no copy: 1 GiB in 1 MiB steps peaks at
    1.0 GiB); the trailer's size field is only compared, never used to allocate (a 4 MB file may claim 4 GiB).
    """
    f = _Counted(f)
    guard = guard or GzipGuard(source)
    out = bytearray()
    warnings: list[str] = []
    buf = f.read(_CHUNK)
    members = 0
    while True:
        buf = _read_more(f, buf, 1 << 16)  # a gzip header (with file name/comment) fits in 64 KiB
        if members and not buf.strip(b"\x00"):
            return out, warnings  # end of file (zero padding allowed)
        h = _gzip_header_len(buf)
        if h is None or h < 0:
            if members == 0:
                problem = (
                    "gzip stream is cut inside its header" if h is None else "not a valid gzip stream (bad header)"
                )
                raise TraceError(source, problem)
            warnings.append(f"ignored {len(buf):,}+ bytes of trailing data after the gzip stream")
            return out, warnings
        buf = buf[h:]
        d = zlib.decompressobj(wbits=-15)
        crc = size = 0
        while not d.eof:
            if not buf:
                buf = f.read(_CHUNK)
                if not buf:
                    if not out:
                        raise TraceError(source, "gzip stream is cut before any data")
                    warnings.append(f"gzip stream is truncated: kept the {len(out):,} bytes that inflated")
                    return out, warnings
            try:
                chunk = d.decompress(buf, _CHUNK)
            except zlib.error as err:
                if not out:
                    raise TraceError(source, f"not a valid gzip stream ({err})") from None
                warnings.append(f"gzip data corrupt after {len(out):,} bytes ({err}); kept what inflated")
                return out, warnings
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            out += chunk
            if len(out) > cap:
                raise TraceError(
                    source,
                    f"decompresses to more than {cap:,} bytes (the limit; raise it with {ENV_MAX_DECOMPRESSED} or"
                    " max_decompressed_bytes)",
                )
            buf = d.unused_data if d.eof else d.unconsumed_tail
            guard.add(chunk, len(out), f.n - len(buf))
        buf = _read_more(f, buf, 8)
        if len(buf) < 8:
            warnings.append("gzip stream is truncated (its 8-byte trailer is missing); the data inflated completely")
            return out, warnings
        crc_file, size_file = struct.unpack("<II", buf[:8])
        if crc_file != crc or size_file != size & 0xFFFFFFFF:
            warnings.append("gzip checksum mismatch: the data inflated but may be corrupt")
        buf = buf[8:]
        members += 1


class _Counted:
    """A binary file that counts the bytes read from it (compressed input consumed, for the ratio)."""

    def __init__(self, f):
        self.f, self.n = f, 0

    def read(self, size: int) -> bytes:
        data = self.f.read(size)
        self.n += len(data)
        return data


class GzipGuard:
    """Refuses a gzip that is a bomb or padding, while it inflates (so the answer costs ~FLOOR bytes, not the
    whole inflation).

    Checked at every WINDOW of output once FLOOR bytes have inflated, over the output so far AND over the last
    WINDOW alone (a real head followed by gigabytes of spaces is caught at the first check past the floor):
    * ratio: inflated / compressed bytes above ``max_ratio`` (default 50). Kineto JSON compresses 8–30:1
      (the 2 M-kernel dense trace of bench/make_dense_trace.py: 13:1); runs of whitespace or a repeated byte
      deflate ~1,000:1.
    * padding: ≥ PADDING_SHARE of the bytes are whitespace, control characters or NUL (≤ 0x20). A real trace,
      even pretty-printed with deep indentation, holds names and numbers; a 4:1 mix of random whitespace
      would pass the ratio rule but not this one.
    ``max_ratio`` ≤ 0 or ∞ turns both checks off. Counting padding costs ~0.2 s per GiB (numpy), inflating
    ~3–4 s per GiB.
    """

    FLOOR = 256 << 20
    WINDOW = 64 << 20
    PADDING_SHARE = 0.95

    def __init__(self, source: str, max_ratio: float | None = None):
        self.source = source
        self.max_ratio = gzip_ratio_limit(max_ratio)
        self.on = 0 < self.max_ratio < math.inf
        self.pad = 0  # padding bytes so far
        self.mark = (0, 0, 0)  # (output, input, padding) at the last window boundary
        self.next_check = self.WINDOW

    def add(self, chunk: bytes, n_out: int, n_in: int) -> None:
        if not self.on:
            return
        self.pad += int(np.count_nonzero(np.frombuffer(chunk, np.uint8) <= 0x20))
        if n_out < self.next_check:
            return
        self.next_check = n_out + self.WINDOW
        w_out, w_in, w_pad = n_out - self.mark[0], n_in - self.mark[1], self.pad - self.mark[2]
        self.mark = (n_out, n_in, self.pad)
        if n_out < self.FLOOR:
            return
        spans = ((n_out, n_in, self.pad, "first"), (w_out, w_in, w_pad, "last"))
        for out, inp, _, what in spans:
            ratio = out / max(inp, 1)
            if ratio > self.max_ratio:
                raise TraceError(
                    self.source,
                    f"refused as a decompression bomb: the {what} {out:,} bytes inflated from {inp:,} ({ratio:,.0f}:1,"
                    f" over the {self.max_ratio:g}:1 limit; Kineto JSON compresses 8–30:1; {_GUARD_OVERRIDE})",
                )
        for out, inp, pad, what in spans:
            if pad >= self.PADDING_SHARE * out:
                raise TraceError(
                    self.source,
                    f"refused as padding: {pad / out:.0%} of the {what} {out:,} bytes inflated from {inp:,}"
                    f" ({out / max(inp, 1):,.0f}:1) are whitespace/NUL, not trace data ({_GUARD_OVERRIDE})",
                )


_GUARD_OVERRIDE = f"to load it anyway set {ENV_MAX_GZIP_RATIO} or max_gzip_ratio higher, or 0 for no check"


def gzip_ratio_limit(override: float | None = None) -> float:
    """The bomb guard's ratio limit: argument, else $FUSELENS_MAX_GZIP_RATIO, else 50. ≤ 0: no guard."""
    if override is not None:
        return float(override)
    value = _env_number(ENV_MAX_GZIP_RATIO, "a ratio")
    return DEFAULT_MAX_GZIP_RATIO if value is None else value


def _read_more(f, buf: bytes, need: int) -> bytes:
    while len(buf) < need:
        more = f.read(max(_CHUNK, need - len(buf)))
        if not more:
            break
        buf += more
    return buf


def _gzip_header_len(buf: bytes) -> int | None:
    """Length of the gzip member header at buf[0] (RFC 1952); None if buf is too short, -1 if not gzip."""
    if len(buf) < 10:
        return None if _GZIP_MAGIC.startswith(buf[:2]) else -1
    if buf[:2] != _GZIP_MAGIC or buf[2] != 8:
        return -1
    flags, pos = buf[3], 10
    if flags & 4:  # FEXTRA
        if len(buf) < pos + 2:
            return None
        pos += 2 + (buf[pos] | buf[pos + 1] << 8)
    for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & bit:
            z = buf.find(b"\x00", pos)
            if z < 0:
                return None
            pos = z + 1
    if flags & 2:  # FHCRC
        pos += 2
    return pos if len(buf) >= pos else None


# ---------------------------------------------------------------------------------------------------- JSON
def parse_document(
    data, source: str, damaged: bool = False, _utf8_fixed: bool = False
) -> tuple[str, dict, Raw, list[str]]:
    """Top-level split with repairs. Returns (form, header, events array view, warnings).

    damaged: the bytes are known to be corrupt (gzip CRC mismatch / broken deflate): a syntax error is then
    treated as the end of the good data, like a truncation, instead of an error."""
    if skip_ws(memoryview(data), 0, len(data)) == len(data):
        raise TraceError(source, "empty file")
    if bytes(data[:3]) == _BOM:
        data = memoryview(data)[3:]  # Windows editors prepend a UTF-8 byte-order mark; JSON parsers reject it
    try:
        try:
            return (*split_document(data), [])
        except msgspec.DecodeError as err:
            return _repair(data, source, err, damaged)
    except ShapeError as err:
        raise TraceError(source, what_it_is(data, source) or str(err)) from None
    except UnicodeDecodeError:
        if _utf8_fixed:
            raise TraceError(source, "invalid UTF-8 that could not be repaired") from None
        # invalid UTF-8 in a string (a name with Latin-1 bytes): U+FFFD for the bad bytes, then read on — on
        # every path (the repairs call msgspec again)
        fixed = bytes(data).decode("utf-8", errors="replace").encode()
        form, header, events, warnings = parse_document(fixed, source, damaged, _utf8_fixed=True)
        return form, header, events, [_UTF8_WARNING, *warnings]
    except RecursionError:
        raise TraceError(source, "JSON nested too deeply to read (msgspec stops at ~1,000 levels)") from None


# What a file that is not JSON text actually is, by its first bytes (after any gzip layer was inflated): a user who
# zipped a trace, compressed it twice or used another compressor is told that, not "not JSON".
_MAGIC = (
    (b"\x1f\x8b", "gzip data inside the gzip (compressed twice): gunzip it once"),
    (b"PK\x03\x04", "a zip archive: unzip it and load the .json inside (FuseLens reads .json and .json.gz)"),
    (b"BZh", "bzip2-compressed: decompress it (bunzip2) or recompress it with gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed: decompress it (unzstd) or recompress it with gzip"),
    (b"\xfd7zXZ\x00", "xz-compressed: decompress it (unxz) or recompress it with gzip"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive: extract the .json inside"),
)
_SCALAR_MAX_BYTES = 1 << 16  # a bare JSON value this small is decoded to say what it is ("42")


def what_it_is(data, source: str) -> str | None:
    """One line saying what a file that is not a JSON object/array is, or None when its first bytes say nothing."""
    head = bytes(memoryview(data)[:16]).lstrip(b" \t\r\n")
    gz_name = str(source).lower().endswith(".gz")
    for magic, what in _MAGIC:
        if head.startswith(magic):
            if magic == b"\x1f\x8b" or not gz_name:
                return f"not JSON: {what}"
            return f"named .gz but not gzip-compressed: {what}"
    plain_text = "named .gz but not gzip-compressed, and not JSON either" if gz_name else None
    if len(data) <= _SCALAR_MAX_BYTES:
        try:
            value = msgspec.json.decode(bytes(data))
        except (msgspec.DecodeError, UnicodeDecodeError):
            return plain_text
        if isinstance(value, (dict, list)):
            return None  # an object or array of another shape: split_document's own message says which
        kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(type(value), "null")
        shown = msgspec.json.encode(value).decode()[:40]
        return (
            f"valid JSON, but {kind} ({shown}), not a trace: a PyTorch profiler trace is a JSON object with "
            "'traceEvents'"
        )
    return plain_text


_UTF8_WARNING = "invalid UTF-8 inside some strings was replaced by U+FFFD"
_BOM = b"\xef\xbb\xbf"


_CONTROL_TO_SPACE = bytes.maketrans(bytes(range(0x20)), b" " * 0x20)
_LOW = bytes(c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D))
_LOW_CONTROL = re.compile(b"[" + re.escape(_LOW) + b"]")
_LOW_CONTROL_TO_SPACE = bytes.maketrans(_LOW, b" " * len(_LOW))
# A bare non-JSON value in value position: after ':' '[' or ',', before ',' ']' '}'.
_BARE_VALUE = re.compile(rb"([:\[,]\s*)(?:-?Infinity|-?inf|-?nan|NaN|N/A|undefined)(\s*[,\]}])")
_TRAILING_COMMA = re.compile(rb",(\s*[\]}])")


def _repair(data, source: str, first_error: msgspec.DecodeError, damaged: bool) -> tuple[str, dict, Raw, list[str]]:
    warnings: list[str] = []
    buf = data
    err: Exception = first_error
    if "truncated" not in str(err):
        buf, fixes = _fix_syntax(buf)
        if fixes:
            try:
                return (*split_document(buf), [f"repaired JSON: {', '.join(fixes)}"])
            except msgspec.DecodeError as e2:
                err = e2
                warnings.append(f"repaired JSON: {', '.join(fixes)}")
            except ShapeError as e2:
                raise TraceError(source, str(e2)) from None
    if "truncated" in str(err):
        return _recover_truncated(buf, source, warnings)
    pos = _error_byte(first_error)
    if damaged and pos is not None:
        return _recover_truncated(bytes(memoryview(data)[:pos]), source, warnings)
    raise TraceError(source, f"invalid JSON {_where(data, first_error)}") from None


def _error_byte(err: msgspec.DecodeError) -> int | None:
    m = re.search(r"\(byte (\d+)\)", str(err))
    return int(m.group(1)) if m else None


def _fix_syntax(buf) -> tuple[bytes, list[str]]:
    fixes = []
    b = bytes(buf)
    # Raw control characters: invalid inside JSON strings, mere whitespace outside; ' ' is safe in both places.
    # \n \r \t are left alone (they are the file's own whitespace; line numbers stay right for messages).
    if _LOW_CONTROL.search(b):
        b = b.translate(_LOW_CONTROL_TO_SPACE)
        fixes.append("control characters → space")
    new, n = _BARE_VALUE.subn(rb"\1null\2", b)
    if n:
        # twice: "[NaN,NaN]" shares the ',' between two matches
        new, n2 = _BARE_VALUE.subn(rb"\1null\2", new)
        b = new
        fixes.append(f"{n + n2} NaN/Infinity/N/A values → null")
    new, n = _TRAILING_COMMA.subn(rb"\1", b)
    if n:
        b = new
        fixes.append(f"{n} trailing commas removed")
    try:
        split_document(b)
    except msgspec.DecodeError as err:
        msg = str(err)
        if "invalid character" in msg:
            # newlines/tabs raw inside strings (e.g. a multi-line name): blank them all, at the cost of line numbers
            b2 = b.translate(_CONTROL_TO_SPACE)
            if b2 != b:
                try:
                    split_document(b2)
                    fixes.append("raw newlines/tabs inside strings → space")
                    return b2, fixes
                except (msgspec.DecodeError, ShapeError):
                    pass
    except ShapeError:
        pass
    return b, fixes


def _recover_truncated(buf, source: str, warnings: list[str]):
    """Keep every complete event of a cut-off file: close the events array after the last complete event."""
    b = bytes(buf) if not isinstance(buf, bytes) else buf
    first = b[skip_ws(memoryview(b), 0, len(b)) :][:1]
    closers = [b"]"] if first == b"[" else [b"]}", b"}"]
    n = len(b)
    tried = 0
    # Candidate cut points, latest first: the last '}' (events closed, trailer cut), then event boundaries '},{'.
    candidates = []
    last = b.rfind(b"}")
    if last >= 0:
        candidates.append(last)
    window = 1 << 16
    for m in _BOUNDARY_BACK(b, window):
        if m not in candidates:
            candidates.append(m)
        if len(candidates) >= 6:
            break
    for pos in candidates:
        for close in closers:
            tried += 1
            try:
                form, header, events = split_document(b[: pos + 1] + close)
            except (msgspec.DecodeError, ShapeError):
                continue
            if b"{" not in bytes(memoryview(events)[:4096]):
                break  # no complete event survived
            dropped = n - (pos + 1)
            warnings.append(
                f"file is truncated: dropped its last {dropped:,} bytes (an incomplete event"
                f"{' and the keys after traceEvents' if form == 'object' else ''}); every complete event was kept, but"
                " whatever was recorded after the cut is missing: the last steps may be partial and the figures"
                " cover only the steps before it"
            )
            return form, header, events, warnings
    raise TraceError(source, f"truncated JSON with no complete event to recover ({n:,} bytes)")


_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def _BOUNDARY_BACK(b: bytes, window: int):
    """Positions of '}' in '},{' event boundaries, from the end backwards (searching growing windows)."""
    end = len(b)
    seen_from = end
    while seen_from > 0:
        start = max(0, seen_from - window)
        hits = [m.start() for m in _BOUNDARY.finditer(b, start, min(end, seen_from + 64))]
        for h in reversed(hits):
            if h < seen_from:
                yield h
        seen_from = start
        window *= 4


def _where(data, err: msgspec.DecodeError) -> str:
    pos = _error_byte(err)
    reason = re.sub(r"\s*\(byte \d+\)", "", str(err)).replace("JSON is malformed: ", "")
    if pos is None:
        return f"({reason})"
    b = memoryview(data)
    line = bytes(b[:pos]).count(b"\n") + 1
    col = pos - (bytes(b[:pos]).rfind(b"\n") + 1) + 1
    return f"at line {line}, column {col}: {reason}"
