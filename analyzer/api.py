"""The analyzer's public API: what the dashboard (app_core, app_pages) and other callers outside the analyzer use.

Only names: each is defined in the module named beside its import (read that module for its contract), so a move
inside the analyzer changes one import line here, not its callers. Pictures come from `analyzer.figures`; everything
else an outside caller needs is re-exported here (pyproject's import-linter contract holds the dashboard to that).

    trace = load_trace("run.json.gz")          # or load_trace(data, name="upload.json.gz")
    summary = summarize(trace)                 # or load_summary(path): through the on-disk cache
    diff = diff_runs(summary, [other], labels=["eager", "compile"])
    plan = opportunities(summary)              # ranked fusions that would pay, and the predicted step
"""

from __future__ import annotations

from analyzer.diff import BYTES_RULE, ESTIMATES, Diff, diff_runs, run_phases
from analyzer.diff.headline import BASIS_TEXT, headline_text
from analyzer.diff.output_text import traffic_text
from analyzer.errors import DiffError, FuseLensError, TraceError
from analyzer.fmt import (
    MISSING,
    file_label,
    finite,
    fmt_bytes,
    fmt_pct,
    fmt_range,
    fmt_signed,
    fmt_us,
    no_neg_zero,
    safe_text,
    short_name,
    unique_label,
)
from analyzer.memory import release_freed_memory
from analyzer.opportunities import Opportunity, Plan
from analyzer.opportunities import plan_opportunities as opportunities
from analyzer.opportunities.compare import predicted_vs_achieved, table_rows
from analyzer.opportunities.shares import plan_shares
from analyzer.perfetto import step_trace_bytes
from analyzer.phases import PHASES
from analyzer.pipeline import load_summary, load_trace
from analyzer.ranks.inputs import est_bytes_json
from analyzer.readers import cache as _cache
from analyzer.readers.cache import content_key
from analyzer.readers.load import decompression_cap, gzip_ratio_limit
from analyzer.report import fusions_csv, report_html
from analyzer.runmeta import (
    ENTRY_NUMBERS,
    MANIFEST_KEY,
    MANIFEST_SCHEMA,
    SideFileError,
    attach_manifest,
    check_manifest,
    check_ncu,
    conditions_text,
    decode_json,
    diff_context,
    entry_problems,
    manifest_entry_facts,
    ncu_problem,
    read_manifest,
    read_ncu,
    recorded_conditions,
    run_facts,
    side_number,
    workload_parts,
)
from analyzer.steps import REPRESENTATIVE, pick_step, recorded_steps, step_op_counts
from analyzer.summary import Summary, summarize
from analyzer.trace import Trace

__all__ = [
    # the pipeline
    "load_trace",
    "load_summary",
    "summarize",
    "diff_runs",
    "opportunities",
    "Trace",
    "Summary",
    "Diff",
    "Plan",
    "Opportunity",
    "predicted_vs_achieved",
    "table_rows",
    "plan_shares",
    # errors
    "FuseLensError",
    "TraceError",
    "DiffError",
    "SideFileError",
    # inputs: content keys, the cache, load limits, runner side files
    "content_key",
    "cache_use",
    "decompression_cap",
    "gzip_ratio_limit",
    "est_bytes_json",
    "release_freed_memory",
    "decode_json",
    "check_manifest",
    "check_ncu",
    "read_manifest",
    "read_ncu",
    "MANIFEST_KEY",
    "MANIFEST_SCHEMA",
    "attach_manifest",
    "ENTRY_NUMBERS",
    "entry_problems",
    "manifest_entry_facts",
    "ncu_problem",
    "side_number",
    # facts and text about runs and diffs
    "conditions_text",
    "recorded_conditions",
    "diff_context",
    "run_facts",
    "workload_parts",
    "run_phases",
    "PHASES",
    "BASIS_TEXT",
    "headline_text",
    "BYTES_RULE",
    "ESTIMATES",
    # steps
    "REPRESENTATIVE",
    "pick_step",
    "recorded_steps",
    "step_op_counts",
    # exports
    "report_html",
    "fusions_csv",
    "step_trace_bytes",
    # formatting (analyzer.fmt: one rule for every surface)
    "MISSING",
    "file_label",
    "finite",
    "fmt_bytes",
    "fmt_pct",
    "fmt_range",
    "fmt_signed",
    "fmt_us",
    "no_neg_zero",
    "safe_text",
    "short_name",
    "traffic_text",
    "unique_label",
]


def cache_use() -> tuple[int, int]:
    """(bytes the on-disk trace cache holds now, its bound): 0 held when its folder cannot be listed."""
    try:
        used = sum(p.lstat().st_size for p in _cache.entries())
    except OSError:
        used = 0
    return used, _cache.max_bytes()
