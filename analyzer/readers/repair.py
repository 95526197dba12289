"""The document stage with repairs: what a real trace file needs before its events can be read.

Only tried after the fast split has failed, so a clean trace pays nothing (analyzer.readers.load):
* truncated JSON (a killed run leaves the array unclosed; a cut gzip stream): keep every complete event, drop the
  partial tail, say how many bytes were dropped;
* raw control characters inside strings, ``NaN`` / ``Infinity`` / ``nan`` / ``inf`` / bare ``N/A`` values (→ null,
  i.e. unknown), trailing commas before ``]`` / ``}``: fixed by targeted byte substitutions;
* invalid UTF-8 inside strings: U+FFFD for the bad bytes;
* anything else: ``TraceError('<file>: invalid JSON at line L, column C: …')``, or one line saying what the file is
  when it is not JSON text at all (a zip, bzip2, zstd … file; a bare JSON value).
"""

from __future__ import annotations

import re

import msgspec
from msgspec import Raw

from analyzer.errors import TraceError
from analyzer.readers.document import BOM, ShapeError, skip_ws, split_document


def parse_document(
    data, source: str, damaged: bool = False, _utf8_fixed: bool = False
) -> tuple[str, dict, Raw, list[str]]:
    """Top-level split with repairs. Returns (form, header, events array view, warnings).

    damaged: the bytes are known to be corrupt (gzip CRC mismatch / broken deflate): a syntax error is then
    treated as the end of the good data, like a truncation, instead of an error."""
    if skip_ws(memoryview(data), 0, len(data)) == len(data):
        raise TraceError(source, "empty file")
    if bytes(data[:3]) == BOM:
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
    for m in _boundaries_back(b, window):
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


_EVENT_GAP = re.compile(rb"\}\s*,\s*\{")


def _boundaries_back(b: bytes, window: int):
    """Positions of '}' in '},{' event boundaries, from the end backwards (searching growing windows)."""
    end = len(b)
    seen_from = end
    while seen_from > 0:
        start = max(0, seen_from - window)
        hits = [m.start() for m in _EVENT_GAP.finditer(b, start, min(end, seen_from + 64))]
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
