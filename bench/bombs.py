"""Peak memory of the WHOLE process tree (the CLI and every worker it starts) for each bomb of the hostile-input set.

    python bench/bombs.py [--out DIR] [--only NAME]

Builds each bomb in DIR (default: a temporary folder), runs the real CLI on it as a subprocess, samples the summed
RSS of the process and all its descendants every 10 ms with psutil, and prints one line per bomb: what it is, the
exit code, the first line of stderr, the peak in MB and the wall time. The target is ≤ 1 GB each.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
EVENT = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"correlation":1}},'


def _json_stream(size: int, varied: bool = False):
    """Yields valid Kineto-shaped JSON of about `size` bytes in 4 MiB pieces."""
    yield b'{"traceEvents":['
    piece = EVENT * ((4 << 20) // len(EVENT))
    n = 0
    i = 0
    while n < size:
        if varied:  # numbers that change every 4th event: deflates ~60-70:1 (like the 59:1 file), not ~1,000:1
            piece = b"".join(
                b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":1,"args":{"correlation":%d}},'
                % ((i + j) // 4, (i + j) // 4)
                for j in range(40_000)
            )
            i += 40_000
        yield piece
        n += len(piece)
    yield EVENT[:-1] + b"]}"


def zip_one_member(path: Path, member_bytes: int) -> None:
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf,
        zf.open("rank-0.json", "w", force_zip64=True) as m,
    ):
        for piece in _json_stream(member_bytes):
            m.write(piece)


def zip_spaces_member(path: Path, member_bytes: int) -> None:
    """A member of valid JSON that is nearly all whitespace: deflates ~1,000:1 (3 GiB in a ~3 MB zip)."""
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf,
        zf.open("rank-0.json", "w", force_zip64=True) as m,
    ):
        m.write(b'{"traceEvents":[' + EVENT)
        blank = b" " * (4 << 20)
        for _ in range(member_bytes // len(blank)):
            m.write(blank)
        m.write(EVENT[:-1] + b"]}")


def zip_two_members(path: Path, member_bytes: int) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for r in (0, 1):
            with zf.open(f"rank-{r}.json", "w", force_zip64=True) as m:
                for piece in _json_stream(member_bytes):
                    m.write(piece)


def gzip_valid_json(path: Path, size: int) -> None:
    with gzip.open(path, "wb", compresslevel=9) as f:
        for piece in _json_stream(size, varied=True):
            f.write(piece)


def peak_tree_mb(argv: list[str], env: dict | None = None, timeout: float = 600) -> tuple[int, str, float, float]:
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    root = psutil.Process(p.pid)
    peak = 0
    while p.poll() is None:
        total = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            procs = [root]
        for q in procs:
            with contextlib.suppress(psutil.Error):
                total += q.memory_info().rss
        peak = max(peak, total)
        if time.perf_counter() - t0 > timeout:
            p.kill()
        time.sleep(0.01)
    err = p.stderr.read().decode(errors="replace").strip().splitlines()
    return p.returncode, (err[-1] if err else ""), peak / 1e6, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="fl-bombs-"))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "FUSELENS_NO_CACHE": "1"}
    py = [sys.executable, "-m", "analyzer"]
    cases = {
        "zip_3gib_member": (
            lambda p: zip_one_member(p, 3 << 30),
            "one.zip",
            lambda p: [*py, "ranks", str(p), "--workers", "1"],
        ),
        "zip_3gib_whitespace_member": (
            lambda p: zip_spaces_member(p, 3 << 30),
            "spaces.zip",
            lambda p: [*py, "ranks", str(p), "--workers", "1"],
        ),
        "zip_two_1gib_members_2_workers": (
            lambda p: zip_two_members(p, 1 << 30),
            "two.zip",
            lambda p: [*py, "ranks", str(p), "--workers", "2"],
        ),
        "gzip_valid_json_68to1": (
            lambda p: gzip_valid_json(p, 3200 << 20),
            "valid.json.gz",
            lambda p: [*py, "summary", str(p)],
        ),
    }
    for name, (make, fname, cmd) in cases.items():
        if args.only and args.only != name:
            continue
        path = out / fname
        if not path.exists():
            make(path)
        rc, line, peak, wall = peak_tree_mb(cmd(path), env)
        print(
            f"{name}: {path.stat().st_size / 1e6:,.1f} MB file · rc {rc} · peak {peak:,.0f} MB (tree) · {wall:,.1f} s"
        )
        print(f"    {line[:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
