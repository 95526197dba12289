"""Columnar cache of analysed traces: a file is analysed once; every later open reads its tables back.

    content_key(src) -> str                       xxh3-128 of the file's (or upload's) bytes (analyzer.readers.cache_key)
    lookup(key, decode, kind=TRACE) -> object | None
    store(key, obj, encode, kind=TRACE, json=None) -> Path | None
    lookup_json(key, kind) / store_json(key, kind, doc)   a JSON document alone, read from the entry's header

The cache knows DataFrames and JSON, nothing of what they make up: the caller hands ``store`` an ``encode(obj) ->
(tables, values)`` callback (a dict of DataFrames, a dict of JSON values) and ``lookup`` the matching
``decode(tables, values) -> obj``. The trace's and the summary's serialisers live in analyzer.pipeline.

Where: ``$FUSELENS_CACHE_DIR``, else ``$XDG_CACHE_HOME/fuselens``, else ``~/.cache/fuselens``; one file per
trace, ``<content key>-<analyzer version>.fltc``, one per thing derived from it (``…-<kind>.fltc``: the summary,
a rank's result), plus ``stat/`` (the keys of unchanged paths). Clear it with ``python -m analyzer cache --clear``
or ``rm -rf ~/.cache/fuselens``. Off: ``FUSELENS_NO_CACHE=1``, the CLI's ``--no-cache``, or
``load_trace(…, cache=False)``. Size bound: ``$FUSELENS_CACHE_MAX_BYTES`` (default 4 GiB); after each write the
least recently used entries go until the folder fits (a hit refreshes an entry's time).

Version: the entry's name carries a hash of the analyzer's code (every ``analyzer/**/*.py``), of the column
contract (``analyzer.schema``) and of ``FORMAT``. Any change to how a table is computed makes old entries
stale: they are never read, and are deleted when their trace is opened again (or evicted by size).

Format (analyzer.readers.cache_format): a sealed JSON header and one data region, each with its own hash, checked on
read. The manifest holds the key, the version, the kind, every column's dtype and row count, the index, and the
values; anything inconsistent or unreadable on lookup deletes the entry and the caller computes it again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from analyzer.readers.cache_format import (
    NotCacheable,
    encode_table,
    exact_json,
    open_entry,
    read_container,
    read_header,
    read_table,
    untag,
    write_container,
)
from analyzer.readers.cache_key import (
    ENV_DIR,
    ENV_MAX_BYTES,
    ENV_OFF,
    cache_dir,
    content_key,
    enabled,
    known_key,
    max_bytes,
    own_subdir,
)
from analyzer.readers.limits import default_limits

__all__ = [
    "ENV_DIR",
    "ENV_MAX_BYTES",
    "ENV_OFF",
    "SUMMARY",
    "TRACE",
    "cache_dir",
    "clear",
    "content_key",
    "derived_path",
    "enabled",
    "entries",
    "entry_path",
    "evict",
    "is_derived",
    "known_key",
    "lookup",
    "lookup_json",
    "max_bytes",
    "store",
    "store_json",
    "usable_key",
    "version",
]

log = logging.getLogger("fuselens.cache")

FORMAT = 4  # the layout of an entry; an edit to any analyzer module changes version() anyway (its code hash)
SUFFIX = ".fltc"
TRACE = "trace"  # the trace's own entry, <key>-<version>.fltc
SUMMARY = "summary"  # derived entries: <key>-<version>-<kind>.fltc

Tables = dict  # name → pandas.DataFrame (pandas is imported only where tables are built)
Encode = Callable[[object], tuple[Tables, dict]]
Decode = Callable[[Tables, dict], object]


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


def entry_path(key: str, ver: str | None = None) -> Path:
    return cache_dir() / f"{key}-{ver or version()}{SUFFIX}"


def derived_path(key: str, kind: str, ver: str | None = None) -> Path:
    """The entry of something derived from this content: kind 'summary' (analyzer.pipeline.load_summary), 'rank'
    (the ranks worker's per-rank result) …; a trace's own entry (kind TRACE) is entry_path."""
    if kind == TRACE:
        return entry_path(key, ver)
    return cache_dir() / f"{key}-{ver or version()}-{kind}{SUFFIX}"


def is_derived(entry: Path) -> bool:
    return entry.name.count("-") >= 2


def usable_key(src, cache: bool | None = None, key: str | None = None) -> str | None:
    """The content key when the cache may be used for this load (on, default limits), else None."""
    if not (enabled(cache) and default_limits()):
        return None
    if key is not None:
        return key
    try:
        return content_key(src)
    except (OSError, ValueError):
        return None  # a missing file, a directory …: the reader says what is wrong


# ---------------------------------------------------------------------------------------------------- lookup
def lookup(key: str, decode: Decode, kind: str = TRACE):
    """decode(tables, values) of this content's `kind` entry, or None. A stale or unreadable entry (decode raising
    included) is deleted, so the caller computes it again and stores a fresh one. A trace's lookup also deletes
    every entry of this content made by another version of the analyzer."""
    ver = version()
    path = derived_path(key, kind, ver)
    if kind == TRACE:
        for stale in _glob(f"{key}-*{SUFFIX}"):
            if not stale.name.startswith(f"{key}-{ver}"):  # the trace's and its derived entries of this version stay
                _remove(stale, "stale version")
    if not _is_entry(path):
        return None
    try:
        manifest, arrays = read_container(path)
        _check_manifest(manifest, key, ver, kind)
        tables = {name: read_table(arrays, name, spec) for name, spec in manifest["tables"].items()}
        values = untag(manifest["values"]) if manifest["tagged"] else manifest["values"]
        obj = decode(tables, values)
    except Exception as err:  # a corrupt, truncated or foreign file: never trusted
        _remove_unreadable(path, err)
        return None
    _mark_used(path)
    return obj


def lookup_json(key: str, kind: str) -> dict | None:
    """The JSON document stored in the header of this content's `kind` entry (store_json, store's `json`), or None;
    reads the header only (orjson, no numpy). An unreadable or foreign entry is deleted."""
    ver = version()
    entry = derived_path(key, kind, ver)
    try:
        if not _is_entry(entry):
            return None
        with open_entry(entry) as f:
            manifest, _ = read_header(f)
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


def _check_manifest(manifest: dict, key: str, ver: str, kind: str) -> None:
    if (manifest.get("format"), manifest.get("kind"), manifest.get("key"), manifest.get("version")) != (
        FORMAT,
        kind,
        key,
        ver,
    ):
        raise ValueError("manifest does not match the entry's name")


# ---------------------------------------------------------------------------------------------------- store
def store(
    key: str,
    obj,
    encode: Encode,
    kind: str = TRACE,
    *,
    json: dict | None = None,
    nonfinite: bool = False,
    limit: int | None = None,
) -> Path | None:
    """Write encode(obj)'s tables and values (and `json`, a document lookup_json reads from the header alone) as
    this content's `kind` entry; None (and nothing written) when a value cannot round-trip exactly, the cache
    folder is not writable, or the entry alone is over the size bound. nonfinite: NaN and ±inf among the values
    are stored tagged (and restored); else they make the entry uncacheable."""
    ver = version()
    arrays: dict = {}
    try:
        tables, values = encode(obj)
        manifest = {
            "format": FORMAT,
            "kind": kind,
            "key": key,
            "version": ver,
            "tables": {name: encode_table(df, name, arrays) for name, df in tables.items()},
            "values": _json_value(values, kind, nonfinite=nonfinite),
            "tagged": nonfinite,  # only tagged values are untagged: {"$float": …} is plain data otherwise
        }
        if json is not None:
            manifest["json"] = _json_doc(json, f"{kind} json")
    except NotCacheable as err:
        log.info("%s not cached: %s", kind, err)
        return None
    return _write_entry(derived_path(key, kind, ver), arrays, manifest, limit)


def store_json(key: str, kind: str, doc: dict) -> Path | None:
    """Cache a JSON document derived from this content by the analyzer's code (same key, version, invalidation and
    size bound as the trace); None when it does not survive JSON exactly."""
    try:
        manifest = {"format": FORMAT, "kind": kind, "key": key, "version": version(), "json": _json_doc(doc, kind)}
    except NotCacheable as err:
        log.info("%s not cached: %s", kind, err)
        return None
    return _write_entry(derived_path(key, kind, manifest["version"]), {}, manifest, None)


def _json_value(value, what: str, nonfinite: bool = False):
    import orjson

    return orjson.loads(exact_json(value, what, nonfinite=nonfinite))


def _json_doc(doc: dict, what: str):
    if not isinstance(doc, dict):
        raise NotCacheable(f"{what}: a {type(doc).__name__}, not a JSON object")
    return _json_value(doc, what)


def _write_entry(path: Path, arrays: dict, manifest: dict, limit: int | None) -> Path | None:
    limit = max_bytes() if limit is None else limit
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                write_container(f, arrays, manifest)
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
    if own_subdir(memo_dir):
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
