"""`python -m analyzer ranks DIR|ZIP [--against DIR|ZIP …] [--engine local|ray] [--address …] [--workers N] [--json]`

Also runnable alone (`python -m analyzer.ranks.cli …`) with the same arguments; `add_arguments` is what the main
CLI's `ranks` sub-parser can call so both stay in step.

Exit codes: 0 every rank analysed; 2 a set could not be read, or some ranks failed (the others are still printed,
each failure is one line on stderr); 1 anything unexpected, including an analyzer bug on some rank (reported the
same way, marked internal).
"""

from __future__ import annotations

import argparse
import os
import sys

import orjson

from analyzer.errors import FuseLensError
from analyzer.fmt import fmt_bytes, fmt_num, fmt_pct, json_text, safe_text
from analyzer.readers.cache import ENV_OFF


def add_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("path", help="folder or .zip of per-rank traces (the base set when comparing)")
    r.add_argument("--engine", choices=("local", "ray"), default="local")
    r.add_argument("--address", help="Ray cluster address (with --engine ray; default: start a local Ray)")
    r.add_argument("--workers", type=int, default=0, help="parallel workers (0: one per core, as memory allows)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the columnar trace cache (same as FUSELENS_NO_CACHE=1)",
    )
    _add_extras(r)


def _add_extras(r: argparse.ArgumentParser) -> None:
    r.add_argument("--against", action="append", default=[], metavar="DIR|ZIP", help="candidate set(s) to compare")
    r.add_argument("--labels", help="comma-separated set labels, base first (default: folder names)")
    r.add_argument("--diff-rank", default="slowest", help="full fusion diff on: slowest (default), all, none, or N")
    r.add_argument(
        "--ship", choices=("paths", "bytes"), default="paths", help="Ray: send paths (shared storage) or bytes"
    )


def run(args: argparse.Namespace) -> int:
    # lazy: `python -m analyzer` imports this module to build the ranks sub-parser on every command, and the ranks
    # engine pulls in pandas (0.6 s)
    from analyzer.ranks import analyze_ranks

    if getattr(args, "no_cache", False):
        os.environ[ENV_OFF] = "1"  # the worker processes inherit it
    against = list(getattr(args, "against", None) or [])
    diff_rank = getattr(args, "diff_rank", "slowest")
    if not against and diff_rank not in ("slowest", "none", None):  # the default says nothing either way
        print(
            f"error: --diff-rank {diff_rank}: a rank's fusion diff compares it with the same rank of another set; "
            "name that set with --against DIR",
            file=sys.stderr,
        )
        return 2
    sources = [args.path, *against]
    labels = getattr(args, "labels", None)
    labels = [s.strip() for s in labels.split(",")] if labels else None
    progress = _progress if sys.stderr.isatty() and not args.json else None
    report = analyze_ranks(
        sources if against else args.path,
        labels=labels,
        engine=args.engine,
        address=args.address,
        workers=args.workers,
        diff_rank=diff_rank,
        ship=getattr(args, "ship", "paths"),
        on_progress=progress,
    )
    if progress:
        print(file=sys.stderr)
    doc = report.to_json()
    if args.json:
        sys.stdout.write(json_text(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + "\n")
    else:
        print(render_text(doc))
    for f in report.failed():
        print(f"error: {safe_text(f['error'])}", file=sys.stderr)
    for d in report.diffs:
        if "error" in d:
            print(f"error: diff of rank {d['rank']}: {safe_text(d['error'])}", file=sys.stderr)
    if any(f.get("internal") for f in report.failed()):
        return 1  # an analyzer bug hit some rank: the others are printed, but this is not a trace problem
    return 2 if report.failed() or any("error" in d for d in report.diffs) else 0


def _progress(done: int, total: int) -> None:
    print(f"\ranalysed {done}/{total} rank traces", end="", file=sys.stderr, flush=True)


def _ms(us) -> str:
    return fmt_num(None if us is None else us / 1000, ".3f")


def _x(ratio) -> str:
    return "—" if ratio is None else f"{ratio:.2f}x"


def render_text(doc: dict) -> str:
    out: list[str] = []
    for s in doc["sets"]:
        n_ok, n_bad = len(s["ranks"]), len(s["failed"])
        out.append(f"rank set {safe_text(s['label'])}: {n_ok} ranks analysed, {n_bad} failed")
        out += [f"  note: {safe_text(n)}" for n in s["notes"]]
        out.append("  medians over steady-state steps, ms per step")
        head = f"  {'rank':>5} {'steps':>5} {'GPU':>9} {'compute':>9} {'comm':>9} {'exposed':>9} {'copies':>9} {'idle':>9}  file"
        out.append(head)
        for e in s["ranks"]:
            sp = e.get("split_us") or {}
            gpu = (e.get("per_step") or {}).get("gpu_time_us", sp.get("gpu_time_us"))
            cells = [_ms(gpu)] + [
                _ms(sp.get(k))
                for k in ("compute_us", "communication_us", "exposed_communication_us", "memory_us", "idle_us")
            ]
            out.append(
                f"  {e['rank']:>5} {len(e['steps_used']):>5} "
                + " ".join(f"{c:>9}" for c in cells)
                + f"  {safe_text(e['file'])}"
            )
        sp = s["spread"]
        if sp.get("slowest_rank"):
            r = sp["slowest_rank"]
            out.append(
                f"  slowest rank (GPU time): {r['rank']} — {_ms(r['gpu_time_us'])} ms, {_x(r['over_median'])} median"
            )
        if sp.get("straggler_rank"):
            r = sp["straggler_rank"]
            out.append(
                f"  straggler (most compute): {r['rank']} — {_ms(r['compute_us'])} ms, {_x(r['over_median'])} median"
            )
        cats = sp.get("by_category") or {}
        if cats:
            out.append("  category skew over ranks (ms/step min / median / max, max rank):")
            for c, st in sorted(cats.items(), key=lambda kv: -(kv[1] or {}).get("max", 0.0)):
                if st:
                    out.append(
                        f"    {c:<14} {_ms(st['min'])} / {_ms(st['median'])} / {_ms(st['max'])}  rank {st['max_rank']}"
                    )
        for f in s["failed"]:
            out.append(f"  FAILED rank {f['rank']} ({safe_text(f['file'])}): {safe_text(f['error'])}")
        out.append("")
    cmp_ = doc.get("compare")
    if cmp_:
        labels = cmp_["labels"]
        out.append("GPU ms per step by rank: " + " vs ".join(safe_text(x) for x in labels))
        for row in cmp_["ranks"]:
            times = " ".join(f"{_ms(row['gpu_time_us'][lab]):>9}" for lab in labels)
            deltas = ", ".join(
                f"{safe_text(lab)} {fmt_pct(v['delta_pct'])}"
                for lab, v in row["vs_base"].items()
                if v["delta_pct"] is not None
            )
            out.append(f"  rank {row['rank']:>5} {times}   {deltas}")
        for lab, ranks in cmp_["unpaired_ranks"].items():
            out.append(f"  ranks in only one of base / {safe_text(lab)}: {ranks[:16]}")
    for d in doc.get("diffs") or []:
        if "error" in d:
            out.append(f"fusion diff on rank {d['rank']}: {safe_text(d['error'])}")
        else:
            out.append(
                f"fusion diff on rank {d['rank']} (full diff: --json, or `python -m analyzer diff` on its files)"
            )
            for c in d["result"].get("candidates") or []:
                kps = c.get("kernels_per_step") or [None, None]
                q = c.get("headline") or {}
                out.append(
                    f"  {safe_text(c.get('label'))}: kernels/step {kps[0]} -> {kps[1]}, headline "
                    + fmt_pct(q.get("change_pct"))
                    + f" ({q.get('basis')}, {q.get('verdict')})"
                    + f", {c.get('n_fusions', 0)} fusion groups, "
                    + f"HBM bytes avoided/step {fmt_bytes(c.get('hbm_bytes_avoided_per_step'))}"
                )
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analyzer.ranks.cli", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except FuseLensError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
