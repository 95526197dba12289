"""Arithmetic on the diff's measured figures, NaN- and None-aware: [low, high] ranges over the steady steps and
their relative spread, the faster / slower / tie call they support, the weighted median of the conditions' factor,
change percentages, differences and GB/s.

The bottom of the diff's result layer: the model (analyzer.diff.model), both outputs (output_text, output_json) and
the conditions' check (analyzer.diff.comparability) read these; nothing here knows a diff object.
"""

from __future__ import annotations

import math

import numpy as np

from analyzer.fmt import finite
from analyzer.steps import spread_range

# A difference below 0.5% of the baseline's kernel time per step is a tie whatever the step ranges say: two runs'
# steady steps can each be tight (0.05% on the H100) yet differ by a memset's worth of time, which is no finding.
RESOLUTION = 0.005


def gbps(nbytes: float, us: float) -> float:
    if not finite(nbytes) or not finite(us) or us <= 0:
        return math.nan
    return nbytes / (us * 1e3)  # bytes per µs / 1e3 = 1e9 bytes per second


def range_or_none(values) -> list[float] | None:
    """[low, high] of per-step values (analyzer.steps.spread_range: one rule for every shown spread), or None when there are none or it is unknown."""
    if values is None or len(values) == 0:
        return None
    lo, hi = spread_range(values)
    return [lo, hi] if finite(lo) and finite(hi) else None


def div(x, f: float | None):
    """x / f for a number or a [low, high] range; None when either is unknown."""
    if x is None or f is None:
        return None
    if isinstance(x, (list, tuple)):
        return [v / f for v in x]
    return x / f if finite(x) else None


def saved_range(rb, rc) -> list[float] | None:
    """[low, high] of base − candidate from each side's [low, high] over steps."""
    if not rb or not rc:
        return None
    return [rb[0] - rc[1], rb[1] - rc[0]]


def call(saved, floor_us: float = 0.0) -> str | None:
    """'faster' when even the worst steps saved time, 'slower' when even the best lost it, else 'tie' — also when
    the difference is below floor_us (the resolution: RESOLUTION of the baseline's kernel time per step)."""
    if not saved:
        return None
    if abs(saved[0] + saved[1]) / 2 < floor_us:
        return "tie"
    if saved[0] > 0:
        return "faster"
    if saved[1] < 0:
        return "slower"
    return "tie"


def event_range(facts: dict) -> list[float] | None:
    """The runner's CUDA-event p10–p90 per step from a run's facts, or None."""
    lo, hi = facts.get("p10_us"), facts.get("p90_us")
    return [float(lo), float(hi)] if finite(lo) and finite(hi) else None


def sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def pct(new: float, old: float) -> float:
    if not finite(new) or not finite(old) or old == 0:
        return math.nan
    return 100.0 * (new - old) / old


def spread_pct(values) -> float | None:
    """Relative spread of per-step values, in % of their median: (max − min) / median, or (p90 − p10) / median
    from 10 values on (one outlier step in 20 does not set it). None for fewer than 2 values or a zero median."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return None
    med = float(np.median(v))
    if med <= 0:
        return None
    lo, hi = spread_range(v)
    return 100.0 * (hi - lo) / med


def weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    """The weighted median, interpolated: each value sits at the midpoint of its weight on the cumulative scale (x
    sorted), and the median is read off at half the total weight, linearly between neighbours. With many cells it is
    the plain weighted median; with two or three (a short step) it moves smoothly between them instead of jumping to
    whichever is heavier (two equal weights: their mean; weights 0.7 and 0.3: 30% of the way to the lighter one)."""
    return weighted_quantile(x, w, 0.5)


def weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    """The weighted q-quantile read the way weighted_median reads q = 0.5 (values at the midpoints of their weights,
    linear between neighbours, the end values beyond the first and last midpoints)."""
    order = np.argsort(x, kind="stable")
    x, w = np.asarray(x, float)[order], np.asarray(w, float)[order]
    if len(x) == 1:
        return float(x[0])
    mid = np.cumsum(w) - w / 2.0
    return float(np.interp(q * w.sum(), mid, x))
