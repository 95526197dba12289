"""Cell values shared by the report's blocks, its renderers and its CSV: kernel names kept whole for the HTML
tooltip, intermediates as one line, numbers with their missing-value text."""

from __future__ import annotations

from analyzer.diff.output_text import traffic_text
from analyzer.fmt import fmt_num, short_name


class Name(str):
    """A kernel or op name in a table cell: shown short (templates collapsed), the full name kept for the HTML
    tooltip. Both are escaped on output."""

    def __new__(cls, full: str, suffix: str = ""):
        obj = super().__new__(cls, short_name(full, 70) + suffix)
        obj.full = str(full)
        return obj


def names(names, ops=None) -> list:
    """Kernel names with their ops, each distinct (name, op) once with ' ×k' when it repeats."""
    ops = ops or [""] * len(names)
    counts: dict = {}
    for n, o in zip(names, ops, strict=False):
        counts[(n, o)] = counts.get((n, o), 0) + 1
    return [Name(n, (f" ({o})" if o else "") + (f" ×{k}" if k > 1 else "")) for (n, o), k in counts.items()]


def inter_text(i: dict) -> str:
    shape = "×".join(str(s) for s in i["shape"])
    return f"[{shape}] {i['dtype']} = {i['bytes']:,.0f} B, {traffic_text(i)}"


def pct_text(x) -> str:
    return "unknown (one step)" if x is None else f"{x:.1f}%"


def num_text(x, digits: int) -> str:
    return fmt_num(x, f",.{digits}f", missing="unknown")
