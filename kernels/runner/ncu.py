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
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from kernels.runner import options

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
    repo_root = Path(__file__).resolve().parents[2]  # kernels/runner/ncu.py -> the repository
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


# ---------------------------------------------------------------------- the runner's side: a child under ncu
def child(ns) -> int:
    """Internal: warm up the variant, then --ncu-steps steps in a row inside cudaProfilerStart/Stop for ncu."""
    import torch

    from kernels.models.variants import build
    from kernels.runner.record import make_workload, step_fn

    model, x = make_workload(ns)
    step = step_fn(build(ns.ncu_child, model, train=ns.train), x, model, ns.train, ns.ncu_child)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(max(1, min(ns.ncu_steps, 10))):
        step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return options.EXIT_OK


def child_argv(ns, variant: str, steps: int = 1) -> list[str]:
    argv = ["--ncu-child", variant, "--ncu-steps", str(steps), "--workload", ns.workload]
    argv += ["--batch", str(ns.batch), "--seq", str(ns.seq)]
    argv += ["--d-model", str(ns.d_model), "--hidden", str(ns.hidden), "--dtype", ns.dtype]
    if ns.workload in options.DECODER_WORKLOADS:
        argv += ["--heads", str(ns.heads), "--kv-heads", str(ns.kv_heads), "--head-dim", str(ns.head_dim)]
    if ns.workload in options.MODEL_WORKLOADS:
        argv += ["--layers", str(ns.layers), "--vocab", str(ns.vocab)]
    return argv + (["--train"] if ns.train else [])


def measure_bytes(ns, variant: str, out_dir: Path) -> dict:
    exe = find_ncu()
    if exe is None:
        return {"ncu_error": "ncu (Nsight Compute) not found on PATH"}
    csv_path = out_dir / f"{variant}.ncu.csv"
    try:
        kernels = measure(exe, child_argv(ns, variant), csv_path)
    except Exception as exc:  # ncu missing permissions, timeout, parse failure: the trace still stands
        return {"ncu_error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    doc = {"metrics": list(METRICS), "ncu_version": ncu_version(exe), "kernels": kernels}
    entry = {
        "ncu": f"{variant}.ncu.json",
        "ncu_csv": csv_path.name,
        "dram_bytes_read": sum(k.get("dram_bytes_read", 0) for k in kernels),
        "dram_bytes_write": sum(k.get("dram_bytes_write", 0) for k in kernels),
    }
    # in sequence: each kernel sees the L2 its predecessors left ("warm" above); a failure keeps the rest
    warm_csv = out_dir / f"{variant}.ncu-warm.csv"
    try:
        steps = WARM_STEPS
        warm = measure(exe, child_argv(ns, variant, steps), warm_csv, extra=WARM_FLAGS)
        one, block = warm_summary(warm, steps)
    except Exception as exc:
        entry["ncu_warm_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    else:
        import torch

        block["l2_cache_bytes"] = block.get("l2_cache_bytes") or torch.cuda.get_device_properties(0).L2_cache_size
        merged = merge_warm(kernels, one)
        doc["kernels"] = merged
        if merged is kernels:  # the flushed and warm steps launched different kernels: keep both lists
            block["kernels"] = one
        doc["warm"] = block
        entry.update(
            ncu_warm_csv=warm_csv.name,
            warm_dram_bytes_read=block["step_dram_bytes_read"],
            warm_dram_bytes_write=block["step_dram_bytes_write"],
        )
    (out_dir / f"{variant}.ncu.json").write_text(json.dumps(doc, indent=1))
    return entry
