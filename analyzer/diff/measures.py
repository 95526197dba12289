"""Arithmetic on the diff's measured figures, NaN- and None-aware: [low, high] ranges over the steady steps, the
faster / slower / tie call they support, change percentages, differences and GB/s.

The bottom of the diff's result layer: the model (analyzer.diff.model) and both outputs (output_text, output_json)
read these; nothing here knows a diff object.
"""

from __future__ import annotations

import math

from analyzer.diff.comparability import spread_range
from analyzer.fmt import finite

# A difference below 0.5% of the baseline's kernel time per step is a tie whatever the step ranges say: two runs'
# steady steps can each be tight (0.05% on the H100) yet differ by a memset's worth of time, which is no finding.
RESOLUTION = 0.005


def gbps(nbytes: float, us: float) -> float:
    if not finite(nbytes) or not finite(us) or us <= 0:
        return math.nan
    return nbytes / (us * 1e3)  # bytes per µs / 1e3 = 1e9 bytes per second


def range_or_none(values) -> list[float] | None:
    """[low, high] of per-step values (comparability.spread_range), or None when there are none or it is unknown."""
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
