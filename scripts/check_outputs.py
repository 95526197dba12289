"""Behaviour lock for refactors: the CLI's JSON outputs on every bundled and test trace, recorded once and compared.

    python scripts/check_outputs.py --record DIR     # write every output under DIR (before a move)
    python scripts/check_outputs.py --compare DIR    # rerun and compare byte for byte (after it); exit 1 on a difference

What it runs, from the repository root, with relative paths (so a worktree elsewhere gives the same bytes):
- `summary --json` on every trace under sample_traces/ and tests/data/ (tests/data/broken/ holds bad input on purpose:
  there the one-line error and exit status are recorded instead);
- `diff --json` of each runner set (a directory with manifest.json): eager (else its first trace) against the others;
- `opportunities --json` on each set's first trace;
- `ranks --json` on each multi-rank directory under tests/data/ranks/.
Each output is one file named after its command and inputs. The cache is off (FUSELENS_NO_CACHE=1) so every run
parses the traces it reads. A whole run takes a few minutes on the 2-core machine; --only PATTERN narrows it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
SKIP_NAMES = {"manifest.json", "SOURCE.json"}


def _is_trace(p: Path) -> bool:
    return p.is_file() and p.name.endswith(TRACE_SUFFIXES) and p.name not in SKIP_NAMES and "ncu" not in p.name


def _traces_in(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if _is_trace(p))


def jobs() -> list[tuple[str, list[str]]]:
    """(output name, argv for `python -m analyzer`), every path relative to the repository root."""
    out: list[tuple[str, list[str]]] = []
    roots = [ROOT / "sample_traces", ROOT / "tests" / "data"]
    all_traces = sorted(p for r in roots for p in r.rglob("*") if _is_trace(p))
    for t in all_traces:
        rel = t.relative_to(ROOT).as_posix()
        out.append((f"summary:{rel}", ["summary", rel, "--json"]))
    for r in roots:
        for man in sorted(r.rglob("manifest.json")):
            ts = _traces_in(man.parent)
            # eager is the baseline where the set has one: the claims (fusions, bytes avoided) are made against it
            ts.sort(key=lambda t: (not t.name.startswith("eager."), t.name))
            if len(ts) < 2:
                continue
            rels = [t.relative_to(ROOT).as_posix() for t in ts]
            d = man.parent.relative_to(ROOT).as_posix()
            out.append((f"diff:{d}", ["diff", *rels, "--json"]))
            out.append((f"opportunities:{rels[0]}", ["opportunities", rels[0], "--json"]))
    ranks = ROOT / "tests" / "data" / "ranks"
    if ranks.is_dir():
        for d in sorted(p for p in ranks.iterdir() if p.is_dir()):
            rel = d.relative_to(ROOT).as_posix()
            out.append((f"ranks:{rel}", ["ranks", rel, "--json"]))
    return out


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".out"


def run_one(argv: list[str]) -> bytes:
    """The CLI's stdout and stderr and exit status, run in this process."""
    from analyzer.cli import main

    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse and explicit exits
            rc = e.code
    text = so.getvalue() + ("\n--- stderr ---\n" + se.getvalue() if se.getvalue() else "") + f"\n--- exit {rc}\n"
    return text.encode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--record", metavar="DIR")
    g.add_argument("--compare", metavar="DIR")
    ap.add_argument("--only", metavar="PATTERN", help="run only outputs whose name contains PATTERN")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    os.environ["FUSELENS_NO_CACHE"] = "1"
    sys.path.insert(0, str(ROOT))
    todo = [j for j in jobs() if not args.only or args.only in j[0]]
    target = Path(args.record or args.compare)
    if args.record:
        target.mkdir(parents=True, exist_ok=True)
    differ: list[str] = []
    missing: list[str] = []
    for name, av in todo:
        got = run_one(av)
        f = target / _file_name(name)
        if args.record:
            f.write_bytes(got)
            continue
        if not f.exists():
            missing.append(name)
        elif f.read_bytes() != got:
            differ.append(name)
            (target / (f.name + ".now")).write_bytes(got)
    if args.record:
        print(f"recorded {len(todo)} outputs under {target}")
        return 0
    if args.compare and not args.only:
        recorded = {p.name for p in target.glob("*.out")}
        gone = sorted(recorded - {_file_name(n) for n, _ in todo})
        missing += [f"(no longer produced) {g}" for g in gone]
    print(f"compared {len(todo)} outputs against {target}: {len(differ)} differ, {len(missing)} missing")
    for n in differ:
        print(f"  DIFFERS {n}  (new output beside it as .now)")
    for n in missing:
        print(f"  MISSING {n}")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
