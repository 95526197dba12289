"""Stand-in for `python -m kernels.profile` on machines without a GPU, for the Profile page's tests.

It speaks the runner's real protocol (same arguments, one JSON progress line per event on stdout, the same exit
codes) and writes what the runner writes (<variant>.json.gz + manifest.json in --out), by copying the REAL GPU
recordings from sample_traces/hf_geglu_bf16. What it lets the tests check is the dashboard's side: subprocess
handling, live progress, Cancel, timeout, busy, cleanup, loading the results. The GPU work itself is tested where
there is a GPU (kernels/).

Environment knobs (tests only):
  STANDIN_DELAY_S       seconds to sleep per variant (default 0.2)
  STANDIN_EXIT          exit with this code after the variants (e.g. 3: no GPU, 4: a variant failed)
  STANDIN_CHILD_PIDFILE start a grandchild `sleep` and write its pid here (Cancel must kill it too)
  STANDIN_SETSID_PIDFILE start a grandchild `sleep` in a session of its own (setsid: outside the runner's
                        process group) and write its pid here (Cancel, the timeout and a normal end must kill it too)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "sample_traces" / "hf_geglu_bf16"


def emit(event, variant, done, total, message, **extra):
    sys.stdout.write(
        json.dumps({"event": event, "variant": variant, "done": done, "total": total, "message": message, **extra})
        + "\n"
    )
    sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    for a in ("--workload", "--variants", "--dtype", "--out"):
        ap.add_argument(a, required=True)
    for a in ("--batch", "--seq", "--d-model", "--hidden"):
        ap.add_argument(a, type=int, required=True)
    ap.add_argument("--measure-bytes", action="store_true")
    ap.add_argument("--train", action="store_true")
    ns = ap.parse_args()
    variants = ns.variants.split(",")
    total = len(variants)
    delay = float(os.environ.get("STANDIN_DELAY_S", "0.2"))
    pidfile = os.environ.get("STANDIN_CHILD_PIDFILE")
    if pidfile:
        child = subprocess.Popen(["sleep", "300"])  # a grandchild, like ncu or an Inductor compile worker
        Path(pidfile).write_text(str(child.pid))
    setsid_pidfile = os.environ.get("STANDIN_SETSID_PIDFILE")
    if setsid_pidfile:
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)  # leaves the process group
        Path(setsid_pidfile).write_text(str(child.pid))
    emit("start", None, 0, total, f"{ns.workload} {ns.batch}x{ns.seq} d={ns.d_model} h={ns.hidden} {ns.dtype}")
    exit_code = int(os.environ.get("STANDIN_EXIT", "0"))
    if exit_code == 3:
        print("error: no CUDA GPU available", file=sys.stderr)
        emit("done", None, 0, total, "no CUDA GPU available (stand-in)")
        return 3
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((SRC / "manifest.json").read_text())
    entries = {v["name"]: v for v in manifest["variants"]}
    manifest["variants"] = []
    for i, name in enumerate(variants):
        emit("variant_start", name, i, total, f"recording {name}")
        time.sleep(delay)
        entry = dict(entries[name])
        if exit_code == 4 and i == total - 1:
            entry = {"name": name, "status": "failed", "message": f"CUDA out of memory while recording {name}"}
            emit("variant_failed", name, i + 1, total, entry["message"])
        else:
            shutil.copy(SRC / entry["trace"], out / entry["trace"])
            entry.pop("ncu", None)
            emit(
                "variant_done", name, i + 1, total, entry["message"], median_us=entry["median_us"], trace=entry["trace"]
            )
        manifest["variants"].append(entry)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    emit("done", None, total, total, ", ".join(f"{v['name']}: {v['status']}" for v in manifest["variants"]))
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
