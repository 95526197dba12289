"""Spreadsheet-safe CSV cells: the one place that decides which text a spreadsheet would run as a formula.

    spreadsheet_safe(value) -> value, or "'" + value

Why: names in a CSV come from uploaded traces, and a kernel called `=HYPERLINK(…)` or `=cmd|' /C calc'!A0` runs as a
formula when the file is opened in Excel, LibreOffice or Google Sheets ("CSV injection"). Used by every CSV export:
`analyzer.report.fusions_csv` (Compare page download) and `analyzer.figures.kernels_table.csv_bytes` (Kernels page).

Which text counts as a formula start:
* `=` `+` `-` `@`, the characters spreadsheets read as the start of a formula (OWASP "CSV Injection");
* any character whose Unicode compatibility form (NFKC) is one of them: the full-width `＝ ＋ － ＠` (U+FF1D, U+FF0B,
  U+FF0D, U+FF20), the small forms `﹦ ﹢ ﹣ ﹫` and the like, which some spreadsheet apps and input methods fold
  to ASCII;
* those behind leading whitespace or invisible characters (space, no-break space, U+3000, tab, CR, LF, other control
  and format characters such as U+200B or a BOM), which importers may trim before they look at the cell;
* a leading tab, CR or LF whatever follows (OWASP lists tab and CR as starters; LF for good measure).

What it does: such a text gets an apostrophe in front, the OWASP remedy (a spreadsheet shows the rest as text); the
text itself is kept verbatim. Other text is returned unchanged.

Numbers stay numbers: only `str` values are ever touched. An int, float (e.g. -3.5 in a numeric column), bool,
None or numpy scalar is returned as is, so a CSV writer writes it as a number a spreadsheet can sum. Callers keep
numeric columns numeric; a `str` is text, so a name that merely looks like "-3.5" is quoted like any other.
"""

from __future__ import annotations

import unicodedata
from typing import TypeVar

FORMULA_CHARS = frozenset("=+-@")  # after NFKC: also ＝ ＋ － ＠ (U+FF1D, U+FF0B, U+FF0D, U+FF20), ﹦ ﹢ ﹣ ﹫, …
LEADING_STARTERS = ("\t", "\r", "\n")  # a cell starting with one of these is quoted whatever follows

T = TypeVar("T")


def _skippable(ch: str) -> bool:
    """Whitespace, control (Cc) and format (Cf: zero-width space, BOM, bidi marks) characters: invisible, trimmable."""
    return ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf")


def is_formula(text: str) -> bool:
    """True when a spreadsheet could run `text` as a formula (see the module docstring for the exact rule)."""
    if text.startswith(LEADING_STARTERS):
        return True
    for ch in text:
        if not _skippable(ch):
            return unicodedata.normalize("NFKC", ch) in FORMULA_CHARS
    return False


def spreadsheet_safe(value: T) -> T | str:
    """`value` as a CSV cell a spreadsheet will not evaluate: formula-starting text gets a leading apostrophe
    ("=1+1" → "'=1+1", "＝1+1" → "'＝1+1", " \\t=1" → "' \\t=1"); other text and every non-str value (numbers
    included: -3.5 stays the float -3.5) are returned unchanged."""
    if isinstance(value, str) and is_formula(value):
        return "'" + value
    return value
