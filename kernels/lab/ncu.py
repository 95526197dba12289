"""Measured DRAM bytes per kernel with Nsight Compute, for estimate-vs-measurement in the dashboard.

The runner re-launches itself under ncu in a child mode that builds the model, warms the variant up (compiles,
autotunes) outside the profiled range, then runs ONE forward (or training step) between cudaProfilerStart/Stop;
`ncu --profile-from-start off` therefore counts only that step's kernels. Metrics: dram__bytes_read.sum and
dram__bytes_write.sum (bytes that reached HBM: what L2 absorbed is not counted, so a 50 MB intermediate on a
50 MB-L2 H100 can show fewer bytes than the analyzer's estimate).

Output `<variant>.ncu.json`: {"metrics": [...], "ncu_version": str, "kernels": [{"kernel": name, "id": int,
"dram_bytes_read": int, "dram_bytes_write": int}, ...]} in launch order. The raw CSV is kept beside it.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
_UNIT_SCALE = {
    "byte": 1, "bytes": 1, "b": 1,
    "kbyte": 10**3, "kb": 10**3, "mbyte": 10**6, "mb": 10**6, "gbyte": 10**9, "gb": 10**9,
    "kibyte": 2**10, "mibyte": 2**20, "gibyte": 2**30,
}  # fmt: skip


def find_ncu() -> str | None:
    return shutil.which("ncu") or next(
        (p for p in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu") if Path(p).exists()), None
    )


def ncu_version(ncu: str) -> str | None:
    try:
        res = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else None


def _to_bytes(value: str, unit: str) -> int:
    v = float(value.replace(",", "").strip())
    scale = _UNIT_SCALE.get(unit.strip().lower())
    if scale is None:
        raise ValueError(f"unknown ncu unit {unit!r}")
    return round(v * scale)


def parse_csv(text: str) -> list[dict]:
    """ncu --csv (details page) -> [{kernel, id, dram_bytes_read, dram_bytes_write}] in launch order.

    Lines before the CSV header (ncu's ==PROF== notes, the program's own output) are skipped.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    kernels: dict[int, dict] = {}
    for row in rows:
        metric = row.get("Metric Name")
        if metric not in METRICS or not row.get("ID", "").strip().isdigit():
            continue
        kid = int(row["ID"])
        k = kernels.setdefault(kid, {"kernel": row.get("Kernel Name", ""), "id": kid})
        key = "dram_bytes_read" if metric == METRICS[0] else "dram_bytes_write"
        k[key] = _to_bytes(row.get("Metric Value", "0"), row.get("Metric Unit", "byte"))
    return [kernels[i] for i in sorted(kernels)]


def measure(ncu: str, child_argv: list[str], csv_path: Path, timeout_s: float = 600.0) -> list[dict]:
    """Run `python -m kernels.profile <child_argv>` under ncu; return the parsed kernels (raises on failure)."""
    base = [ncu, "--metrics", ",".join(METRICS), "--csv", "--profile-from-start", "off", "--target-processes", "all"]
    tail = ["--log-file", str(csv_path), sys.executable, "-m", "kernels.profile", *child_argv]
    repo_root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(repo_root), os.environ.get("PYTHONPATH")) if p))
    res = None
    for units in (["--print-units", "base"], []):  # older ncu lacks --print-units; the parser handles units too
        res = subprocess.run(
            base + units + tail, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=repo_root, env=env
        )
        if res.returncode == 0 or "print-units" not in (res.stderr + res.stdout):
            break
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise RuntimeError(f"ncu exited {res.returncode}: {msg[-1] if msg else 'no output'}")
    kernels = parse_csv(csv_path.read_text(errors="replace"))
    if not kernels:
        raise RuntimeError(f"ncu recorded no kernels (see {csv_path.name})")
    return kernels
