"""Cross-rank spread from the compact per-rank results (pure: dicts in, dicts out; no trace is needed here).

Two "slowest" ranks, because in a synchronous job they differ: every rank's step ends at the same collective, so
the straggler is the rank with the most compute; the others show the wait as longer NCCL kernels. Ranking by total
GPU time (compute + communication) therefore often names a *waiting* rank; `straggler_rank` (most compute) is the
one to look at, `slowest_rank` (most GPU time, the simpler definition) is kept beside it.
"""

from __future__ import annotations

import numpy as np

SPLIT_KEYS = ("gpu_time_us", "compute_us", "communication_us", "exposed_communication_us", "memory_us", "idle_us")


def stats(values: dict[int, float | None]) -> dict | None:
    """min / median / max over ranks, which rank holds each extreme (lowest rank on ties), and the ratios."""
    vals = {r: float(v) for r, v in values.items() if v is not None and np.isfinite(v)}
    if not vals:
        return None
    ranks = sorted(vals)
    arr = np.array([vals[r] for r in ranks])
    lo, hi = int(np.argmin(arr)), int(np.argmax(arr))  # argmin/argmax return the first: the lowest rank on ties
    med = float(np.median(arr))
    return {
        "min": float(arr[lo]),
        "min_rank": ranks[lo],
        "median": med,
        "max": float(arr[hi]),
        "max_rank": ranks[hi],
        "max_over_median": _ratio(arr[hi], med),
        "max_over_min": _ratio(arr[hi], arr[lo]),
    }


def _ratio(a: float, b: float) -> float | None:
    return float(a / b) if b > 0 else None


def gpu_time(entry: dict) -> float | None:
    v = (entry.get("per_step") or {}).get("gpu_time_us")
    return v if v is not None else (entry.get("split_us") or {}).get("gpu_time_us")


def category_times(entry: dict) -> dict[str, float]:
    by = (entry.get("per_step") or {}).get("by_category") or {}
    return {c: float(v.get("time_us") or 0.0) for c, v in by.items() if isinstance(v, dict)}


def spread(entries: list[dict]) -> dict:
    """entries: the set's analysed ranks, each {'rank': int, 'per_step': …, 'split_us': …, 'series': …}."""
    if not entries:
        return {}
    out: dict = {"ranks": len(entries)}
    gt = stats({e["rank"]: gpu_time(e) for e in entries})
    out["gpu_time_us"] = gt
    if gt:
        out["slowest_rank"] = {"rank": gt["max_rank"], "gpu_time_us": gt["max"], "over_median": gt["max_over_median"]}
    split = {k: stats({e["rank"]: (e.get("split_us") or {}).get(k) for e in entries}) for k in SPLIT_KEYS}
    out["split_us"] = split
    if split["compute_us"]:
        c = split["compute_us"]
        out["straggler_rank"] = {"rank": c["max_rank"], "compute_us": c["max"], "over_median": c["max_over_median"]}
    cats = sorted({c for e in entries for c in category_times(e)})
    # A category absent on a rank took 0 µs there: that is a real skew (e.g. only rank 0 copies a checkpoint).
    out["by_category"] = {c: stats({e["rank"]: category_times(e).get(c, 0.0) for e in entries}) for c in cats}
    out["per_step"] = step_spread(entries)
    return out


def step_spread(entries: list[dict]) -> list[dict]:
    """For each steady-state step every rank has: which rank had the most GPU time and compute, and the range."""
    per_rank = {e["rank"]: {row["step"]: row for row in e.get("series") or []} for e in entries}
    common = set.intersection(*(set(s) for s in per_rank.values())) if per_rank else set()
    rows = []
    for step in sorted(common):
        g = stats({r: s[step]["gpu_time_us"] for r, s in per_rank.items()})
        c = stats({r: s[step]["compute_us"] for r, s in per_rank.items()})
        rows.append(
            {
                "step": step,
                "slowest_rank": g["max_rank"] if g else None,
                "gpu_time_us_min": g["min"] if g else None,
                "gpu_time_us_max": g["max"] if g else None,
                "straggler_rank": c["max_rank"] if c else None,
                "compute_us_max_over_median": c["max_over_median"] if c else None,
            }
        )
    return rows


def compare(sets: list[dict], labels: list[str]) -> dict:
    """Per rank present in every set: median step GPU time in each set and each candidate's change vs the base."""
    by_rank = [{e["rank"]: e for e in s} for s in sets]
    common = sorted(set.intersection(*(set(b) for b in by_rank)))
    rows = []
    deltas: list[dict[int, float | None]] = [{} for _ in labels[1:]]
    for r in common:
        times = [gpu_time(b[r]) for b in by_rank]
        row = {"rank": r, "gpu_time_us": dict(zip(labels, times, strict=True))}
        changes = {}
        for j, label in enumerate(labels[1:], start=1):
            base, cand = times[0], times[j]
            d = None if base is None or cand is None else cand - base
            deltas[j - 1][r] = d
            cats = sorted(set(category_times(by_rank[0][r])) | set(category_times(by_rank[j][r])))
            changes[label] = {
                "delta_us": d,
                "delta_pct": None if d is None or not base else 100.0 * d / base,
                "by_category_delta_us": {
                    c: category_times(by_rank[j][r]).get(c, 0.0) - category_times(by_rank[0][r]).get(c, 0.0)
                    for c in cats
                },
            }
        row["vs_base"] = changes
        rows.append(row)
    missing = {labels[j]: sorted(set(by_rank[0]) ^ set(by_rank[j])) for j in range(1, len(labels))}
    return {
        "labels": labels,
        "ranks": rows,
        "delta_us_spread": {labels[j + 1]: stats(deltas[j]) for j in range(len(labels) - 1)},
        "unpaired_ranks": {k: v for k, v in missing.items() if v},
    }
