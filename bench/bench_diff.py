"""Benchmark `analyzer.diff.diff_runs` at ~2k, ~20k and ~100k GPU ops per step, before and after a change.

    python bench/bench_diff.py                                   # after (working tree) and before (BEFORE_REV)
    python bench/bench_diff.py --sizes 100k --before none        # after only
    python bench/bench_diff.py --timeout 900 --out bench/results/diff.md

Inputs are real traces, never synthetic events:
- ~2k: HTA's control (A100) vs test (V100) as recorded (one step each), and the kineto ResNet-50 pair;
- ~20k / ~100k: `scripts/big_trace.py` lays HTA's V100 training trace (df_index_resolver, 22k GPU ops) or the
  control / test traces end to end, ProfilerStep markers dropped, so the whole trace is ONE step (the dashboard's
  worst case); copies are chosen for ~20k and ~100k ops per step.
- "-10%": the same trace as the candidate with a seeded random 10% of its non-GEMM kernels removed from
  `trace.gpu_ops` before summarize (what fusing them away looks like to the diff).

Each diff runs in its own process (`--timeout` each) with `analyzer/` taken either from the working tree ("after") or
from git revision BEFORE_REV ("before", `git archive` into a temp dir; the default is the last commit before the
diff speed work). Seconds are diff_runs only (load and summarize excluded); "peak RSS" is the process's
ru_maxrss after the diff (load + summarize + diff), "diff RSS +" how much the diff raised it. When both finish, the
two results are compared (kernels/step, unmatched, fusions, bytes avoided).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.big_trace import make_big_trace  # noqa: E402

BEFORE_REV = "1662841"  # "README: the case, dashboard, CLI, profiling, limits, speed, docs": diff as first written
HTA = ROOT / "tests" / "data" / "hta"
DF = HTA / "df_index_resolver" / "df_index_resolver.json.gz"  # V100 training, 22,290 GPU ops, no shapes
CONTROL = HTA / "trace_diff" / "control" / "control.json.gz"  # A100, 9,450 GPU ops, shapes
TEST = HTA / "trace_diff" / "test" / "test.json.gz"  # V100, 15,632 GPU ops, shapes
KINETO = ROOT / "tests" / "data" / "kineto"
RESNET = KINETO / "resnet50_num_workers_0.worker0.1623143089861.pt.trace.json.gz"
RESNET_W4 = KINETO / "resnet50_num_workers_4.worker0.1623212756351.pt.trace.json.gz"

MODELS = ROOT / "sample_traces"
# size -> [(case name, base, candidate, drop fraction of the candidate's non-GEMM kernels)]; a base/candidate is a
# path or (source, copies) for make_big_trace
CASES = {
    "2k": [
        ("ResNet-50, workers 0 vs 4 (kineto)", RESNET, RESNET_W4, 0.0),
        ("A100 control vs V100 test (HTA, unrelated)", CONTROL, TEST, 0.0),
        ("ResNet-50 vs itself -10%", RESNET, RESNET, 0.1),
    ],
    "20k": [
        ("V100 training x1 vs itself -10%", (DF, 1), (DF, 1), 0.1),
        ("control x2 vs test x2 (unrelated)", (CONTROL, 2), (TEST, 2), 0.0),
    ],
    # whole Hugging Face models as recorded (kernels.models.whole_model): diff time grows linearly with layers
    "model": [
        (
            "Llama 4 layers, training step, eager vs compile (H100)",
            MODELS / "llama_model_train_bf16" / "eager.json.gz",
            MODELS / "llama_model_train_bf16" / "compile.json.gz",
            0.0,
        ),
        (
            "Llama 16 layers, training step, eager vs compile (H200)",
            MODELS / "h200_llama16_model_train_bf16" / "eager.json.gz",
            MODELS / "h200_llama16_model_train_bf16" / "compile.json.gz",
            0.0,
        ),
        (
            "Llama 32 layers, training step, eager vs compile (H100)",
            MODELS / "llama32_model_train_bf16" / "eager.json.gz",
            MODELS / "llama32_model_train_bf16" / "compile.json.gz",
            0.0,
        ),
    ],
    "100k": [
        ("V100 training x5 vs x6 (the dashboard's case)", (DF, 5), (DF, 6), 0.0),
        ("V100 training x5 vs itself -10%", (DF, 5), (DF, 5), 0.1),
        ("control x11 vs test x7 (unrelated)", (CONTROL, 11), (TEST, 7), 0.0),
    ],
}

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from analyzer import load_trace, summarize, diff_runs

def prepared(path, drop):
    trace = load_trace(path)
    if drop:
        g = trace.gpu_ops
        rng = np.random.default_rng(0)
        gone = (g["kind"] == "kernel").to_numpy() & (g["category"] != "gemm").to_numpy() & (rng.random(len(g)) < drop)
        trace.gpu_ops = g[~gone]
    return summarize(trace)

base = prepared(sys.argv[2], 0.0)
cand = prepared(sys.argv[3], float(sys.argv[4]))
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
d = diff_runs(base, [cand], labels=["base", "cand"])
secs = time.perf_counter() - t
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
c = d.candidates[0]
print("BENCH " + json.dumps({
    "seconds": secs, "peak_rss_mb": rss1 / 1024, "diff_rss_mb": (rss1 - rss0) / 1024,
    "ops_per_step": [d.base.kernels_per_step + d.base.memops_per_step, c.run.kernels_per_step + c.run.memops_per_step],
    "kernels_per_step": c.kernels_per_step,
    "unmatched": [sum(k["count_per_step"] for k in c.unmatched_base), sum(k["count_per_step"] for k in c.unmatched_candidate)],
    "fusions": sum(f.count_per_step for f in c.fusions), "swaps": sum(f.count_per_step for f in c.swaps),
    "bytes_avoided": c.hbm_bytes_avoided_per_step,
    "notes": [n for n in c.notes if n.startswith("alignment:")],
}))
"""


def analyzer_at(rev: str, into: Path) -> Path:
    """analyzer/ as of git revision rev, extracted under `into` (read-only use)."""
    data = subprocess.run(["git", "archive", rev, "analyzer"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def materialize(spec, work: Path) -> Path:
    if isinstance(spec, Path):
        return spec
    src, copies = spec
    out = work / f"{src.name.split('.')[0]}_x{copies}.json.gz"
    if not out.exists():
        print(f"  building {out.name} ({copies} copies of {src.name}) ...", file=sys.stderr, flush=True)
        make_big_trace(out, copies, src)
    return out


def run_one(root: Path, base: Path, cand: Path, drop: float, timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), str(base), str(cand), str(drop)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except subprocess.TimeoutExpired:
        return {"timeout": timeout, "wall": time.perf_counter() - t0}
    line = next((x for x in p.stdout.splitlines() if x.startswith("BENCH ")), None)
    if p.returncode or line is None:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(line[6:])


def fmt_secs(r: dict | None) -> str:
    if r is None:
        return "–"
    if "timeout" in r:
        return f"> {r['timeout']:.0f}"
    if "error" in r:
        return "error"
    return f"{r['seconds']:.2f}"


def fmt_rss(r: dict | None) -> str:
    if not r or "seconds" not in r:
        return "–"
    return f"{r['peak_rss_mb']:,.0f} (+{r['diff_rss_mb']:,.0f})"


def same_result(a: dict | None, b: dict | None) -> str:
    if not a or not b or "seconds" not in a or "seconds" not in b:
        return "–"
    keys = ("kernels_per_step", "unmatched", "fusions", "swaps", "bytes_avoided")
    return "same" if all(a[k] == b[k] for k in keys) else "differs"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2k,20k,100k", help="comma-separated: 2k, 20k, 100k")
    ap.add_argument("--before", default=BEFORE_REV, help=f"git revision for 'before' (default {BEFORE_REV}; 'none')")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per diff process (default 600)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "fuselens_bench_diff")
    ap.add_argument("--out", type=Path, help="also write the Markdown table here")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if s not in CASES:
            ap.error(f"--sizes: unknown size {s!r} (known: {', '.join(CASES)})")
    roots = {"after": ROOT}
    tmp = None
    if args.before != "none":
        tmp = tempfile.TemporaryDirectory(prefix="fuselens_before_")
        roots["before"] = analyzer_at(args.before, Path(tmp.name))

    lines = [
        "| size | case | GPU ops / step (base, cand) | before s | after s | after: peak RSS MB (+diff) | result | "
        "after: kernels/step, unmatched (base, cand), fusions, swaps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        for name, b, c, drop in CASES[size]:
            base, cand = materialize(b, args.work), materialize(c, args.work)
            res = {}
            for which, root in roots.items():
                print(f"{size:>4} {which:6s} {name} ...", file=sys.stderr, flush=True)
                res[which] = run_one(root, base, cand, drop, args.timeout)
            a, bf = res.get("after"), res.get("before")
            ops = ", ".join(f"{x:,}" for x in a["ops_per_step"]) if a and "ops_per_step" in a else "?"
            summary = (
                f"{a['kernels_per_step']}, {a['unmatched']}, {a['fusions']}, {a['swaps']}"
                if a and "seconds" in a
                else "–"
            )
            lines.append(
                f"| {size} | {name} | {ops} | {fmt_secs(bf)} | {fmt_secs(a)} | {fmt_rss(a)} | "
                f"{same_result(bf, a)} | {summary} |"
            )
            print(lines[-1], flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    head = [
        "# `diff_runs` at ~2k, ~20k and ~100k GPU ops per step",
        "",
        f"- machine: {os.cpu_count()} cores, Python {platform.python_version()}, load average at end {load:.1f}",
        f"- command: `python bench/bench_diff.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
        f"- before: `analyzer/` at {args.before}; after: the working tree",
        "",
    ]
    text = "\n".join(head + lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
