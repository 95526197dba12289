"""Bytes in: paths and uploads, gzip with a cap and a bomb guard; then the stages that make them raw tables.

``read_trace(src, source, *, max_decompressed_bytes=None, max_gzip_ratio=None) -> schema.RawTrace`` (the
pipeline's ``analyzer.pipeline.load_trace`` builds the ``Trace`` from it, through the cache):

* ``src``: a path (``str`` / ``os.PathLike``) or the raw bytes of an upload (``source`` names it in messages).
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
* Then, in one direction: the document split (``analyzer.readers.document``; its repairs, only tried after the
  fast way has failed so a clean trace pays nothing: ``analyzer.readers.repair``) → the event batches and their
  columns (``analyzer.readers.decode``).
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
import struct
from pathlib import Path

import msgspec
import numpy as np

from analyzer.errors import TraceError
from analyzer.readers.batches import OWNED_BUFFERS
from analyzer.readers.decode import BufferReleased, accumulate_events, finish
from analyzer.readers.document import BOM, split_events_unchecked
from analyzer.readers.files import open_regular
from analyzer.readers.limits import ENV_MAX_DECOMPRESSED, ENV_MAX_GZIP_RATIO
from analyzer.readers.repair import parse_document
from analyzer.schema import RawTrace
from fuselens import settings

try:  # zlib-ng: the same inflate, ~3.5× faster on runs of whitespace (a bomb is refused sooner), CRC-32 ~5×
    from zlib_ng import zlib_ng as zlib
except ImportError:  # a machine without it (a bare GPU box, a Ray node): the standard library's, same results
    import zlib

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


def read_trace(
    src: str | os.PathLike | bytes,
    source: str,
    *,
    max_decompressed_bytes: int | None = None,
    max_gzip_ratio: float | None = None,
    workers: int | None = None,
    quick: bool = True,
) -> RawTrace:
    """The raw tables of a Kineto trace (path or upload bytes, plain or gzip), its read warnings first; `source`
    names it in messages. The stages run in one direction: bytes (here) → document (split, else repairs) →
    event batches and columns (analyzer.readers.decode). Raises ``TraceError``.

    quick: split the events off without their validation pass; anything a batch objects to is read again, the
    whole way (validation pass, repairs, their warnings)."""
    is_bytes = isinstance(src, (bytes, bytearray, memoryview))
    cap = decompression_cap(max_decompressed_bytes)
    guard = GzipGuard(source, max_gzip_ratio)
    if is_bytes:
        data, warnings = read_bytes(bytes(src) if isinstance(src, memoryview) else src, source, cap, guard)
    else:
        data, warnings = read_path(Path(src), source, cap, guard)
    damaged = any("checksum" in w or "corrupt" in w for w in warnings)
    # the quick split leaves the events' syntax to the batch decode; anything it objects to is read again, the
    # whole way (validation pass, repairs, their warnings)
    unchecked = split_events_unchecked(data) if quick and not damaged and bytes(data[: len(BOM)]) != BOM else None
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
        return read_trace(
            src,
            source,
            max_decompressed_bytes=max_decompressed_bytes,
            max_gzip_ratio=max_gzip_ratio,
            workers=1,
            quick=False,
        )
    except (msgspec.DecodeError, RecursionError) as err:
        if unchecked:  # the events were not validated up front: read the file again, the whole way
            del events, buf
            return read_trace(
                src,
                source,
                max_decompressed_bytes=max_decompressed_bytes,
                max_gzip_ratio=max_gzip_ratio,
                workers=workers,
                quick=False,
            )
        if isinstance(err, RecursionError):
            raise TraceError(source, "JSON nested too deeply to read (msgspec stops at ~1,000 levels)") from None
        # the validation pass skips strings' contents; a batch can still object
        raise TraceError(source, f"invalid JSON inside traceEvents ({err})") from None
    del events, buf  # the JSON buffer is freed here, before the batches are joined into columns
    decoded = finish(acc, form, header)
    del acc
    decoded.warnings[:0] = warnings
    return decoded


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
