"""`python -m analyzer diff BASE CANDIDATE [CANDIDATE…] [--json] [--report FILE.html|FILE.md] [--labels a,b,c]`.

Loads and summarizes each trace, diffs the candidates against the baseline and prints a short text summary (or,
with --json, the Diff's JSON object). --report also writes a self-contained HTML or Markdown report.
Errors (unreadable trace, bad labels, report path) raise TraceError / DiffError: analyzer.cli prints one line and
exits 2.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from analyzer.errors import DiffError
from analyzer.fmt import (
    finite,
    fmt_bytes,
    fmt_pct,
    fmt_range,
    fmt_us,
    json_text,
    safe_block,
    safe_text,
    short_name,
)

REPORT_SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def run(args) -> int:
    from analyzer.diff import diff_runs
    from analyzer.pipeline import load_trace
    from analyzer.runmeta import attach_manifest, manifest_note, manifest_problem
    from analyzer.summary import summarize

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
        from analyzer.report import report_html, report_markdown

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


GROUPS_SHOWN = 12  # fusion groups listed in full; a whole model's others are summed in the 'by pattern' line
UNEXPLAINED_SHOWN = 8


def _pct_call(pct, call: str | None) -> str:
    """'13.0% faster' (the word carries the sign: never '-13.0% faster'), '+0.3% (tie)' without a clear call."""
    word = str(call or "").strip()
    if finite(pct) and word.split(" ")[0] in ("faster", "slower"):
        return f"{abs(float(pct)):,.1f}% {word}"
    return f"{fmt_pct(pct)} {word}".rstrip()


def text_lines(diff) -> list[str]:
    """The terminal view: the headline of every candidate first (analyzer.diff.headline), then one block per
    candidate with the figures it rests on."""
    from analyzer.diff.headline import headline_text

    b = diff.base
    heads = [(cd, cd.headline()) for cd in diff.candidates]
    out = [f"headline: {headline_text(h['headline'], cd.label, cd.base_label)}" for cd, h in heads]
    out.append(f"baseline {b.label}: {b.source}" + (f" · {b.gpu}" if b.gpu else ""))
    for cd, h in heads:
        r = cd.run
        pct = h.get("raw_gpu_time_change_pct")
        change = (
            f": {_pct_call(pct, (h.get('spread') or {}).get('calls', {}).get('gpu_time'))}" if pct is not None else ""
        )
        out.append("")
        out.append(f"{cd.label} vs {cd.base_label}: {r.source}")
        out.append(f"  headline: {h['headline']['reason']}")
        out += [f"  {line}" for line in cd.lead_lines()]
        sp = h.get("spread") or {}
        calls = sp.get("calls") or {}
        rb, rc = sp.get("gpu_time_us_per_step") or [None, None]
        norm = h.get("normalised_gpu_time_change_pct")
        out.append(
            f"  kernels/step {cd.kernels_per_step[0]} → {cd.kernels_per_step[1]} · GPU time/step as recorded "
            f"{fmt_us(b.gpu_time_us_per_step)}{fmt_range(rb)} → {fmt_us(r.gpu_time_us_per_step)}{fmt_range(rc)}{change}"
            + (f", normalised {_pct_call(norm, calls.get('gpu_time_normalised'))}" if norm is not None else "")
        )
        out.append("  " + cd.step_times_text())
        ev = h.get("cuda_event_time_us_per_step") or [None, None]
        if ev[0] is not None and ev[1] is not None:
            eb, ec = sp.get("cuda_event_time_us_per_step") or [None, None]
            out.append(
                f"  CUDA events (runner): {fmt_us(ev[0])}{fmt_range(eb, 'p10–p90')} → {fmt_us(ev[1])}{fmt_range(ec, 'p10–p90')}"
                + (f" {calls['cuda_events']}" if calls.get("cuda_events") else "")
            )
        out.append(
            f"  {cd.traffic_avoided()['text']}; logical: {cd.hbm_bytes_avoided_per_step:,.0f} B, estimate · "
            f"time saved by fusions {fmt_us(cd.time_saved_us_per_step)}/step"
        )
        if cd.accounting is not None:
            out.append(f"  accounting: {cd.accounting.text()}")
            for k in cd.accounting.unexplained[:UNEXPLAINED_SHOWN]:
                out.append(
                    f"      unexplained: {short_name(k['name'])} ({k['op']}) ×{k['count_per_step']} "
                    f"{fmt_us(k['time_us_per_step'])}/step"
                )
            if len(cd.accounting.unexplained) > UNEXPLAINED_SHOWN:
                out.append(f"      (+{len(cd.accounting.unexplained) - UNEXPLAINED_SHOWN} more: see --json)")
        if cd.phases:
            out.append(f"  {cd.phases_text()}")
        patterns = cd.pattern_summary()
        if len(cd.fusions) > GROUPS_SHOWN:
            out.append(
                "  by pattern: "
                + " · ".join(
                    f"{p['pattern']} ×{p['groups_per_step']}"
                    + (f" ({p['phase']})" if cd.phases else "")
                    + f" saved {fmt_us(p['time_saved_us_per_step'])}, {fmt_bytes(p['bytes_avoided_per_step'])}"
                    for p in patterns
                )
            )
        shown = sorted(cd.fusions, key=lambda f: -f.time_saved_us_per_step)[:GROUPS_SHOWN]
        for f in cd.fusions:
            if f not in shown:
                continue
            inter = ", ".join(f"{i['matrix']} {i['dtype']} (written once, read {i['reads']}×)" for i in f.intermediates)
            inter = inter or "none"
            out.append(
                f"  fusion{f' ({f.count_per_step} per step)' if f.count_per_step > 1 else ''}: {short_name(f.fused_kernel)} ← "
                f"{' + '.join(f.ops) or '?'} ({len(f.replaces)} kernels) · intermediates {inter} · "
                f"{fmt_bytes(f.bytes_avoided_per_step)} avoided · {fmt_us(f.base_time_us_per_step)} → "
                f"{fmt_us(f.candidate_time_us_per_step)}" + (f" · {f.pattern}" if f.pattern else "")
            )
            if f.bytes_note:
                out.append(f"      bytes: {f.bytes_note}")
        if len(cd.fusions) > GROUPS_SHOWN:
            out.append(f"  (+{len(cd.fusions) - GROUPS_SHOWN} more fusion groups, less time saved: --json or --report)")
        for f in cd.swaps:
            out.append(f"  swap: {short_name(f.fused_kernel)} ← {short_name(f.replaces[0])} ({'+'.join(f.ops) or '?'})")
        if cd.kernel_choices:
            out.append(f"  kernel choices (same op and shapes, other kernels): {len(cd.kernel_choices)}")
        n_ub = sum(k["count_per_step"] for k in cd.unmatched_base)
        n_uc = sum(k["count_per_step"] for k in cd.unmatched_candidate)
        if n_ub or n_uc:
            out.append(f"  unmatched kernels/step: {n_ub} baseline, {n_uc} candidate (see --json or --report)")
        left = r.remaining_bytes_per_step
        if r.remaining_unknown:
            out.append(f"  still round-tripping through HBM: unknown ({r.remaining_unknown})")
        elif left > 0:
            out.append(f"  still round-tripping through HBM: {fmt_bytes(left)}/step (see the report's 'What is left')")
    for n in diff.notes:
        out.append(f"note: {n}")
    return out
