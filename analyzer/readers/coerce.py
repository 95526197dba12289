"""Python values → typed columns: int64 / float64 arrays and interned strings, with the odd value read as unknown.

The typed path (every value already of its Struct's type) is one C conversion per column; a column holding strings,
nulls or lists where numbers belong (a lenient batch, ROCm's ``"bytes": "1"``) takes the slow path for that column
only. Unknown numbers become NaN / -1, never 0, and ``bad`` counts the values that were present but unreadable.
"""

from __future__ import annotations

import numpy as np


def ints(values, bad: list | None = None) -> np.ndarray:
    """int64 column from Python values; anything that is not an integer-valued number or digit string → -1.

    bad: a one-item list counting values that were present but unreadable (for a warning)."""
    types = set(map(type, values))
    if types <= {int}:
        try:
            return np.array(values, dtype=np.int64) if len(values) else np.empty(0, np.int64)
        except OverflowError:
            pass
    return _ints_slow(values, bad)


def _ints_slow(values, bad: list | None) -> np.ndarray:
    import pandas as pd  # here only: a refused gzip bomb is answered before pandas is imported (0.25–3 s)

    s = pd.Series(list(values), dtype=object)
    is_str = s.map(type).eq(str).to_numpy()
    out = np.full(len(s), -1, dtype=np.int64)
    num = np.full(len(s), np.nan)
    if is_str.any():
        # "stream 7", "25738" (legacy string tids) → the trailing integer
        digits = s[is_str].str.extract(r"(-?\d+)\s*$", expand=False)
        num[is_str] = pd.to_numeric(digits, errors="coerce").to_numpy(dtype=float)
    other = ~is_str
    if other.any():
        num[other] = _floats_slow(s[other].tolist(), None)
    ok = np.isfinite(num) & (num == np.round(num)) & (np.abs(num) < 2**62)
    out[ok] = num[ok].astype(np.int64)
    if bad is not None:
        present = s.notna().to_numpy() & ~s.isin([""]).to_numpy()
        bad[0] += int((present & ~ok).sum())
    return out


def floats(values, bad: list | None = None) -> np.ndarray:
    """float64 column; None / non-numbers → NaN. Typed-path values are already float, so this is one C call."""
    types = set(map(type, values))
    if types <= {float, int}:
        try:
            return np.array(values, dtype=np.float64) if len(values) else np.empty(0)
        except OverflowError:
            pass
    return _floats_slow(values, bad)


def _floats_slow(values, bad: list | None) -> np.ndarray:
    out = np.full(len(values), np.nan)
    unreadable = 0
    for i, v in enumerate(values):  # only for a column holding non-numbers: rare
        if v is None:
            continue
        if isinstance(v, bool):
            unreadable += 1
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError, OverflowError):
            unreadable += 1
    if bad is not None:
        bad[0] += unreadable
    return out


def strings(values, cache: dict, strict: bool = False) -> list:
    """Interned str column: equal names share one object (a kernel name repeats ~10^4 times in a big trace).

    cache must map None → "" (unknown string); it is seeded so by the accumulator. strict: the values come from
    a typed batch (``str | None`` by the Struct's type), so the type check is skipped: touching every string
    once more costs ~140 ns an event on the dev box (a cache miss per object)."""
    out = list(map(cache.setdefault, values, values))
    if not strict and not set(map(type, out)) <= {str}:  # lenient batches: numbers or lists where a name belongs
        out = [v if isinstance(v, str) else cache.setdefault(str(v), str(v)) for v in out]
    return out


def int_col(values: list, bad: list, strict: bool = True) -> np.ndarray:
    """int64 column: one C conversion unless a value is odd (None, "stream 7", a float in a lenient batch)."""
    if strict:
        try:
            return np.fromiter(values, np.int64, len(values))
        except (TypeError, ValueError, OverflowError):
            pass
    return ints(values, bad)


def float_col(values: list, bad: list, strict: bool = True) -> np.ndarray:
    if strict:
        try:
            return np.fromiter(values, np.float64, len(values))
        except (TypeError, ValueError, OverflowError):
            pass
    return floats(values, bad)
