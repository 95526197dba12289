"""`python -m analyzer …` — one entry point; each subcommand's work lives in its own module.

Exit codes: 0 success, 2 a trace/diff error (one line on stderr, never a traceback), 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from analyzer.errors import FuseLensError
from analyzer.fmt import safe_text


def build_parser(prog: str = "python -m analyzer") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="FuseLens trace analyzer")
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser("summary", help="per-step kernel summary of one trace")
    s.add_argument("trace", help="Kineto trace, .json or .json.gz")
    add_cache_argument(s)
    s.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    d = sub.add_parser("diff", help="what CANDIDATE runs changed against BASE: fusions, bytes avoided, time saved")
    d.add_argument("base", help="baseline trace (e.g. eager)")
    d.add_argument("candidates", nargs="+", help="candidate traces (e.g. torch.compile, Liger, FuseLens)")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.add_argument("--report", metavar="FILE", help="write a self-contained report (.html or .md)")
    d.add_argument("--labels", help="comma-separated labels, base first (default: file names)")
    add_cache_argument(d)

    o = sub.add_parser("opportunities", help="what fusion would buy in one trace: ranked, with predicted µs saved")
    o.add_argument("trace", help="baseline trace (e.g. eager), .json or .json.gz")
    o.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    add_cache_argument(o)

    r = sub.add_parser("ranks", help="per-rank summaries and cross-rank spread of a multi-rank trace set")
    from analyzer.ranks.cli import add_arguments as add_ranks_arguments  # one definition of the ranks flags

    add_ranks_arguments(r)

    sub.add_parser("columns", help="print the column contract of every table as Markdown")

    j = sub.add_parser("schema", help="print the JSON Schema of a runner side file (docs/schemas/*.schema.json)")
    j.add_argument("kind", choices=("manifest", "ncu"), help="manifest.json or <variant>.ncu.json")

    c = sub.add_parser("cache", help="where the columnar trace cache is, its size; --clear empties it")
    c.add_argument("--clear", action="store_true", help="delete every cached trace")
    return parser


def add_cache_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the columnar trace cache (same as FUSELENS_NO_CACHE=1)",
    )


def _cache_command(args) -> int:
    from analyzer.readers import cache

    if args.clear:
        n, freed = cache.clear()
        print(
            f"removed {n} cached traces, summaries and rank results ({freed / 2**20:,.1f} MiB) from {cache.cache_dir()}"
        )
        return 0
    files = cache.entries()
    total = 0
    for p in files:  # an entry evicted by another process meanwhile counts as nothing
        with contextlib.suppress(OSError):
            total += p.lstat().st_size
    derived = sum(cache.is_derived(p) for p in files)
    state = "on" if cache.enabled() else f"off ({cache.ENV_OFF})"
    print(
        f"{cache.cache_dir()}: {len(files) - derived} cached traces and {derived} summaries/rank results,"
        f" {total / 2**20:,.1f} MiB"
        f" (bound {cache.max_bytes() / 2**20:,.0f} MiB, {cache.ENV_MAX_BYTES}); cache {state}"
    )
    return 0


def main(argv: list[str] | None = None, prog: str = "python -m analyzer") -> int:
    args = build_parser(prog).parse_args(argv)
    if getattr(args, "no_cache", False):
        from analyzer.readers.cache import ENV_OFF

        os.environ[ENV_OFF] = "1"  # an environment variable so that ranks' worker processes see it too
    try:
        if args.command == "cache":
            return _cache_command(args)
        if args.command == "schema":
            from analyzer.runmeta import schema_text

            sys.stdout.write(schema_text(args.kind))
            return 0
        if args.command == "summary":
            from analyzer.summary_cli import run
        elif args.command == "diff":
            from analyzer.diff_cli import run
        elif args.command == "opportunities":
            from analyzer.opportunities.cli import run
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
