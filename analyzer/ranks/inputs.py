"""Find the per-rank traces of a multi-rank set (a folder, a .zip, or uploaded files) and read one in memory.

What goes to a worker is a `RankInput`: a path (plus a zip member name) when the worker can open the file itself —
the default, so only ~200 bytes per rank cross process or network boundaries — or the raw bytes for uploads and for
Ray workers that do not see the driver's disk (`ship="bytes"`, see docs/SCALE.md).

Zip archives are never extracted to disk: members are read into memory one at a time, by the worker that analyses
them, so there is no zip-slip by construction; names that would escape a folder (absolute, '..', drive letters) are
still refused, because they mark a hostile or broken archive and they end up in messages and reports.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from analyzer.errors import TraceError
from analyzer.readers.files import open_regular
from analyzer.readers.load import GzipGuard
from fuselens import settings

TRACE_SUFFIXES = (".json", ".json.gz")
ENV_MAX_MEMBER_BYTES = "FUSELENS_RANKS_MAX_MEMBER_BYTES"
ENV_MAX_MEMBERS = "FUSELENS_RANKS_MAX_MEMBERS"


def _env_count(name: str, default: int) -> tuple[int, str | None]:
    """(a positive whole number from the environment, else `default`; why the setting is not one, else None)."""
    raw = settings.text(name)
    if not raw:
        return default, None
    try:
        value = int(float(raw))
        if value > 0 and float(raw) == value:
            return value, None
    except (ValueError, OverflowError):
        pass
    return default, f"{raw[:40]!r} is not a positive whole number"


# One member is inflated into a worker's memory before the loader reads it, streamed through the loader's bomb
# guard (GzipGuard: ratio and padding, refused past 256 MiB of output) and this cap. 4 GiB leaves room for the
# decoded tables of a 2 GB trace on a 24 GiB machine; FUSELENS_RANKS_MAX_MEMBER_BYTES overrides it.
MAX_MEMBER_BYTES, _MEMBER_BYTES_PROBLEM = _env_count(ENV_MAX_MEMBER_BYTES, 4 << 30)
# Jobs of thousands of ranks are real; 65,536 members is above any job we know of and bounds the zip directory
# walk (a crafted central directory can list millions of entries).
MAX_MEMBERS, _MEMBERS_PROBLEM = _env_count(ENV_MAX_MEMBERS, 65_536)


def check_settings() -> None:
    """TraceError (one line naming the variable) when a ranks setting in the environment is not a number."""
    for name, problem in ((ENV_MAX_MEMBER_BYTES, _MEMBER_BYTES_PROBLEM), (ENV_MAX_MEMBERS, _MEMBERS_PROBLEM)):
        if problem:
            raise TraceError(name, problem)


# gzip'd Kineto JSON inflates 10-20x (hta trace_filter: 14x); used only to size the worker pool when the gzip
# trailer cannot be read (zip members, >4 GiB files whose ISIZE wrapped).
GZIP_RATIO_GUESS = 15

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_.]?(\d{1,7})(?!\d)", re.IGNORECASE)


@dataclass(frozen=True)
class RankInput:
    """One per-rank trace of one set; small and picklable, it is all a worker gets."""

    set_label: str  # label of the set ('base', 'compiled', or the folder name)
    name: str  # file name relative to the set root ('sampled_rank-0.json.gz', 'run/rank-3.json' in a zip)
    path: str = ""  # file on disk, or the zip holding it ('' for uploaded bytes)
    member: str = ""  # zip member name ('' for a plain file)
    size_bytes: int = 0  # bytes as stored (compressed for .gz)
    est_json_bytes: int = 0  # estimated uncompressed JSON bytes, to size the worker pool
    name_rank: int | None = None  # rank read from the file name, if it holds one
    data: bytes | None = None  # raw bytes when shipped instead of a path

    @property
    def display(self) -> str:  # the source string every message about this rank uses
        return f"{self.set_label}/{self.name}" if self.set_label else self.name


def rank_from_name(name: str) -> int | None:
    """'sampled_rank-1.json.gz' -> 1, 'rank3_trace.json' -> 3; the last match wins ('rank-0/rank-12.json' -> 12)."""
    hits = _RANK_IN_NAME.findall(PurePosixPath(name).name) or _RANK_IN_NAME.findall(name)
    return int(hits[-1]) if hits else None


def is_trace_name(name: str) -> bool:
    base = PurePosixPath(name).name
    return base.lower().endswith(TRACE_SUFFIXES) and not base.startswith(".")


def discover(source, label: str | None = None) -> list[RankInput]:
    """Per-rank inputs of one set, sorted by name.

    source: a folder (its trace files, not sub-folders — as HTA reads a rank folder), a .zip path (trace members at
    any depth: zips usually wrap a folder), the bytes of a .zip, or a list of (name, bytes) uploads.
    Raises TraceError when the set is missing, unreadable or holds no trace, or a setting is not a number.
    """
    check_settings()
    if isinstance(source, (bytes, bytearray, memoryview)):
        name = label or "upload.zip"
        return _from_zip(io.BytesIO(bytes(source)), name, label or PurePosixPath(name).stem, path="")
    if isinstance(source, list):
        return _from_uploads(source, label or "upload")
    path = Path(source)
    set_label = label if label is not None else _label_for(path)
    try:
        st = path.stat()
    except OSError as err:
        raise TraceError(str(path), f"cannot read the rank set ({_why(err)})") from None
    if stat.S_ISDIR(st.st_mode):
        return _from_folder(path, set_label)
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
        raise TraceError(str(path), "not a folder or a .zip of per-rank traces (not a regular file)")
    try:
        with open_regular(path, what="zip") as fh:
            if zipfile.is_zipfile(fh):
                return _from_zip(fh, str(path), set_label, path=str(path))
    except OSError as err:
        raise TraceError(str(path), f"cannot read the rank set ({_why(err)})") from None
    raise TraceError(str(path), "not a folder or a .zip of per-rank traces")


def _why(err: OSError) -> str:
    return err.strerror or str(err)


def _label_for(path: Path) -> str:
    name = path.name or path.resolve().name
    return name[: -len(".zip")] if name.lower().endswith(".zip") else name


def _from_folder(folder: Path, set_label: str) -> list[RankInput]:
    inputs = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as err:
        raise TraceError(str(folder), f"cannot list the rank set ({err.strerror or err})") from None
    for entry in entries:
        try:  # is_file follows symlinks (cluster storage uses them); a loop or a dangling one is skipped
            if not is_trace_name(entry.name) or not entry.is_file():
                continue
            size = entry.stat().st_size
        except OSError:
            continue
        inputs.append(
            RankInput(
                set_label=set_label,
                name=entry.name,
                path=str(Path(folder) / entry.name),
                size_bytes=size,
                est_json_bytes=_est_file_json_bytes(Path(folder) / entry.name, size),
                name_rank=rank_from_name(entry.name),
            )
        )
    if not inputs:
        raise TraceError(str(folder), "no .json or .json.gz traces in this folder")
    return inputs


def _from_uploads(files: list, set_label: str) -> list[RankInput]:
    inputs = []
    for name, data in files:
        name = str(name)
        if zipfile.is_zipfile(io.BytesIO(data)):
            inputs += _from_zip(io.BytesIO(data), name, set_label, path="")
            continue
        inputs.append(
            RankInput(
                set_label=set_label,
                name=_safe_member_name(name, set_label),
                size_bytes=len(data),
                est_json_bytes=est_bytes_json(data),
                name_rank=rank_from_name(name),
                data=bytes(data),
            )
        )
    if not inputs:
        raise TraceError(set_label, "no traces uploaded")
    return sorted(inputs, key=lambda i: i.name)


def _from_zip(fh, zip_name: str, set_label: str, path: str) -> list[RankInput]:
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        raise TraceError(zip_name, f"not a readable zip ({err})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise TraceError(zip_name, f"{len(infos):,} members, more than the cap of {MAX_MEMBERS:,}")
        inputs = []
        for info in infos:
            if info.is_dir():
                continue
            safe = _safe_member_name(info.filename, zip_name)
            if not is_trace_name(safe) or safe.startswith("__MACOSX/"):
                continue
            if info.file_size > MAX_MEMBER_BYTES:
                raise TraceError(
                    zip_name, f"member {safe} is {info.file_size:,} bytes, over the {MAX_MEMBER_BYTES:,}-byte cap"
                )
            data = None if path else read_member(zf, info.filename, zip_name)
            inputs.append(
                RankInput(
                    set_label=set_label,
                    name=safe,
                    path=path,
                    member=info.filename if path else "",
                    size_bytes=info.file_size,
                    est_json_bytes=info.file_size * (GZIP_RATIO_GUESS if safe.lower().endswith(".gz") else 1),
                    name_rank=rank_from_name(safe),
                    data=data,
                )
            )
    if not inputs:
        raise TraceError(zip_name, "no .json or .json.gz traces in this zip")
    names = [i.name for i in inputs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise TraceError(zip_name, f"member {dupes[0]} appears more than once")
    return sorted(inputs, key=lambda i: i.name)


def _safe_member_name(raw: str, container: str) -> str:
    """The member name as a relative POSIX path; refuses names that would escape a folder if ever extracted."""
    name = raw.replace("\\", "/")
    parts = PurePosixPath(name).parts
    if (
        name.startswith("/")
        or ".." in parts
        or (parts and re.match(r"^[A-Za-z]:", parts[0]))
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
    ):
        raise TraceError(container, f"unsafe member name {raw!r} (absolute, '..' or control characters)")
    return "/".join(p for p in parts if p not in ("", "."))


_MEMBER_CHUNK = 1 << 20


def read_member(zf: zipfile.ZipFile, member: str, zip_name: str) -> bytes:
    """A zip member's bytes, inflated 1 MiB at a time through the loader's bomb guard (the same ratio and padding
    rules as a gzip trace: analyzer.readers.load.GzipGuard) and under MAX_MEMBER_BYTES whatever its header claims
    (zip bombs lie): a 3 MB zip holding a 3 GiB member is refused after ~256 MiB, not read whole."""
    source = f"{zip_name}/{member}"
    guard = GzipGuard(" ".join(source.split()))
    out = bytearray()
    try:
        info = zf.getinfo(member)
        with zf.open(info) as m:
            while True:
                chunk = m.read(_MEMBER_CHUNK)
                if not chunk:
                    break
                out += chunk
                if len(out) > MAX_MEMBER_BYTES:
                    raise TraceError(zip_name, f"member {member} inflates past the {MAX_MEMBER_BYTES:,}-byte cap")
                # compressed bytes consumed so far: what is left of the member's stored size, where zipfile says
                left = getattr(m, "_compress_left", None)
                used = info.compress_size - left if isinstance(left, int) else info.compress_size
                if info.compress_type != zipfile.ZIP_STORED:
                    guard.add(chunk, len(out), max(used, 1))
    except RuntimeError as err:  # encrypted member
        raise TraceError(zip_name, f"member {member}: {err}") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, KeyError) as err:
        raise TraceError(zip_name, f"member {member} cannot be read ({err})") from None
    return bytes(out) if len(out) < (64 << 20) else out  # a big one stays the bytearray (no copy)


def read_input(inp: RankInput) -> tuple[bytes | str, str]:
    """What to hand load_trace for this input: (path or bytes, name). Runs in the worker."""
    if inp.data is not None:
        return inp.data, inp.display
    check_settings()
    if inp.member:
        try:
            with open_regular(inp.path, what="zip") as fh, zipfile.ZipFile(fh) as zf:
                return read_member(zf, inp.member, inp.path), inp.display
        except FileNotFoundError:
            raise TraceError(inp.path, "zip not found on this worker (put the set on shared storage)") from None
        except (zipfile.BadZipFile, OSError) as err:
            raise TraceError(inp.path, f"not a readable zip ({err})") from None
    if not os.path.exists(inp.path):
        raise TraceError(inp.display, "file not found on this worker (put the set on shared storage)")
    # A path, not bytes: the loader may stream a large file; name= makes messages say `set/name` on any machine.
    return inp.path, inp.display


def with_data(inp: RankInput) -> RankInput:
    """The same input carrying its bytes (Ray `ship="bytes"`: workers that cannot see the driver's files)."""
    data, _ = read_input(inp)
    if not isinstance(data, (bytes, bytearray)):
        try:
            data = Path(data).read_bytes()
        except OSError as err:
            raise TraceError(inp.display, f"cannot read ({err.strerror or err})") from None
    return replace(inp, data=data)


def _est_file_json_bytes(path: Path, size: int) -> int:
    if not path.name.lower().endswith(".gz"):
        return size
    try:
        with open(path, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            isize = struct.unpack("<I", fh.read(4))[0]  # gzip trailer: uncompressed size mod 2**32
    except (OSError, struct.error):
        return size * GZIP_RATIO_GUESS
    return isize if isize >= size else size * GZIP_RATIO_GUESS  # wrapped past 4 GiB, or multi-member


def est_bytes_json(data: bytes) -> int:
    if data[:2] == b"\x1f\x8b" and len(data) >= 18:
        isize = struct.unpack("<I", data[-4:])[0]
        return isize if isize >= len(data) else len(data) * GZIP_RATIO_GUESS
    return len(data)


__all__ = ["RankInput", "discover", "read_input", "rank_from_name", "with_data"]
