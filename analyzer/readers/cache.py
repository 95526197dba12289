"""Columnar cache of analysed traces: a file is parsed once; every later open reads its tables back.

    content_key(src) -> str          xxh3-128 of the file's (or upload's) bytes, 32 hex digits
    lookup(key, source) -> Trace | None
    store(key, trace) -> Path | None

Where: ``$FUSELENS_CACHE_DIR``, else ``$XDG_CACHE_HOME/fuselens``, else ``~/.cache/fuselens``; one file per
trace, ``<content key>-<analyzer version>.fltc``, plus ``stat/`` (the keys of unchanged paths). Clear it with
``python -m analyzer cache --clear`` or ``rm -rf ~/.cache/fuselens``. Off: ``FUSELENS_NO_CACHE=1``, the CLI's
``--no-cache``, or ``load_trace(…, cache=False)``. Size bound: ``$FUSELENS_CACHE_MAX_BYTES`` (default 4 GiB);
after each write the least recently used entries go until the folder fits (a hit refreshes an entry's time).

Key: the xxh3-128 hash of every byte of the file as stored (compressed or not). Why the whole content and
not size + mtime + samples: an upload has no mtime, a copied or renamed file keeps its key, an in-place edit that
keeps size and mtime still changes it, and xxh3 runs at ~3–10 GB/s (0.1–0.5 s for 1 GiB on the 2-core dev box,
against 1.8 s for blake2b). A path's key is remembered with its stat signature (``content_key``), so an
unchanged file is not even re-hashed.

Version: the entry's name carries a hash of the analyzer's code (every ``analyzer/**/*.py``), of the column
contract (``analyzer.schema``) and of ``FORMAT``. Any change to how a table is computed makes old entries
stale: they are never read, and are deleted when their trace is opened again (or evicted by size).

Format (``_write_container``): a JSON header and one data region, each with its own xxh3 hash, checked on read;
nothing in a cache file is ever executed (no pickle). Numeric columns are stored as they are. Object columns
(names, shape lists) are dictionary-encoded: an int32 code per row plus the distinct values as one JSON array, so
on read equal values share one object again (as the decoder made them) and a 1.5 M-row cpu_ops table with ~10^3
distinct names reads back in milliseconds. A value JSON cannot hold exactly (NaN inside an object column, a
tuple, a non-str dict key) makes ``store`` skip the trace: a cache never changes a result. The manifest holds
the key, the version, every column's dtype and row count, the index, and ``TraceMeta``; anything inconsistent or
unreadable on lookup deletes the entry and the trace is parsed again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import logging
import math
import mmap
import os
import stat
import tempfile
import time
from pathlib import Path

import orjson

from analyzer.readers.files import open_regular
from fuselens import settings

# numpy and pandas are imported where tables are built: a CLI `summary` answered from the cache (summary_json)
# and a refused gzip bomb never need them (pandas alone is 0.25 s of a fresh process on an idle box, 2–3 s busy).

log = logging.getLogger("fuselens.cache")

ENV_DIR = "FUSELENS_CACHE_DIR"
ENV_OFF = "FUSELENS_NO_CACHE"
ENV_MAX_BYTES = "FUSELENS_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30
FORMAT = 3  # 3: header sealed with the cache's secret (keyed blake2b), data hash seeded from it
SUFFIX = ".fltc"


# ---------------------------------------------------------------------------------------------------- settings
def cache_dir() -> Path:
    env = settings.text(ENV_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "fuselens"


def enabled(flag: bool | None = None) -> bool:
    """The argument wins; else on unless $FUSELENS_NO_CACHE is set to something other than '' / '0'."""
    if flag is not None:
        return bool(flag)
    return settings.text(ENV_OFF).lower() in ("", "0", "false", "no")


def max_bytes() -> int:
    env = settings.text(ENV_MAX_BYTES)
    try:
        return int(float(env)) if env else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


@functools.cache
def _code_hash() -> str:
    root = Path(__file__).resolve().parent.parent  # analyzer/
    h = hashlib.blake2b(digest_size=16)
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def version() -> str:
    """Hash of FORMAT, the analyzer's code and the live column contract (16 hex digits)."""
    from analyzer import schema

    h = hashlib.blake2b(digest_size=8)
    h.update(f"{FORMAT}\0{_code_hash()}\0{schema.markdown()}".encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------- secret
# Entries are bound to the cache's owner (docs/LOADING.md, "The cache's threat model"): every header and stat memo
# is sealed with a keyed blake2b under a 32-byte secret kept in the cache folder as .secret-<uid>, mode 0600, owned
# by that user and never followed through a symlink. Anyone else who can write the folder can delete or replace
# entries (the trace is then parsed again), but cannot make one that is read back: a forged entry or memo fails
# the seal and is rebuilt. A secret that is missing is made; one that is not ours (another owner, group- or
# world-readable, a symlink, the wrong size) is never used: this process then seals with a secret of its own that
# nothing on disk carries, so nothing there is trusted.
SECRET_BYTES = 32


def _secret_path() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return cache_dir() / f".secret-{uid}"


@functools.lru_cache(maxsize=8)
def _secret_for(path: str) -> bytes:
    p = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(2):
        try:
            fd = os.open(p, flags)
        except FileNotFoundError:
            made = _make_secret(p)
            if made is not None:
                return made
            continue  # another process made it first: read theirs
        except OSError as err:
            log.warning("cache secret %s not usable (%s): nothing cached on disk is trusted", p, err)
            break
        try:
            st = os.fstat(fd)
            mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
            if stat.S_ISREG(st.st_mode) and mine and not st.st_mode & 0o077 and st.st_size == SECRET_BYTES:
                data = os.read(fd, SECRET_BYTES + 1)
                if len(data) == SECRET_BYTES:
                    return data
            log.warning("cache secret %s is not this user's 0600 file: nothing cached on disk is trusted", p)
        finally:
            os.close(fd)
        break
    return _EPHEMERAL


_EPHEMERAL = os.urandom(SECRET_BYTES)  # this process only: what it writes is read back by nobody else


def _make_secret(p: Path) -> bytes | None:
    """Create the secret (0600), or None when it exists already (made by a concurrent process). Written to a
    temporary file first and linked into place, so a reader never sees it half-written."""
    data = os.urandom(SECRET_BYTES)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-secret-")  # 0600
    except OSError as err:
        log.warning("cache secret %s not written (%s): entries of this process are its own", p, err)
        return _EPHEMERAL
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.link(tmp, p)  # atomic, and refuses to replace what is there (a planted link included)
    except FileExistsError:
        return None
    except OSError as err:
        log.warning("cache secret %s not written (%s): entries of this process are its own", p, err)
        return _EPHEMERAL
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return data


def _secret() -> bytes:
    return _secret_for(str(_secret_path()))


def _mac(data: bytes) -> bytes:
    """16-byte seal of a header or memo under the cache's secret."""
    return hashlib.blake2b(data, digest_size=16, key=_secret(), person=b"fl-header").digest()


def _sealed(doc: dict) -> dict:
    return {**doc, "seal": _mac(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hex()}


def _unsealed(doc) -> bool:
    """True when a sealed document (stat memo) carries this cache's seal; the seal is popped."""
    if not isinstance(doc, dict):
        return False
    seal = doc.pop("seal", None)
    want = _mac(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hex()
    return isinstance(seal, str) and hmac.compare_digest(seal, want)


# ---------------------------------------------------------------------------------------------------- key
def content_key(src) -> str:
    """xxh3-128 of a path's bytes (``_hash_file``: a read-only map, no copy, ~16 MiB of it resident at a time) or
    of an upload's bytes. OSError propagates.

    A path's key is remembered with its stat signature (size, mtime and ctime in ns, inode, device) under
    ``stat/`` in the cache folder, so an unchanged file is not hashed again (0.5 s per GiB on a busy box). As
    git does against "racy" timestamps, the memo is only written for a file last changed over 2 s before it was
    hashed: any later write then gives it a newer mtime/ctime, whatever the clock's granularity."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        return _hash(src)
    path = Path(src)
    st = os.stat(path)
    sig = _stat_sig(st)
    memo = _memo_path(path)
    key = _memo_key(memo, sig)
    if key is not None:
        return key
    with open_regular(path) as f:  # a FIFO or device is refused at once, never hashed (it would block or not end)
        key = _hash_file(f)
    if _stat_sig(os.stat(path)) == sig and (time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > 2_000_000_000):
        with contextlib.suppress(OSError, ValueError):
            if _own_subdir(memo.parent, create=True):
                fd, tmp = tempfile.mkstemp(dir=memo.parent, prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(orjson.dumps(_sealed({"path": str(path), "sig": sig, "key": key})))
                os.replace(tmp, memo)
    return key


def known_key(path) -> str | None:
    """The content key of an unchanged path from its stat memo, else None; never reads the file (a caller that
    must not pay a hash, e.g. the `ranks` parent before it hands the files to its workers)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _memo_key(_memo_path(Path(path)), _stat_sig(st))


def _stat_sig(st: os.stat_result) -> list[int]:
    """What the stat memo compares: a write changes size, mtime or ctime; a replaced file its inode or device."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _memo_key(memo: Path, sig: list) -> str | None:
    """The key a stat memo holds for this signature, or None. The memo is read without following a symlink (at
    `stat/` or the file), must be a small regular file and carry this cache's seal: a forged memo pointing a path
    at another trace's key is ignored, and the path is hashed again."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        if not _own_subdir(memo.parent):
            return None
        with open_regular(memo, limit=1 << 16, what="stat memo", follow=False) as f:
            m = orjson.loads(f.read())
        if _unsealed(m) and m["sig"] == sig and isinstance(m["key"], str):
            return m["key"]
    return None


def _own_subdir(d: Path, create: bool = False) -> bool:
    """True when `d` (a folder inside the cache folder, e.g. stat/) is a real folder, not a symlink: the cache
    never reads, writes or deletes through a link out of its folder (a team-shared cache is writable by others)."""
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        if not create:
            return False
        with contextlib.suppress(FileExistsError):
            d.mkdir(parents=True, mode=0o700)
        st = os.lstat(d)
    return stat.S_ISDIR(st.st_mode)


def _memo_path(path: Path) -> Path:
    name = hashlib.blake2b(str(path.resolve()).encode(), digest_size=16).hexdigest()
    return cache_dir() / "stat" / f"{name}.json"


def _hasher():
    """(streaming hasher, key prefix): xxh3-128, or blake2b on a machine without xxhash (a bare GPU box: same
    contract, ~5× slower, its own keys)."""
    try:
        import xxhash
    except ImportError:
        return hashlib.blake2b(digest_size=15), "b2"
    return xxhash.xxh3_128(), ""


def _hash(data) -> str:
    h, prefix = _hasher()
    h.update(data)
    return prefix + h.hexdigest()


# A file is hashed through a read-only map a window at a time, each window's pages unmapped once hashed: mapped
# file pages count in the process' RSS and PSS, so a whole 1.9 GiB map would add 1.9 GiB to the peak. Windowed:
# +16 MiB, 0.14 s for 1.9 GiB from page cache (readinto into a buffer: 0.22–0.35 s).
_HASH_WINDOW_BYTES = 16 << 20


def _hash_file(f) -> str:
    size = os.fstat(f.fileno()).st_size
    if not size:
        return _hash(b"")
    h, prefix = _hasher()
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m, memoryview(m) as view:
        for start in range(0, size, _HASH_WINDOW_BYTES):
            h.update(view[start : start + _HASH_WINDOW_BYTES])
            if hasattr(m, "madvise"):  # Python ≥ 3.8 on POSIX; elsewhere the pages stay mapped until close
                m.madvise(mmap.MADV_DONTNEED, start, min(_HASH_WINDOW_BYTES, size - start))
    return prefix + h.hexdigest()


def entry_path(key: str, ver: str | None = None) -> Path:
    return cache_dir() / f"{key}-{ver or version()}{SUFFIX}"


# ---------------------------------------------------------------------------------------------------- lookup
def lookup(key: str, source: str):
    """The cached Trace for this content (meta.source set to `source`), or None. A stale or unreadable entry is
    deleted (so the caller parses the file again and stores a fresh one)."""
    ver = version()
    path = entry_path(key, ver)
    for stale in _glob(f"{key}-*{SUFFIX}"):
        if not stale.name.startswith(f"{key}-{ver}"):  # the trace's and its derived entries of this version stay
            _remove(stale, "stale version")
    if not _is_entry(path):
        return None
    try:
        trace = _read(path, key, ver, source)
    except Exception as err:  # a corrupt, truncated or foreign file: never trusted
        _remove_unreadable(path, err)
        return None
    _mark_used(path)
    return trace


def _read(path: Path, key: str, ver: str, source: str):
    from analyzer import gpus
    from analyzer.trace import Trace, TraceMeta

    manifest, arrays = _read_container(path)
    if manifest.get("format") != FORMAT or manifest.get("key") != key or manifest.get("version") != ver:
        raise ValueError("manifest does not match the entry's name")
    tables = {name: _read_table(arrays, name, spec) for name, spec in manifest["tables"].items()}
    meta = TraceMeta(**manifest["meta"])
    meta.source = source
    trace = Trace(meta=meta, **tables)
    trace.gpu = gpus.lookup(meta.device_properties, meta.gpu_name)
    return trace


def _read_table(z, table: str, spec: dict):
    import numpy as np
    import pandas as pd

    n = spec["rows"]
    cols = {}
    for col, dtype in spec["columns"]:
        base = f"{table}/{col}"
        if dtype == "object":
            values = orjson.loads(memoryview(z[base + "#values"]))
            codes = z[base + "#codes"]
            lut = np.empty(len(values), dtype=object)
            lut[:] = values
            arr = lut[codes] if len(codes) else np.empty(0, dtype=object)
            series = pd.Series(arr, dtype=object, copy=False)
        else:
            series = pd.Series(z[base], copy=False)
            if str(series.dtype) != dtype:
                series = series.astype(dtype)
        if len(series) != n:
            raise ValueError(f"{base}: {len(series)} rows, manifest says {n}")
        cols[col] = series
    index = z[f"{table}/#index"] if spec["index"] == "array" else pd.RangeIndex(n)
    df = pd.DataFrame(cols, copy=False)
    if not len(cols):
        df = pd.DataFrame(index=pd.RangeIndex(n))
    df.index = index if isinstance(index, pd.RangeIndex) else pd.Index(index)
    return df


# ---------------------------------------------------------------------------------------------------- store
class _NotCacheable(Exception):
    pass


def store(key: str, trace, *, limit: int | None = None) -> Path | None:
    """Write the trace's tables; None (and nothing written) when a value cannot round-trip exactly, the cache
    folder is not writable, or the entry alone is over the size bound."""
    ver = version()
    try:
        arrays, manifest = _encode(trace, key, ver)
    except _NotCacheable as err:
        log.info("not cached: %s: %s", trace.meta.source, err)
        return None
    return _write_entry(entry_path(key, ver), arrays, manifest, limit)


def _write_entry(path: Path, arrays: dict, manifest: dict, limit: int | None) -> Path | None:
    limit = max_bytes() if limit is None else limit
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                _write_container(f, arrays, manifest)
            if os.path.getsize(tmp) > limit:
                os.unlink(tmp)
                return None
            os.replace(tmp, path)  # atomic: a reader sees the old entry, none, or the whole new one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:
        log.warning("cache not written (%s): %s", path.parent, err)
        return None
    evict(limit)
    return path


def _encode(trace, key: str, ver: str) -> tuple[dict, dict]:
    import pandas as pd

    from analyzer.codes import object_codes

    arrays: dict = {}
    tables = {}
    for f in dataclasses.fields(trace):
        value = getattr(trace, f.name)
        if f.name in ("meta", "gpu"):
            continue  # gpu is recomputed from meta (gpus.lookup), exactly as build_trace does
        if not isinstance(value, pd.DataFrame):
            raise _NotCacheable(f"field {f.name} is a {type(value).__name__}, not a table")
        tables[f.name] = _encode_table(value, f.name, arrays, object_codes)
    meta = dataclasses.asdict(trace.meta)
    meta_json = _exact_json(meta, "meta")
    manifest = {"format": FORMAT, "key": key, "version": ver, "tables": tables, "meta": orjson.loads(meta_json)}
    return arrays, manifest


def _encode_table(df, table: str, arrays: dict, object_codes) -> dict:
    import numpy as np
    import pandas as pd

    if df.columns.has_duplicates or not all(isinstance(c, str) and "#" not in c for c in df.columns):
        raise _NotCacheable(f"{table}: column names")
    columns = []
    for col in df.columns:
        s = df[col]
        dtype = str(s.dtype)
        base = f"{table}/{col}"
        if s.dtype.kind in "biuf" and dtype in ("int64", "int32", "float64", "float32", "bool", "int8", "uint8"):
            arrays[base] = s.to_numpy()
        elif dtype == "object":  # the contract's text and list columns
            values = s.to_numpy(dtype=object)
            codes, first = object_codes(values)
            distinct = values[first].tolist()
            arrays[base + "#values"] = np.frombuffer(_exact_json(distinct, base), np.uint8)
            arrays[base + "#codes"] = codes.astype(np.int32 if len(first) < 2**31 else np.int64)
        else:
            raise _NotCacheable(f"{base}: dtype {dtype}")
        columns.append((col, dtype))
    index = df.index
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        kind = "range"
    elif index.dtype.kind in "iu":
        arrays[f"{table}/#index"] = index.to_numpy()
        kind = "array"
    else:
        raise _NotCacheable(f"{table}: index of dtype {index.dtype}")
    return {"rows": len(df), "columns": columns, "index": kind}


def _exact_json(value, what: str, *, nonfinite: bool = False) -> bytes:
    """JSON text that decodes back to an equal value of the same types, else _NotCacheable. nonfinite: NaN and
    ±inf floats are kept as {"$float": "nan"} … (_untag restores them); else they make the value uncacheable."""
    if nonfinite:
        value = _tag(value)
    try:
        text = orjson.dumps(value)
    except TypeError as err:
        raise _NotCacheable(f"{what}: {err}") from None
    if not _same(orjson.loads(text), value):
        raise _NotCacheable(f"{what}: a value does not survive JSON exactly (NaN, tuple, non-str key …)")
    return text


_FLOAT_TAG = "$float"


def _tag(v):
    if isinstance(v, float) and type(v) is float and not math.isfinite(v):
        return {_FLOAT_TAG: repr(v)}  # 'nan', 'inf', '-inf': float() reads each back
    if isinstance(v, dict):
        if _FLOAT_TAG in v:
            raise _NotCacheable(f"a dict with the reserved key {_FLOAT_TAG!r}")
        return {k: _tag(x) for k, x in v.items()}
    if type(v) is list:
        return [_tag(x) for x in v]
    return v


def _untag(v):
    if isinstance(v, dict):
        if len(v) == 1 and _FLOAT_TAG in v:
            return float(v[_FLOAT_TAG])
        return {k: _untag(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_untag(x) for x in v]
    return v


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    return a == b


# ---------------------------------------------------------------------------------------------------- summaries
# The summary (analyzer.summary.Summary: the KERNEL_SUMMARY and STEP_TABLE tables, per-step medians, remarks) is
# derived from the trace alone by the analyzer's code, so it is cached under the same content key and version as
# the trace, in its own entry (<key>-<version>-summary.fltc): re-summarising a 1 GiB trace costs 0.5 s idle, 5 s
# on a busy box. Its manifest also holds Summary.to_json() (what `summary --json` prints), so the CLI answers a
# cached trace from that header alone (summary_json), without numpy, pandas or the tables (0.4 s of imports).
def derived_path(key: str, kind: str, ver: str | None = None) -> Path:
    """The entry of something derived from this content: kind 'summary' (load_summary), 'rank' (the ranks worker's
    per-rank result) …; a trace's own entry is entry_path."""
    return cache_dir() / f"{key}-{ver or version()}-{kind}{SUFFIX}"


def summary_path(key: str, ver: str | None = None) -> Path:
    return derived_path(key, "summary", ver)


def is_derived(entry: Path) -> bool:
    return entry.name.count("-") >= 2


def load_summary(src, name: str | None = None, *, cache: bool | None = None, key: str | None = None):
    """summarize(load_trace(src, name)) through the cache: a hit reads the trace's tables and the summary's, a miss
    parses, summarises and stores both. `key`: the content key of `src` when the caller already has it (the
    dashboard hashes each upload once for its run id). Same switches as load_trace."""
    from analyzer.readers.load import load_trace

    key = usable_key(src, cache, key)
    trace = None
    if key is not None:
        is_bytes = isinstance(src, (bytes, bytearray, memoryview))
        trace = lookup(key, name or ("upload" if is_bytes else Path(src).name))
        if trace is not None:
            hit = lookup_summary(key, trace)
            if hit is not None:
                return hit
    if trace is None:
        trace = load_trace(src, name, cache=cache, key=key)
    from analyzer.summary import summarize  # after the read: a refused gzip bomb never imports pandas & co.

    summary = summarize(trace)
    if key is not None:
        store_summary(key, summary)
    return summary


def summary_json(path, name: str | None = None) -> dict | None:
    """What load_summary(path).to_json() returns, from the summary entry's header alone, or None (not cached, the
    cache off, non-default limits, an unreadable header: the caller then takes the full path). The header has its
    own hash; the data region is not read (its tables are not needed here) and is checked when it is."""
    key = usable_key(path)
    out = None if key is None else lookup_json(key, "summary")
    if out is not None:
        out["source"] = name or Path(path).name
    return out


def lookup_json(key: str, kind: str) -> dict | None:
    """The JSON document stored in the header of this content's `kind` entry (store_json, store_summary), or None;
    reads the header only (orjson, no numpy). An unreadable or foreign entry is deleted."""
    ver = version()
    entry = derived_path(key, kind, ver)
    try:
        if not _is_entry(entry):
            return None
        with _open_entry(entry) as f:
            manifest, _ = _read_header(f)
        _check_manifest(manifest, key, ver, kind)
        out = manifest["json"]
        if not isinstance(out, dict):
            raise ValueError("no JSON document")
    except FileNotFoundError:
        return None
    except Exception as err:  # a corrupt, truncated or foreign file: never trusted
        _remove_unreadable(entry, err)
        return None
    _mark_used(entry)
    return out


def store_json(key: str, kind: str, doc: dict) -> Path | None:
    """Cache a JSON document derived from this content by the analyzer's code (same key, version, invalidation and
    size bound as the trace); None when it does not survive JSON exactly."""
    try:
        manifest = {"format": FORMAT, "kind": kind, "key": key, "version": version(), "json": _json_doc(doc, kind)}
    except _NotCacheable as err:
        log.info("%s not cached: %s", kind, err)
        return None
    return _write_entry(derived_path(key, kind, manifest["version"]), {}, manifest, None)


def _json_doc(doc: dict, what: str):
    if not isinstance(doc, dict):
        raise _NotCacheable(f"{what}: a {type(doc).__name__}, not a JSON object")
    return orjson.loads(_exact_json(doc, what))


def usable_key(src, cache: bool | None = None, key: str | None = None) -> str | None:
    """The content key when the cache may be used for this load (on, default limits), else None."""
    from analyzer.readers.limits import default_limits

    if not (enabled(cache) and default_limits()):
        return None
    if key is not None:
        return key
    try:
        return content_key(src)
    except (OSError, ValueError):
        return None  # a missing file, a directory …: the reader says what is wrong


def _check_manifest(manifest: dict, key: str, ver: str, kind: str) -> None:
    if (manifest.get("format"), manifest.get("kind"), manifest.get("key"), manifest.get("version")) != (
        FORMAT,
        kind,
        key,
        ver,
    ):
        raise ValueError("manifest does not match the entry's name")


def store_summary(key: str, summary, *, limit: int | None = None) -> Path | None:
    """Write the summary's tables and values (not its trace: that is the trace entry); None when not cacheable."""
    from analyzer.codes import object_codes

    ver = version()
    arrays: dict = {}
    tables, values = {}, {}
    try:
        for f in dataclasses.fields(summary):
            value = getattr(summary, f.name)
            if f.name == "trace":
                continue
            if hasattr(value, "columns") and hasattr(value, "index"):  # a DataFrame (pandas not imported here)
                tables[f.name] = _encode_table(value, f.name, arrays, object_codes)
            else:
                values[f.name] = orjson.loads(_exact_json(value, f.name, nonfinite=True))
        doc = summary.to_json()
        manifest = {
            "format": FORMAT,
            "kind": "summary",
            "key": key,
            "version": ver,
            "tables": tables,
            "values": values,
            "json": _json_doc(doc, "to_json()"),
        }
    except _NotCacheable as err:
        log.info("summary not cached: %s: %s", summary.trace.meta.source, err)
        return None
    return _write_entry(summary_path(key, ver), arrays, manifest, limit)


def lookup_summary(key: str, trace):
    """The cached Summary of this content, around `trace` (the caller's, from lookup or load_trace), or None; an
    unreadable entry is deleted."""
    from analyzer.summary import Summary

    ver = version()
    path = summary_path(key, ver)
    if not _is_entry(path):
        return None
    try:
        manifest, arrays = _read_container(path)
        _check_manifest(manifest, key, ver, "summary")
        fields = {name: _read_table(arrays, name, spec) for name, spec in manifest["tables"].items()}
        fields.update((name, _untag(v)) for name, v in manifest["values"].items())
        summary = Summary(trace=trace, **fields)
    except Exception as err:  # a corrupt, truncated or foreign file: never trusted
        _remove_unreadable(path, err)
        return None
    _mark_used(path)
    return summary


# ---------------------------------------------------------------------------------------------------- container
# One file: MAGIC | header length (u64) | data length (u64) | header hash (16 B) | header JSON | pad to 64 | data.
# The header (JSON) holds the manifest and, per array, [dtype, length, offset]; it carries the hash of the data
# region. Reading maps the file copy-on-write and makes a zero-copy, writable view per array (pandas may modify
# the tables like any other), after both hashes match: a flipped byte
# anywhere makes the entry unreadable, never a wrong number. Why not .npz: numpy reads zip members in chunks and
# copies them (1.2 s of a 1.8 s cached open of the 1 GiB benchmark trace).
MAGIC = b"FLCACHE3"
_PREFIX = len(MAGIC) + 8 + 8 + 16
_ALIGN = 64


def _write_container(f, arrays: dict, manifest: dict) -> None:
    import numpy as np

    layout, offset = {}, 0
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        arrays[name] = arr
        layout[name] = [arr.dtype.str, int(arr.shape[0]) if arr.ndim else 0, offset]
        offset += -(-arr.nbytes // _ALIGN) * _ALIGN
    h = _Hasher(keyed="data")
    for arr in arrays.values():
        h.update(memoryview(arr).cast("B"))
        h.update(bytes(-arr.nbytes % _ALIGN))
    header = orjson.dumps({**manifest, "arrays": layout, "data_hash": h.hexdigest()})
    head = MAGIC + len(header).to_bytes(8, "little") + offset.to_bytes(8, "little")
    head += _mac(header)
    f.write(head + header + bytes(-(len(head) + len(header)) % _ALIGN))
    for arr in arrays.values():
        f.write(memoryview(arr).cast("B"))
        f.write(bytes(-arr.nbytes % _ALIGN))


def _read_header(f) -> tuple[dict, int]:
    """(the header: manifest, "arrays" layout and "data_hash"; the data region's offset) of an open entry, after
    checking the magic, the sizes against the file's and the header's own hash."""
    prefix = f.read(_PREFIX)
    if len(prefix) != _PREFIX or not prefix.startswith(MAGIC):
        raise ValueError("not a FuseLens cache file")
    n_header = int.from_bytes(prefix[8:16], "little")
    n_data = int.from_bytes(prefix[16:24], "little")
    size = os.fstat(f.fileno()).st_size
    start = -(-(_PREFIX + n_header) // _ALIGN) * _ALIGN
    if start + n_data != size:
        raise ValueError(f"file is {size:,} bytes, its header says {start + n_data:,}")
    header = f.read(n_header)
    if not hmac.compare_digest(_mac(header), prefix[24:40]):
        raise ValueError("header seal mismatch (corrupt, or not written by this cache's owner)")
    return orjson.loads(header), start


def _read_container(path: Path) -> tuple[dict, dict]:
    import numpy as np

    with _open_entry(path) as f:
        manifest, start = _read_header(f)
        # A private (copy-on-write) map: the arrays are views of the page cache, writable without touching the
        # file, and nothing is zero-filled or copied up front (a bytearray + readinto took 0.6 of a 1 s open of
        # the 1 GiB benchmark's 233 MiB entry). Entries are replaced by rename and removed by unlink, never
        # truncated in place, so the mapped pages stay valid.
        size = os.fstat(f.fileno()).st_size
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if size else bytearray()
    view = memoryview(data)[start:]
    if _Hasher(view, keyed="data").hexdigest() != manifest.pop("data_hash"):
        raise ValueError("data checksum mismatch")
    arrays = {}
    for name, (dtype, n, offset) in manifest.pop("arrays").items():
        arrays[name] = np.frombuffer(view, dtype=np.dtype(dtype), count=n, offset=offset)
    return manifest, arrays


class _Hasher:
    """The data region's hash, incremental: xxh3-128 seeded from this cache's secret (keyed blake2b where xxhash
    is missing). Its value sits in the sealed header, so changing the data means matching it without the seed."""

    def __init__(self, data=b"", keyed: str = "data"):
        secret = _secret()
        try:
            import xxhash

            self.h = xxhash.xxh3_128(seed=int.from_bytes(hashlib.blake2b(secret, person=b"fl-data").digest()[:8]))
        except ImportError:
            self.h = hashlib.blake2b(digest_size=16, key=secret, person=b"fl-" + keyed.encode()[:13])
        if len(data):
            self.h.update(data)

    def update(self, data) -> None:
        self.h.update(data)

    def hexdigest(self) -> str:
        return self.h.hexdigest()


# ---------------------------------------------------------------------------------------------------- housekeeping
def entries() -> list[Path]:
    """The cache's entries: regular files named *.fltc directly in its folder. A symlink, FIFO or folder of that
    name is not an entry (never listed, read or sized; `clear` removes the link itself)."""
    return [p for p in _glob(f"*{SUFFIX}") if not p.name.startswith(".tmp-") and _is_entry(p)]


def _glob(pattern: str) -> list[Path]:
    """Names in the cache folder matching `pattern`, sorted, without following anything (no sub-folders)."""
    import fnmatch

    d = cache_dir()
    try:
        with os.scandir(d) as it:
            names = [e.name for e in it if fnmatch.fnmatchcase(e.name, pattern)]
    except OSError:
        return []
    return [d / n for n in sorted(names)]


def _is_entry(path: Path) -> bool:
    """A regular file, not a symlink (lstat): the cache never reads through a link out of its folder."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _open_entry(path: Path):
    """An entry opened for reading: regular, not a symlink, never blocking (a FIFO planted there is refused)."""
    return open_regular(path, what="cache entry", follow=False)


def evict(limit: int | None = None) -> int:
    """Delete least recently used entries until the folder holds ≤ limit bytes; returns bytes freed."""
    limit = max_bytes() if limit is None else limit
    files = []
    for p in entries():
        try:
            st = os.lstat(p)
        except OSError:
            continue
        files.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in files)
    freed = 0
    for _, size, p in sorted(files, key=lambda t: t[0]):
        if total <= limit:
            break
        if _remove(p, "over the cache size bound"):
            total -= size
            freed += size
    return freed


def clear() -> tuple[int, int]:
    """Delete every entry (and stray temporary files); returns (files, bytes)."""
    n = freed = 0
    d = cache_dir()
    if not d.is_dir():
        return 0, 0
    memo_dir = d / "stat"
    if _own_subdir(memo_dir):
        with contextlib.suppress(OSError), os.scandir(memo_dir) as it:
            for e in list(it):
                if e.name.endswith(".json") and not e.is_dir(follow_symlinks=False):
                    _remove(Path(e.path), "cleared")
    elif os.path.islink(memo_dir):  # a link planted as stat/: remove the link, never what it points to
        _remove(memo_dir, "a symlink, not the cache's own folder")
    for p in _glob(f"*{SUFFIX}"):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if _remove(p, "cleared"):
            n, freed = n + 1, freed + (st.st_size if stat.S_ISREG(st.st_mode) else 0)
    return n, freed


def _mark_used(path: Path) -> None:
    """Touch an entry that was just read: the size bound evicts the least recently USED first."""
    with contextlib.suppress(OSError):
        os.utime(path, follow_symlinks=False)


def _remove_unreadable(path: Path, err: Exception) -> None:
    """A corrupt, truncated or foreign entry is never trusted: delete it so the caller rebuilds it."""
    _remove(path, f"unreadable ({type(err).__name__}: {err})")


def _remove(path: Path, why: str) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as err:
        log.warning("cache entry %s not removed (%s): %s", path.name, why, err)
        return False
    log.info("cache entry %s removed: %s", path.name, why)
    return True
