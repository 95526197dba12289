"""`python -m analyzer summary TRACE [--json]`: an aligned text table by default, one JSON object with --json.

TraceError propagates to analyzer.cli.main, which prints one line and exits 2.

Both outputs are made from Summary.to_json() alone, so a trace already in the columnar cache is answered from its
summary entry's header (analyzer.pipeline.summary_json) without importing numpy's tables, pandas or the
analysis modules: 0.2 s for a 1 GiB trace in a fresh process on an idle box, against 1.25 s through the tables.
"""

from __future__ import annotations

import sys

from analyzer.fmt import (
    MISSING,
    fmt_bytes,
    fmt_num,
    fmt_us,
    fmt_us_spread,
    json_text,
    safe_block,
    safe_text,
    short_name,
    text_table,
)

TOP_KERNELS = 15


def run(args) -> int:
    from analyzer.pipeline import load_summary, summary_json

    j = summary_json(args.trace)
    if j is None:  # not cached yet (or the cache is off): read, analyse, summarise, and store for next time
        j = load_summary(args.trace).to_json()
    if args.json:
        sys.stdout.write(json_text(j) + "\n")
    else:
        sys.stdout.write(safe_block(render_text(j)) + "\n")
    return 0


def render_text(j: dict) -> str:
    """The text table of one Summary.to_json()."""
    p = j["per_step"]
    out = [f"FuseLens summary: {safe_text(j['source'])}"]
    gpu = j["gpu"] or "unknown GPU"
    if j["gpu_peaks"]:
        pk = j["gpu_peaks"]
        bf16 = pk["tflops"].get("bf16")
        peak = f"{pk['hbm_gbps']:,.0f} GB/s" + (f", {bf16:,.0f} bf16 TFLOP/s dense" if bf16 else "")
        out.append(f"GPU: {gpu}  (peaks of {pk['matched']}: {peak}; {pk['source']})")
    else:
        out.append(f"GPU: {gpu}  (no peak table entry: % of peak not shown)")
    sp = p.get("spread") or {}
    if not j["steps_used"]:  # nothing to take medians over: say so once instead of "None kernels … steps []"
        out.append(f"Steps: {j['steps']} in trace; none holds a GPU op: no per-step figures (see the warnings below)")
        out.append("")
    else:
        out.append(f"Steps: {j['steps']} in trace; medians over steps {j['steps_used']} ({j['step_policy']})")
        out.append("")
        out += _per_step_lines(p, sp)
    return "\n".join(out + _tables(j, p))


def _per_step_lines(p: dict, sp: dict) -> list[str]:
    out = [f"Per step (median over steady steps, spread {p.get('spread_rule', 'min–max')}):"]
    out.append(
        f"  GPU busy {fmt_us_spread(p['gpu_busy_us'], sp.get('gpu_busy_us'))} · step span "
        f"{fmt_us_spread(p['span_us'], sp.get('span_us'))} · idle {fmt_us_spread(p['idle_us'], sp.get('idle_us'))} · "
        f"GPU time (sum of op durations) {fmt_us_spread(p['gpu_time_us'], sp.get('gpu_time_us'))}"
    )
    out.append(
        f"  {fmt_num(p['kernels'], 'g')} kernels, {fmt_num(p['memops'], 'g')} memcpy/memset, "
        f"{fmt_num(p['launches'], 'g')} launches · launch→start "
        f"{fmt_us(p['launch_latency_us'])} · HBM bytes (est.) {fmt_bytes(p['bytes'], MISSING)}"
    )
    return out


def _tables(j: dict, p: dict) -> list[str]:
    out = []
    rows = [
        [
            str(r["step"]) + ("" if r["steady"] else " (warm-up)" if i == 0 else " (not used)"),
            fmt_num(r["kernels"], "d"),
            fmt_num(r["memops"], "d"),
            fmt_num(r["gpu_busy_us"]),
            fmt_num(r["span_us"]),
            fmt_num(r["idle_us"]),
            fmt_num(r["gpu_time_us"]),
        ]
        for i, r in enumerate(j["step_table"])
    ]
    out.append("  Every step:")
    headers = ["step", "kernels", "memops", "busy µs", "span µs", "idle µs", "GPU time µs"]
    out += ["    " + x for x in text_table(headers, rows, {1, 2, 3, 4, 5, 6})]
    out.append("")
    total = p["gpu_time_us"] or 0.0
    rows = [
        [
            cat,
            fmt_num(v["count"], "g"),
            fmt_num(v["time_us"]),
            fmt_num(100.0 * v["time_us"] / total if total and v["time_us"] is not None else None, ".0f", "%"),
            fmt_bytes(v["bytes"], MISSING),
        ]
        for cat, v in sorted(p["by_category"].items(), key=lambda kv: -(kv[1]["time_us"] or 0.0))
    ]
    out += ["  " + x for x in text_table(["category", "count", "time µs", "share", "bytes (est.)"], rows, {1, 2, 3, 4})]
    out.append("")
    out.append(f"Top kernels by time per step ({min(TOP_KERNELS, len(j['kernels']))} of {len(j['kernels'])}):")
    rows = [
        [
            fmt_num(k["time_us_per_step"]),
            fmt_num(k["count_per_step"], "g"),
            fmt_num(k["dur_us_median"]),
            k["category"],
            "+".join(k["ops"]) or MISSING,
            fmt_bytes(k["bytes_per_call"], MISSING),
            fmt_num(k["achieved_gbps"], ",.0f") + ("!" if k.get("flags") else ""),
            fmt_num(k["pct_peak_bw"], ".0f", "%"),
            fmt_num(k["achieved_tflops"], ",.1f"),
            fmt_num(k["pct_peak_flops"], ".0f", "%"),
            short_name(k["name"], 70),
        ]
        for k in j["kernels"][:TOP_KERNELS]
    ]
    headers = [
        "µs/step",
        "calls",
        "µs/call",
        "category",
        "ops",
        "bytes/call",
        "GB/s",
        "%BW",
        "TFLOP/s",
        "%peak",
        "kernel",
    ]
    out += ["  " + x for x in text_table(headers, rows, {0, 1, 2, 5, 6, 7, 8, 9})]
    if any(k.get("flags") for k in j["kernels"][:TOP_KERNELS]):
        out.append(
            "  ! above the GPU's HBM peak: part of its traffic was likely served by L2 (--json: each kernel's flags)"
        )
    out.append("")
    out.append(f"Note: {j['estimates']} ('—' in this table); --json prints each kernel's cost_basis.")
    for w in j["warnings"]:
        out.append(f"warning: {safe_text(w)}")
    return out
