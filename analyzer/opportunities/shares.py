"""A plan's figures as the surfaces show them: what it saves, as a share of the step, per opportunity and per tool.

Pure arithmetic on `Plan.to_json()`, in one place for the CLI's headline and the dashboard's Fusion plan page; the
plan itself (analyzer.opportunities.predict) stays the source of every time. A share of a step with no GPU busy time
is NaN (nothing to divide by), never an error.
"""

from __future__ import annotations

import math


def pct_of(part_us: float, step_us: float) -> float:
    """`part_us` as a percentage of `step_us`; NaN when the step has no time."""
    return 100 * part_us / step_us if step_us else math.nan


def plan_shares(j: dict) -> dict:
    """From a plan's JSON: the step now and predicted (µs), saved (µs) and the change (%, negative = faster); per
    opportunity id its share of the step and the kernels it replaces per step; per tool (fastest first) the busy time
    with that tool alone, what it saves and its share of the step."""
    now, pred = j["gpu_busy_us_per_step"], j["predicted_gpu_busy_us_per_step"]
    by_taker = j.get("predicted_gpu_busy_us_per_step_by_taker") or {}
    return {
        "now_us": now,
        "predicted_us": pred,
        "saved_us": now - pred,
        "change_pct": pct_of(pred - now, now),
        "opportunities": {
            o["id"]: {
                "pct_of_step": pct_of(o["predicted_saved_us_per_step"], now),
                "kernels_replaced": o["n_kernels"] * o["count_per_step"],
            }
            for o in j["opportunities"]
        },
        "takers": [
            {"tool": k, "busy_us": v, "saved_us": now - v, "pct_of_step": pct_of(now - v, now)}
            for k, v in sorted(by_taker.items(), key=lambda kv: kv[1])
        ],
        "do_first": _do_first(j, now),
    }


def _do_first(j: dict, now: float) -> dict | None:
    """The plan's first opportunity with the taker whose saving is quoted (Opportunity.lead_taker: the largest,
    measured where a FuseLens kernel was benchmarked at that problem) and the other takers' measured savings."""
    first = next((o for o in j["opportunities"] if o["id"] in j["plan"]), None)
    if first is None:
        return None
    lead = first.get("lead_taker") or {}
    saved = lead.get("saved_us_per_step", first["predicted_saved_us_per_step"])
    return {
        "pattern": first["pattern"],
        "who": lead.get("who"),
        "saved_us": saved,
        "pct_of_step": pct_of(saved, now),
        "measured": bool(lead.get("measured")),
        "others_measured_us": dict(lead.get("others_measured_us_per_step") or {}),
    }
