"""`python -m analyzer …` — one entry point; each subcommand's work lives in its own module.

Exit codes: 0 success, 2 a trace/diff error (one line on stderr, never a traceback), 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import sys

from analyzer.errors import FuseLensError
from analyzer.fmt import safe_text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analyzer", description="FuseLens trace analyzer")
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser("summary", help="per-step kernel summary of one trace")
    s.add_argument("trace", help="Kineto trace, .json or .json.gz")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    d = sub.add_parser("diff", help="what CANDIDATE runs changed against BASE: fusions, bytes avoided, time saved")
    d.add_argument("base", help="baseline trace (e.g. eager)")
    d.add_argument("candidates", nargs="+", help="candidate traces (e.g. torch.compile, Liger, FuseLens)")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.add_argument("--report", metavar="FILE", help="write a self-contained report (.html or .md)")
    d.add_argument("--labels", help="comma-separated labels, base first (default: file names)")

    r = sub.add_parser("ranks", help="per-rank summaries and cross-rank spread of a multi-rank trace set")
    from analyzer.ranks.cli import add_arguments as add_ranks_arguments  # one definition of the ranks flags

    add_ranks_arguments(r)

    sub.add_parser("columns", help="print the column contract of every table as Markdown")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "summary":
            from analyzer.summary_cli import run
        elif args.command == "diff":
            from analyzer.diff.cli import run
        elif args.command == "ranks":
            from analyzer.ranks.cli import run
        else:
            from analyzer.schema import markdown

            print(markdown())
            return 0
        return run(args)
    except FuseLensError as err:
        print(f"error: {safe_text(err)}", file=sys.stderr)
        return 2
    except MemoryError:
        print(
            "error: out of memory while reading the trace; raise the machine's memory or split the trace",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130
