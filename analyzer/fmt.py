"""The one place that turns figures and trace-derived text into what a person reads.

Every surface (CLI, report, CSVs, figures, app pages) formats bytes, times, kernel names, labels and signed changes
with these helpers, so one figure reads the same everywhere, and every piece of text that came from a trace or a
file name passes `safe_text` before it reaches a terminal, a Markdown file or a CSV cell.

Why `safe_text`: kernel names, record_function labels and file names come from files users upload. A name holding
``ESC[31m`` recolours the terminal, ``ESC]8;;url BEL`` plants a clickable link (OSC 8), ``ESC]0;… BEL`` retitles the
window, BEL rings, and U+202E (right-to-left override) makes ``gemm‮lmth.exe`` read backwards in a table. None of
that may reach a terminal or a document raw.
"""

from __future__ import annotations

import html
import math
import re

import orjson

# --- text from traces ------------------------------------------------------------------------------------------------

# ESC-introduced sequences, longest forms first:
#   OSC / DCS / SOS / PM / APC: ESC ] … (BEL | ESC \), the string may hold anything but the terminator;
#   CSI: ESC [ parameters/intermediates, one final byte;
#   any other ESC + one character (ESC c, ESC 7, ESC ( B …).
# The 8-bit C1 forms (U+009B CSI, U+009D OSC, U+0090 DCS …) follow the same shapes.
_ESCAPES = re.compile(
    r"(?:\x1b[\]P^_X]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
# What is left that a terminal or a bidi-aware viewer acts on: C0 (tabs and line breaks included: one line of text),
# DEL, C1, and the bidi embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069, U+200E/F, U+061C).
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_CONTROLS_KEEP_NL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_SPACES = re.compile(r"[ \t\r\n\f\v]+")


def safe_text(text: object, max_chars: int | None = None) -> str:
    """`text` on one line with no terminal escape sequence (ANSI CSI, OSC, DCS, 8-bit C1 forms), no C0/C1 control
    character (BEL, NUL, CR …) and no bidi override: sequences are removed, line breaks and tabs become one space.
    Printable text (µ, CJK, emoji) is kept. `max_chars` cuts with '…'."""
    t = "" if text is None else str(text)
    if not t.isascii() or not t.isprintable():
        t = _SPACES.sub(" ", t)
        t = _ESCAPES.sub("", t)
        t = _CONTROLS.sub("", t)
    t = " ".join(t.split())
    if max_chars is not None and len(t) > max_chars:
        t = t[: max_chars - 1] + "…"
    return t


def html_text(text: object, max_chars: int | None = None, quote: bool = False) -> str:
    """`safe_text`, then HTML-escaped: for HTML reports and Plotly labels and hovers, which render a subset of HTML,
    so a name holding '<script>' or '<img onerror=…>' reaches them as text. quote: also escape quotes (text that
    goes inside an attribute value)."""
    return html.escape(safe_text(text, max_chars), quote=quote)


def safe_block(text: str) -> str:
    """A multi-line block (a CLI's whole output) with the same rule as `safe_text` on each line: line breaks stay,
    everything `safe_text` strips goes. The last line of defence before a terminal."""
    t = str(text)
    if t.isascii() and all(c.isprintable() or c == "\n" for c in t):
        return t
    t = t.replace("\r\n", "\n")
    t = _ESCAPES.sub("", t)
    return _CONTROLS_KEEP_NL.sub("", t)


# In JSON output, names keep their exact text (they are data: a diff matches on them) but characters a terminal
# or a viewer acts on are written as \\uXXXX escapes, which any JSON reader turns back into the same string. orjson
# already escapes C0; this adds DEL, C1 and bidi controls. They can only sit inside JSON strings.
_JSON_RAW = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u2028\u2029]")


def json_text(obj, option: int | None = None) -> str:
    """`obj` (after `clean_json`) as JSON text that is safe to print to a terminal (`option`: orjson's flags)."""
    s = orjson.dumps(clean_json(obj), option=option).decode()
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", s)


# --- JSON ------------------------------------------------------------------------------------------------------------


def clean_json(value):
    """Plain JSON types only, recursively: numpy scalars and arrays → Python, NaN/inf/NA → None, tuples → lists,
    keys → str; anything else unknown → its str()."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    # lazy: `python -m analyzer` imports fmt before it parses its arguments (pandas: 0.6 s); only a value that is
    # not plain Python gets here
    import numpy as np

    if isinstance(value, np.ndarray):
        return [clean_json(v) for v in value.tolist()]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        f = float(value)
        return f if math.isfinite(f) else None
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return str(value)


# --- numbers ---------------------------------------------------------------------------------------------------------

MISSING = "—"


def finite(x) -> bool:
    """A number that is not None, NaN or inf (numpy scalars and numeric strings included)."""
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def fmt_bytes(n, missing: str = "unknown") -> str:
    """Decimal units, as HBM bandwidth is quoted: 100,663,296 → '100.7 MB'; 1,234 B → '1.2 kB'; 12 → '12 B'."""
    if not finite(n):
        return missing
    n = float(n)
    a = abs(n)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if a >= scale:
            return no_neg_zero(f"{n / scale:,.1f}") + f" {unit}"
    return no_neg_zero(f"{n:,.0f}") + " B"


def fmt_us(us, missing: str = "unknown") -> str:
    """'254.3 µs'; '12.3 ms' from 10 ms up; `missing` for None/NaN."""
    if not finite(us):
        return missing
    us = float(us)
    if abs(us) >= 10_000:
        return no_neg_zero(f"{us / 1000:,.1f}") + " ms"
    return no_neg_zero(f"{us:,.1f}") + " µs"


def fmt_range(r, what: str = "") -> str:
    """' (255.4–255.8)' or ' (p10–p90 261.4–264.6)': a figure's spread over steps, shown beside its median; ''
    when there is none."""
    if not r or len(r) != 2 or not (finite(r[0]) and finite(r[1])):
        return ""
    lo, hi = no_neg_zero(f"{float(r[0]):,.1f}"), no_neg_zero(f"{float(r[1]):,.1f}")
    return f" ({what + ' ' if what else ''}{lo}–{hi})"


def fmt_us_spread(us, r, missing: str = "unknown", what: str = "") -> str:
    """'226.7 µs (226.5–226.9)': a per-step median with its spread over steps, the spread in the median's unit
    ('66.0 ms (62.3–69.2)', not '(62,300.0–69,249.0)' beside ms)."""
    if not finite(us):
        return fmt_us(us, missing)
    ms = abs(float(us)) >= 10_000  # fmt_us's switch to ms
    if ms and r and len(r) == 2 and finite(r[0]) and finite(r[1]):
        r = [float(r[0]) / 1000, float(r[1]) / 1000]
    return fmt_us(us, missing) + fmt_range(r, what)


def fmt_saved(us) -> str:
    """'36.2 µs saved', or '3.1 µs slower' for a negative saving; 'unknown saved' never: unknown stays 'unknown'."""
    if not finite(us):
        return fmt_us(us)
    return f"{fmt_us(us)} saved" if float(us) >= 0 else f"{fmt_us(-float(us))} slower"


def fmt_num(x, spec: str = ",.1f", unit: str = "", missing: str = MISSING) -> str:
    """`x` formatted with `spec` (+ unit), `missing` for None/NaN/inf; never '-0.0'."""
    if not finite(x):
        return missing
    return no_neg_zero(format(float(x) if "d" not in spec else int(x), spec)) + unit


def fmt_signed(x, spec: str = ",.1f", unit: str = "", missing: str = MISSING) -> str:
    """A change with its sign: '+12.3', '-4.0', and '0.0' (never '-0.0' or '+0.0') when it rounds to zero."""
    if not finite(x):
        return missing
    s = format(float(x), "+" + spec.lstrip("+"))
    if _is_zero(s):
        s = s[1:]
    return s + unit


def fmt_pct(x, decimals: int = 1, missing: str = MISSING) -> str:
    """A signed percentage change: '+9.5%', '-3.0%', '0.0%'."""
    return fmt_signed(x, f",.{decimals}f", "%", missing)


def _is_zero(s: str) -> bool:
    return not any(c in "123456789" for c in s)


def no_neg_zero(s: str) -> str:
    """'-0.0' → '0.0' (a formatted number that rounds to zero carries no sign)."""
    return s[1:] if s.startswith("-") and _is_zero(s) else s


# --- kernel names ----------------------------------------------------------------------------------------------------

_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def short_name(name: object, max_chars: int = 60) -> str:
    """A kernel name short enough for a table or an axis, made safe (`safe_text`): C++ template arguments and
    parameter lists collapsed ('void at::native::vectorized_elementwise_kernel<4, …>(int, …)' →
    'at::native::vectorized_elementwise_kernel<…>'), cut with '…'. Not HTML/Markdown-escaped: the caller escapes
    for its output format."""
    s = safe_text(name)
    if s.startswith("void "):
        s = s[5:]
    if len(s) <= max_chars:
        return s  # short already: shown whole
    for _ in range(8):  # nested templates: innermost first
        t = _TEMPLATE_ARGS.sub("\x00", s)
        if t == s:
            break
        s = t
    s = s.replace("\x00", "<…>")
    s = re.sub(r"(?<=[\w>])\(.*\)$", "", s) or s  # a C++ parameter list, not 'Memset (Device)'
    return s if len(s) <= max_chars else s[: max_chars - 1] + "…"


def base_name(name: object) -> str:
    """'void at::native::foo<4, bar>(int, …)' → 'at::native::foo': how ncu and Kineto names can still be matched."""
    s = str(name).strip()
    s = s[5:] if s.startswith("void ") else s
    for stop in ("<", "("):
        i = s.find(stop)
        if i > 0:
            s = s[:i]
    return s.strip()


# --- labels ----------------------------------------------------------------------------------------------------------


def file_label(file_name: str) -> str:
    """A run's default label from its file name: no folders, no '.pt.trace.json.gz'-style suffixes, `safe_text`."""
    base = str(file_name).replace("\\", "/").rsplit("/", 1)[-1]
    stem = base
    for suffix in (".gz", ".json", ".trace", ".pt"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    return safe_text(stem or base)


def unique_label(label: str, taken) -> str:
    """`label`, or 'label (2)', 'label (3)' … the first not in `taken`: the one rule for telling runs apart."""
    out, k = label, 2
    while out in taken:
        out, k = f"{label} ({k})", k + 1
    return out


def unique_labels(labels) -> list[str]:
    """Each label made unique against those before it (`unique_label`)."""
    out: list[str] = []
    seen: set[str] = set()
    for lab in labels:
        new = unique_label(lab, seen)
        out.append(new)
        seen.add(new)
    return out


def counted(items) -> list[str]:
    """Each distinct item once, in first-seen order, with ' ×k' when it repeats: a whole-model group's list of
    replaced kernels (an optimizer step's 300 multi_tensor_apply launches) read as its few distinct kernels."""
    counts: dict = {}
    for x in items:
        counts[x] = counts.get(x, 0) + 1
    return [f"{x} ×{n}" if n > 1 else str(x) for x, n in counts.items()]


def text_table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """A plain-text table for the terminal: columns padded to their widest cell, those in `right` right-aligned,
    a dashed rule under the headers (the summary and opportunities CLIs)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]
