"""Load speed and peak memory: FuseLens vs orjson+pandas vs HolisticTraceAnalysis, each in a fresh process.

    python bench/make_big_trace.py --size-mb 1024 --out /tmp/big_1g.json
    python bench/bench_load.py /tmp/big_1g.json                      # fuselens + orjson+pandas (+ HTA if its venv exists)
    python bench/bench_load.py /tmp/big_2g.json --methods fuselens   # the 2 GB check
    python bench/bench_load.py /tmp/big_1g.json --write bench/results/load.md

Methods (one fresh interpreter per run, so no run inherits another's heap):
  fuselens   analyzer.load_trace(path) — decode, link, classify, cost, steps — then analyzer.summarize(trace) when
             the summary module is implemented (reported separately).
  orjson     baseline (a): orjson.loads(file bytes) + pandas.DataFrame of the complete ('X') events.
  hta        baseline (b): hta.trace_analysis.TraceAnalysis(trace_dir=…) on a folder holding only this file, run
             with /tmp/hta-venv/bin/python (python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install
             HolisticTraceAnalysis); skipped if that venv is missing.
Seconds: wall time of the work inside the child, after its imports (import time is printed beside it).
Peak RSS: the child's ru_maxrss (max with its own children: HTA may parse in a worker process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HTA_PYTHON = Path("/tmp/hta-venv/bin/python")

_PRELUDE = """
import json, resource, sys, time
t_import = time.perf_counter()
"""
_REPORT = """
r_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r_kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
out.update(peak_rss_bytes=max(r_self, r_kids) * 1024)
print("BENCH " + json.dumps(out))
"""

CODE = {
    "fuselens": """
sys.path.insert(0, ROOT)
from analyzer import load_trace
import analyzer.summary as summary_mod
import_s = time.perf_counter() - t_import
t = time.perf_counter()
trace = load_trace(PATH)
load_s = time.perf_counter() - t
out = dict(import_s=import_s, seconds=load_s, gpu_ops=len(trace.gpu_ops), cpu_ops=len(trace.cpu_ops),
           steps=len(trace.steps), events=trace.meta.n_events)
try:
    t = time.perf_counter()
    s = summary_mod.summarize(trace)
    out.update(summarize_s=time.perf_counter() - t)
except NotImplementedError:
    out.update(summarize_s=None)
""",
    "orjson": """
import orjson, pandas as pd
import_s = time.perf_counter() - t_import
t = time.perf_counter()
with open(PATH, "rb") as f:
    doc = orjson.loads(f.read())
events = doc["traceEvents"] if isinstance(doc, dict) else doc
df = pd.DataFrame([e for e in events if e.get("ph") == "X"])
out = dict(import_s=import_s, seconds=time.perf_counter() - t, rows=len(df), events=len(events))
""",
    "hta": """
import os, tempfile
from hta.trace_analysis import TraceAnalysis
import_s = time.perf_counter() - t_import
d = tempfile.mkdtemp(prefix="hta_bench_")
os.symlink(PATH, os.path.join(d, "rank-0.json" + (".gz" if PATH.endswith(".gz") else "")))
t = time.perf_counter()
analysis = TraceAnalysis(trace_dir=d)
secs = time.perf_counter() - t
df = analysis.t.get_trace(list(analysis.t.traces.keys())[0])
out = dict(import_s=import_s, seconds=secs, rows=len(df))
""",
}


def run(method: str, path: Path, timeout_s: float) -> dict:
    python = str(HTA_PYTHON) if method == "hta" else sys.executable
    code = _PRELUDE + f"ROOT = {str(ROOT)!r}\nPATH = {str(path)!r}\n" + CODE[method] + _REPORT
    t = time.perf_counter()
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    try:
        proc = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=timeout_s, env=env, cwd=tempfile.gettempdir()
        )
    except subprocess.TimeoutExpired:
        return {"method": method, "error": f"timed out after {timeout_s:.0f} s"}
    wall = time.perf_counter() - t
    line = next((x for x in proc.stdout.splitlines() if x.startswith("BENCH ")), None)
    if proc.returncode != 0 or line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return {"method": method, "error": f"exit {proc.returncode}: {tail[0][:200]}"}
    res = json.loads(line[6:])
    res.update(method=method, process_wall_s=wall)
    return res


def fmt(res: dict, size: int) -> str:
    if "error" in res:
        return f"| {res['method']} | — | — | — | {res['error']} |"
    extra = ""
    if res.get("summarize_s") is not None:
        extra = f"load {res['seconds']:.1f} s + summarize {res['summarize_s']:.1f} s; "
    total = res["seconds"] + (res.get("summarize_s") or 0)
    rss = res["peak_rss_bytes"]
    return f"| {res['method']} | {total:.1f} | {rss / 2**30:.2f} | {rss / size:.2f}× | {extra}imports {res['import_s']:.1f} s |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--methods", default="fuselens,orjson,hta")
    ap.add_argument("--timeout", type=float, default=1800, help="per run, seconds")
    ap.add_argument("--write", type=Path, help="append the Markdown table to this file")
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    if "hta" in methods and not HTA_PYTHON.exists():
        print(f"skipping hta: {HTA_PYTHON} not found", file=sys.stderr)
        methods.remove("hta")
    lines = [
        f"Machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()},"
        f" load average at start {os.getloadavg()[0]:.1f}.",
        "",
    ]
    for path in args.traces:
        size = path.stat().st_size
        lines += [
            f"### `{path.name}`: {size / 2**20:,.0f} MiB",
            "",
            "| method | seconds | peak RSS GiB | RSS / file | notes |",
            "|---|---|---|---|---|",
        ]
        results = {}
        for m in methods:
            res = run(m, path.resolve(), args.timeout)
            results[m] = res
            lines.append(fmt(res, size))
            print(lines[-1], flush=True)
        ok = {m: r for m, r in results.items() if "error" not in r}
        if "fuselens" in ok:
            f = ok["fuselens"]["seconds"] + (ok["fuselens"].get("summarize_s") or 0)
            notes = [f"fuselens peak RSS = {ok['fuselens']['peak_rss_bytes'] / size:.2f}× file size (target ≤ 2×)"]
            if "orjson" in ok:
                notes.append(f"fuselens / orjson+pandas time = {f / ok['orjson']['seconds']:.2f} (target ≤ 0.5)")
            if "hta" in ok:
                notes.append(f"HTA / fuselens time = {ok['hta']['seconds'] / f:.1f}× (target ≥ 10×)")
            lines += ["", *[f"- {n}" for n in notes]]
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.write:
        with open(args.write, "a") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
