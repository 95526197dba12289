"""The design-review report of a Diff: one self-contained HTML file (opens offline: plotly.js inlined, no CDN, no
external request) or Markdown, with the same sections.

    report_html(diff) -> str        report_markdown(diff) -> str        fusions_csv(diff) -> str

Sections: headline per candidate (kernels 5 → 4, HBM traffic avoided per step, time saved), side by side of every
run, GPU time per category, per candidate the fusion groups (fused kernel ← replaced kernels, intermediates with
shape, dtype and size), where the kernel time went, matched GEMMs, kernel swaps and choices, unmatched kernels, what
is left (tensors still written and read back), and the facts every number rests on (GPU, PyTorch, shapes, dtypes,
which figures are estimates).

Every string that comes from a trace (kernel, op and file names, labels) is escaped for the output format: HTML
escaping in HTML (and in chart labels, which Plotly renders as HTML), backslash/entity escaping in Markdown, and a
leading quote in CSV cells that a spreadsheet would run as a formula (`analyzer.cells.spreadsheet_safe`).

Modules: blocks (the report as a list of blocks) and candidate (one candidate's blocks), render (blocks → HTML or
Markdown), export (the CSV), text (cell values they share).
"""

from __future__ import annotations

from analyzer.report.blocks import report_blocks, title
from analyzer.report.export import fusions_csv
from analyzer.report.render import md_escape, render_html, render_md

__all__ = ["fusions_csv", "md_escape", "report_html", "report_markdown"]


def report_html(diff) -> str:
    """The report as one self-contained HTML document (plotly.js inlined once)."""
    return render_html(report_blocks(diff, html_figures=True), title(diff))


def report_markdown(diff) -> str:
    """The report as Markdown (tables; per-category time as text bars instead of charts)."""
    return render_md(report_blocks(diff, html_figures=False))
