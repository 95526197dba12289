"""Measured DRAM bytes per kernel with Nsight Compute, for estimate-vs-measurement in the dashboard.

The runner re-launches itself under ncu in a child mode that builds the model, warms the variant up (compiles,
autotunes) outside the profiled range, then runs ONE forward (or training step) between cudaProfilerStart/Stop;
`ncu --profile-from-start off` therefore counts only that step's kernels. Metrics: dram__bytes_read.sum and
dram__bytes_write.sum (bytes that reached HBM: what L2 absorbed is not counted, so a 50 MB intermediate on a
50 MB-L2 H100 can show fewer bytes than the analyzer's estimate).

Output `<variant>.ncu.json`: {"metrics": [...], "ncu_version": str, "kernels": [{"kernel": name, "id": int,
"dram_bytes_read": int, "dram_bytes_write": int}, ...]} in launch order. The raw CSV is kept beside it.

Two measurements (docs/KERNELS.md, "Measured bytes"):
* **flushed** (ncu's default `--cache-control all`): caches are flushed and invalidated before every kernel, so
  each kernel reads everything cold, and dirty lines still in L2 when it ends are never counted (an H100 GELU
  kernel writing 50.3 MB shows 30.0 MB written). `dram_bytes_read` / `dram_bytes_write`.
* **warm** (`--cache-control none --clock-control none`, WARM_STEPS steady-state steps in a row after the
  warm-up): each kernel sees the L2 its predecessors left, and its writes are the dirty lines evicted while it
  runs (possibly an earlier kernel's output) — what the forward really moves. `warm_dram_bytes_read` /
  `warm_dram_bytes_write` per kernel (median over the steps, by launch position), and the step's totals: in a
  steady state the cache holds the same at the start and the end of a step, so the sum over one step's kernels is
  the step's DRAM traffic. `warm` in the JSON says how it was taken.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
# Read with the warm measurement: replay passes (> 1: ncu saved and restored memory between passes, so a kernel's
# counters would not see the L2 its predecessor left), bytes ncu backed up for that, and the device's L2 size.
EXTRA_METRICS = {
    "profiler__replayer_passes": "replay_passes",
    "profiler__replayer_bytes_mem_backed_up.sum": "replay_bytes_backed_up",
    "device__attribute_l2_cache_size": "l2_cache_bytes",
}
WARM_FLAGS = ("--cache-control", "none", "--clock-control", "none")
WARM_STEPS = 3  # steady-state steps profiled in a row for the warm measurement
WARM_METHOD = (
    "ncu --cache-control none --clock-control none over {n} steady-state steps in a row after 3 warm-up steps (each "
    "kernel sees the L2 its predecessors left; its writes are the dirty lines evicted while it runs); per kernel: "
    "median over the steps by launch position; step totals: median over the steps of the sum of its kernels"
)
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
        if (metric not in METRICS and metric not in EXTRA_METRICS) or not row.get("ID", "").strip().isdigit():
            continue
        kid = int(row["ID"])
        k = kernels.setdefault(kid, {"kernel": row.get("Kernel Name", ""), "id": kid})
        if metric in EXTRA_METRICS:
            unit = row.get("Metric Unit", "").strip().lower()
            value = row.get("Metric Value", "")
            with contextlib.suppress(ValueError):  # 'n/a' where a device lacks it: left out, never made up
                k[EXTRA_METRICS[metric]] = (
                    _to_bytes(value, unit) if "byte" in unit else round(float(value.replace(",", "")))
                )
            continue
        key = "dram_bytes_read" if metric == METRICS[0] else "dram_bytes_write"
        k[key] = _to_bytes(row.get("Metric Value", "0"), row.get("Metric Unit", "byte"))
    return [kernels[i] for i in sorted(kernels)]


def split_steps(kernels: list[dict], n_steps: int) -> list[list[dict]]:
    """The kernels of n_steps identical steps profiled in a row, one list per step (raises when they differ)."""
    if n_steps < 1 or len(kernels) % n_steps:
        raise RuntimeError(f"{len(kernels)} kernels profiled over {n_steps} steps: steps differ in length")
    per = len(kernels) // n_steps
    steps = [kernels[i * per : (i + 1) * per] for i in range(n_steps)]
    names = [k["kernel"] for k in steps[0]]
    for s in steps[1:]:
        if [k["kernel"] for k in s] != names:
            raise RuntimeError("the profiled steps launched different kernels; no steady state to report")
    return steps


def warm_summary(kernels: list[dict], n_steps: int) -> tuple[list[dict], dict]:
    """(one step's kernels with warm_dram_bytes_read/_write = median over the steps, the `warm` JSON block)."""
    steps = split_steps(kernels, n_steps)
    one = []
    for pos, k in enumerate(steps[0]):
        one.append(
            {
                "kernel": k["kernel"],
                "warm_dram_bytes_read": round(statistics.median(s[pos].get("dram_bytes_read", 0) for s in steps)),
                "warm_dram_bytes_write": round(statistics.median(s[pos].get("dram_bytes_write", 0) for s in steps)),
            }
        )
    per_step = [
        {
            "dram_bytes_read": sum(k.get("dram_bytes_read", 0) for k in s),
            "dram_bytes_write": sum(k.get("dram_bytes_write", 0) for k in s),
        }
        for s in steps
    ]
    block = {
        "method": WARM_METHOD.format(n=n_steps),
        "flags": list(WARM_FLAGS),
        "steps": n_steps,
        "step_dram_bytes_read": round(statistics.median(p["dram_bytes_read"] for p in per_step)),
        "step_dram_bytes_write": round(statistics.median(p["dram_bytes_write"] for p in per_step)),
        "per_step": per_step,
        "max_replay_passes": max((k["replay_passes"] for k in kernels if "replay_passes" in k), default=None),
        "replay_bytes_backed_up": sum(k.get("replay_bytes_backed_up", 0) for k in kernels),
        "l2_cache_bytes": next((k["l2_cache_bytes"] for k in kernels if "l2_cache_bytes" in k), None),
    }
    return one, block


def merge_warm(flushed: list[dict], warm_one: list[dict]) -> list[dict]:
    """Flushed kernels (one step) with the warm figures beside them, matched by launch position; the kernel lists
    must agree (same count and names), else the flushed list is returned unchanged."""
    if len(flushed) != len(warm_one) or any(a["kernel"] != b["kernel"] for a, b in zip(flushed, warm_one, strict=True)):
        return flushed
    return [{**a, **{k: v for k, v in b.items() if k != "kernel"}} for a, b in zip(flushed, warm_one, strict=True)]


def measure(
    ncu: str, child_argv: list[str], csv_path: Path, timeout_s: float = 600.0, extra: tuple[str, ...] = ()
) -> list[dict]:
    """Run `python -m kernels.profile <child_argv>` under ncu; return the parsed kernels (raises on failure).
    extra: more ncu flags (WARM_FLAGS for the in-sequence measurement), which also reads EXTRA_METRICS; an ncu
    that does not know one of those is asked again for the DRAM metrics alone."""
    repo_root = Path(__file__).resolve().parents[2]  # kernels/lab/ncu.py -> the repository
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(repo_root), os.environ.get("PYTHONPATH")) if p))
    tail = ["--log-file", str(csv_path), sys.executable, "-m", "kernels.profile", *child_argv]
    err = "no output"
    for metrics in ([*METRICS, *EXTRA_METRICS], list(METRICS)) if extra else (list(METRICS),):
        base = [ncu, "--metrics", ",".join(metrics), "--csv", "--profile-from-start", "off"]
        base += ["--target-processes", "all", *extra]
        res = None
        for units in (["--print-units", "base"], []):  # older ncu lacks --print-units; the parser handles units too
            res = subprocess.run(
                base + units + tail,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                cwd=repo_root,
                env=env,
            )
            if res.returncode == 0 or "print-units" not in (res.stderr + res.stdout):
                break
        log = csv_path.read_text(errors="replace") if csv_path.exists() else ""
        kernels = parse_csv(log) if res.returncode == 0 else []
        if kernels:
            return kernels
        msg = (res.stderr or res.stdout or log).strip().splitlines()
        err = f"ncu exited {res.returncode}: {msg[-1] if msg else 'no output'}" if res.returncode else ""
    raise RuntimeError(err or f"ncu recorded no kernels (see {csv_path.name})")
