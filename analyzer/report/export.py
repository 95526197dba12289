"""Fusion groups, swaps and kernel choices of a Diff as CSV, formula-injection safe."""

from __future__ import annotations

import csv
import io
import math

from analyzer.cells import spreadsheet_safe
from analyzer.fmt import counted, safe_text
from analyzer.report.text import inter_text


def fusions_csv(diff) -> str:
    """Fusion groups, swaps and kernel choices of every candidate as CSV, formula-injection safe."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [
            "candidate",
            "kind",
            "fused_kernel",
            "replaces",
            "ops",
            "count_per_step",
            "intermediates",
            "bytes_avoided_per_step",
            "predicted_dram_bytes_avoided_per_step",
            "base_time_us_per_step",
            "candidate_time_us_per_step",
            "time_saved_us_per_step",
            "bytes_basis",
        ]
    )
    for cd in diff.candidates:
        basis = (
            "bytes_avoided_per_step: LOGICAL (intermediates written and read back, every byte); "
            f"predicted_dram_bytes_avoided_per_step: replaced minus replacing kernels' {cd.base.dram_basis or 'unknown'}"
        )
        for f in cd.fusions + cd.swaps + cd.kernel_choices:
            w.writerow(
                [
                    _text_cell(cd.label),
                    _text_cell(f.kind),
                    _text_cell(f.fused_kernel),
                    _text_cell(" + ".join(counted(f.replaces))),
                    _text_cell("+".join(f.ops)),
                    f.count_per_step,
                    _text_cell("; ".join(inter_text(i) for i in f.intermediates)),
                    _num_cell(f.bytes_avoided_per_step),
                    _num_cell(f.dram_bytes_avoided_per_step),
                    _num_cell(f.base_time_us_per_step),
                    _num_cell(f.candidate_time_us_per_step),
                    _num_cell(f.time_saved_us_per_step),
                    _text_cell(basis),
                ]
            )
    return buf.getvalue()


def _text_cell(s) -> str:
    """A text cell on one line (`fmt.safe_text`: no escape sequence, control or bidi override) that a spreadsheet
    will not evaluate."""
    return spreadsheet_safe(safe_text(s))


def _num_cell(x) -> str:
    return "" if x is None or (isinstance(x, float) and not math.isfinite(x)) else repr(float(x))
