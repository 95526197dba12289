"""Benchmark `python -m analyzer ranks` on a big synthetic rank set: wall seconds and peak RSS of the whole process
tree (parent + pool workers, or the Ray driver + raylet + workers), sampled every 0.1 s with psutil.

    python bench/make_rank_set.py --ranks 16 --mb 250 --out /tmp/fuselens_ranks16     # once, ~3 min
    python bench/bench_ranks.py /tmp/fuselens_ranks16 --engines local ray --out bench/results/ranks.md

"Peak tree RSS" is the largest SUM of RSS over the tree at one sample (what the machine must hold at once); RSS
double-counts pages shared after fork (the forkserver's imported modules), so it is an upper bound.
Each engine's --json output is kept; when several engines run, the script checks they are byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


def run(cmd: list[str], stdout_path: Path) -> dict:
    t0 = time.perf_counter()
    with open(stdout_path, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.PIPE)
        ps = psutil.Process(proc.pid)
        peak_tree = peak_parent = peak_one = 0
        nproc = 0
        while proc.poll() is None:
            try:
                procs = [ps, *ps.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            total = 0
            for p in procs:
                try:
                    rss = p.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                total += rss
                peak_one = max(peak_one, rss) if p.pid != ps.pid else peak_one
                if p.pid == ps.pid:
                    peak_parent = max(peak_parent, rss)
            peak_tree = max(peak_tree, total)
            nproc = max(nproc, len(procs))
            time.sleep(0.1)
        _, err = proc.communicate()
    return {
        "rc": proc.returncode,
        "seconds": time.perf_counter() - t0,
        "peak_tree_mb": peak_tree / 1e6,
        "peak_parent_mb": peak_parent / 1e6,
        "peak_worker_mb": peak_one / 1e6,
        "max_processes": nproc,
        "stderr": err.decode(errors="replace")[-2000:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("set", type=Path)
    ap.add_argument("--engines", nargs="+", default=["local"], choices=("local", "ray"))
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--out", type=Path, help="write the Markdown result here")
    args = ap.parse_args()
    files = sorted(p for p in args.set.iterdir() if p.name.endswith((".json", ".json.gz")))
    size = sum(p.stat().st_size for p in files)
    lines = [
        "# `python -m analyzer ranks` on a synthetic rank set",
        "",
        f"- set: {len(files)} ranks, {size / 1e9:.2f} GB on disk ({size / len(files) / 1e6:.0f} MB per rank), made by"
        f" `python bench/make_rank_set.py --ranks {len(files)} --mb {size / len(files) / 1e6:.0f}`"
        " (real HTA trace_filter steps replicated, ids and timestamps shifted per copy)",
        f"- machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}; "
        f"load average at start {os.getloadavg()[0]:.1f} (the cores are shared with other work)",
        f"- command: `python bench/bench_ranks.py {args.set} --engines {' '.join(args.engines)}"
        + (f" --workers {args.workers}" if args.workers else "")
        + "`",
        "",
        "| engine | workers | seconds | peak tree RSS (MB) | peak parent RSS (MB) | peak one worker (MB) | processes | exit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    digests = {}
    for engine in args.engines:
        out = Path(f"/tmp/fuselens_bench_ranks_{engine}.json")
        cmd = [sys.executable, "-m", "analyzer", "ranks", str(args.set), "--json", "--engine", engine]
        cmd += ["--workers", str(args.workers)]
        r = run(cmd, out)
        digests[engine] = hashlib.sha256(out.read_bytes()).hexdigest()[:16]
        workers = args.workers or "auto"
        lines.append(
            f"| {engine} | {workers} | {r['seconds']:.1f} | {r['peak_tree_mb']:,.0f} | {r['peak_parent_mb']:,.0f} | "
            f"{r['peak_worker_mb']:,.0f} | {r['max_processes']} | {r['rc']} |"
        )
        print(lines[-1], flush=True)
        if r["rc"] != 0:
            print(r["stderr"], file=sys.stderr)
    lines.append("")
    lines.append("JSON output sha256[:16] per engine: " + ", ".join(f"{k} `{v}`" for k, v in digests.items()))
    if len(set(digests.values())) > 1:
        lines.append("**The engines' JSON outputs differ.**")
    elif len(digests) > 1:
        lines.append("The engines' `--json` outputs are byte-identical.")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
