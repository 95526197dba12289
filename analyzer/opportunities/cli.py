"""`python -m analyzer opportunities TRACE [--json]`: what fusion would buy in this run, ranked, with arithmetic.

TraceError / DiffError propagate to analyzer.cli.main, which prints one line and exits 2.
"""

from __future__ import annotations

import sys

from analyzer.fmt import fmt_bytes, fmt_pct, fmt_us, json_text, safe_block, safe_text, short_name, text_table
from analyzer.opportunities.predict import plan_opportunities
from analyzer.opportunities.shares import plan_shares
from analyzer.pipeline import load_summary
from analyzer.runmeta import attach_manifest


def load_plan(path: str):
    """The plan of one trace file: its summary (through the cache) with the runner's manifest facts, if any."""
    summary = load_summary(path)
    attach_manifest(summary.trace, path)
    return plan_opportunities(summary)


def run(args) -> int:
    j = load_plan(args.trace).to_json()
    if args.json:
        sys.stdout.write(json_text(j) + "\n")
    else:
        sys.stdout.write(safe_block(render_text(j)) + "\n")
    return 0


def headline(j: dict) -> list[str]:
    """The plan's first lines: now, predicted, and by whom (CLI and dashboard)."""
    now, pred = j["gpu_busy_us_per_step"], j["predicted_gpu_busy_us_per_step"]
    change = plan_shares(j)["change_pct"]
    out = [
        f"GPU busy per step now {fmt_us(now)} → predicted {fmt_us(pred)} ({fmt_pct(change)}) with every opportunity "
        f"in the plan taken ({len(j['plan'])} of {len(j['opportunities'])}; an alternative to a larger one is not "
        "added)"
    ]
    by = j.get("predicted_gpu_busy_us_per_step_by_taker") or {}
    if by:
        out.append("with one tool only: " + " · ".join(f"{k} {fmt_us(v)}" for k, v in by.items()))
    out.append(f"memory-bound kernels predicted at {j['roofs']['gbps']:,.0f} GB/s: {j['roofs']['gbps_source']}")
    return out


def render_text(j: dict) -> str:
    kind = "training step" if j["training"] else "inference step"
    out = [f"FuseLens opportunities: {safe_text(j['source'])} ({j['gpu'] or 'unknown GPU'}, {kind} {j['step']})"]
    out += headline(j)
    rows = []
    for o in j["opportunities"]:
        who = ", ".join(t["who"] for t in o["takers"]) or "nobody today"
        if o["alternative_to"]:
            who += f" (alternative to #{o['alternative_to']})"
        rows.append(
            [
                str(o["id"]),
                fmt_us(o["predicted_saved_us_per_step"]),
                safe_text(o["pattern"], 44) + (f" ×{o['count_per_step']}" if o["count_per_step"] > 1 else ""),
                str(o["n_kernels"] * o["count_per_step"]),
                fmt_us(o["time_us_per_step"]),
                fmt_us(o["predicted_fused_us_per_step"]),
                fmt_bytes(o["bytes_avoided_per_step"]),
                who,
            ]
        )
    out.append("")
    if rows:
        out += text_table(
            ["#", "saves/step", "what", "kernels", "now", "fused", "bytes avoided", "who can take it"],
            rows,
            {1, 3, 4, 5, 6},
        )
    else:
        out.append(safe_text(j.get("empty_reason") or "no fusible work found between the compute kernels of this step"))
    for o in j["opportunities"]:
        out.append("")
        out.append(f"#{o['id']} {safe_text(o['pattern'])}: kernels {', '.join(_kernel_names(o))}")
        out += [f"   {safe_text(line)}" for line in o["arithmetic"]]
        out += [f"   who: {t['who']}: {t['how']}" for t in o["takers"]]
        out += [f"   note: {safe_text(n)}" for n in o["taker_notes"]]
    if j["notes"]:
        out.append("")
        out += [f"note: {safe_text(n)}" for n in j["notes"]]
    out.append("")
    out.append(f"estimates: {j['estimates']}")
    return "\n".join(out)


def _kernel_names(o: dict) -> list[str]:
    """The removed kernels by their launching op, in step order ('aten::copy_ ×2'): kernel names are too long to
    list ten of on one line; the JSON has each one."""
    out: list[list] = []
    for k in o["kernels_removed"]:
        op = short_name(k["op"] or k["name"], 40)
        if out and out[-1][0] == op:
            out[-1][1] += 1
        else:
            out.append([op, 1])
    return [op if n == 1 else f"{op} ×{n}" for op, n in out]
