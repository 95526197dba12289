"""The cache's settings, its owner's secret and content keys (analyzer.readers.cache holds the entries).

Key: the xxh3-128 hash of every byte of the file as stored (compressed or not). Why the whole content and
not size + mtime + samples: an upload has no mtime, a copied or renamed file keeps its key, an in-place edit that
keeps size and mtime still changes it, and xxh3 runs at ~3–10 GB/s (0.1–0.5 s for 1 GiB on the 2-core dev box,
against 1.8 s for blake2b). A path's key is remembered with its stat signature (``content_key``), so an
unchanged file is not even re-hashed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import logging
import mmap
import os
import stat
import tempfile
import time
from pathlib import Path

import orjson

from analyzer.readers.files import open_regular
from fuselens import settings

log = logging.getLogger("fuselens.cache")

ENV_DIR = "FUSELENS_CACHE_DIR"
ENV_OFF = "FUSELENS_NO_CACHE"
ENV_MAX_BYTES = "FUSELENS_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30


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


def secret() -> bytes:
    return _secret_for(str(_secret_path()))


def mac(data: bytes) -> bytes:
    """16-byte seal of a header or memo under the cache's secret."""
    return hashlib.blake2b(data, digest_size=16, key=secret(), person=b"fl-header").digest()


def _sealed(doc: dict) -> dict:
    return {**doc, "seal": mac(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hex()}


def _unsealed(doc) -> bool:
    """True when a sealed document (stat memo) carries this cache's seal; the seal is popped."""
    if not isinstance(doc, dict):
        return False
    seal = doc.pop("seal", None)
    want = mac(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hex()
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
            if own_subdir(memo.parent, create=True):
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
        if not own_subdir(memo.parent):
            return None
        with open_regular(memo, limit=1 << 16, what="stat memo", follow=False) as f:
            m = orjson.loads(f.read())
        if _unsealed(m) and m["sig"] == sig and isinstance(m["key"], str):
            return m["key"]
    return None


def own_subdir(d: Path, create: bool = False) -> bool:
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
