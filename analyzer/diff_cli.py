"""`python -m analyzer diff BASE CANDIDATE [CANDIDATE…] [--json] [--report FILE.html|FILE.md] [--labels a,b,c]`.

Loads and summarizes each trace, diffs the candidates against the baseline and prints a short text summary (or,
with --json, the Diff's JSON object). --report also writes a self-contained HTML or Markdown report.
It sits above analyzer.diff and analyzer.report (it writes reports), so neither imports it.
Errors (unreadable trace, bad labels, report path) raise TraceError / DiffError: analyzer.cli prints one line and
exits 2.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from analyzer.diff import diff_runs
from analyzer.diff.output_text import text_lines
from analyzer.errors import DiffError
from analyzer.fmt import json_text, safe_block, safe_text
from analyzer.pipeline import load_trace
from analyzer.report import report_html, report_markdown
from analyzer.runmeta import attach_manifest, manifest_note, manifest_problem
from analyzer.summary import summarize

REPORT_SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def run(args) -> int:
    paths = [args.base, *args.candidates]
    labels = None
    if getattr(args, "labels", None):
        labels = [x.strip() for x in str(args.labels).split(",")]
        if len(labels) != len(paths):
            raise DiffError(
                f"--labels: {len(labels)} labels for {len(paths)} traces (give one per trace, baseline first)"
            )
    report = getattr(args, "report", None)
    kind = None
    if report:
        kind = REPORT_SUFFIXES.get(Path(report).suffix.lower())
        if kind is None:
            raise DiffError(f"{report}: --report must end in .html or .md")

    summaries = []
    said = set()
    for p in paths:
        trace = load_trace(p)
        problem = manifest_problem(p)
        if problem:
            raise DiffError(problem)
        note = manifest_note(p)  # a side file off the runner's schema: one line, and the diff goes on without it
        if note and note not in said:
            said.add(note)
            print(f"warning: {safe_text(note)}", file=sys.stderr)
        attach_manifest(trace, p)
        summaries.append(summarize(trace))
    diff = diff_runs(summaries[0], summaries[1:], labels=labels)

    if report:
        text = report_html(diff) if kind == "html" else report_markdown(diff)
        try:
            Path(report).write_text(text, encoding="utf-8")
        except OSError as err:
            raise DiffError(f"{report}: cannot write the report: {err.strerror or err}") from None

    if getattr(args, "json", False):
        print(json_text(diff.to_json()))
    else:
        print(safe_block("\n".join(text_lines(diff))))
        if report:
            print(f"report: {safe_text(os.fspath(report))}")
    return 0
