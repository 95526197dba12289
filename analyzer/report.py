"""The design-review report of a Diff: one self-contained HTML file (opens offline: plotly.js inlined, no CDN, no
external request) or Markdown, with the same sections.

    report_html(diff) -> str        report_markdown(diff) -> str        fusions_csv(diff) -> str

Sections: headline per candidate (kernels 5 → 4, HBM traffic avoided per step, time saved), side by side of every
run, GPU time per category, per candidate the fusion groups (fused kernel ← replaced kernels, intermediates with
shape, dtype and size), where the kernel time went, matched GEMMs, kernel swaps and choices, unmatched kernels, what
is left (tensors still written and read back), and the facts every number rests on (GPU, PyTorch, shapes, dtypes,
which figures are estimates).

Every string that comes from a trace (kernel, op and file names, labels) is escaped for the output format: HTML
escaping in HTML (and in chart labels, which Plotly renders as HTML), backslash/entity escaping in Markdown, and a
leading quote in CSV cells that a spreadsheet would run as a formula (`analyzer.cells.spreadsheet_safe`).
"""

from __future__ import annotations

import csv
import io
import math
import time

from analyzer.cells import spreadsheet_safe
from analyzer.diff import BYTES_RULE, ESTIMATES
from analyzer.diff.headline import headline_text
from analyzer.fmt import (
    counted,
    finite,
    fmt_bytes,
    fmt_num,
    fmt_pct,
    fmt_range,
    fmt_saved,
    fmt_us,
    fmt_us_spread,
    html_text,
    safe_text,
    short_name,
)
from analyzer.runmeta import conditions_text, diff_context, workload_parts

# A report is a list of blocks rendered twice: ("h1"|"h2"|"h3"|"p"|"note"|"lead", text), ("cards", [(title, [lines])]),
# ("table", headers, rows), ("figure", fig) — HTML only, ("bars", rows) — Markdown only, ("list", [items]).


def report_html(diff) -> str:
    """The report as one self-contained HTML document (plotly.js inlined once)."""
    return _render_html(_blocks(diff, html_figures=True), _title(diff))


def report_markdown(diff) -> str:
    """The report as Markdown (tables; per-category time as text bars instead of charts)."""
    return _render_md(_blocks(diff, html_figures=False))


def fusions_csv(diff) -> str:
    """Fusion groups, swaps and kernel choices of every candidate as CSV, formula-injection safe."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [
            "candidate",
            "kind",
            "fused_kernel",
            "replaces",
            "ops",
            "count_per_step",
            "intermediates",
            "bytes_avoided_per_step",
            "predicted_dram_bytes_avoided_per_step",
            "base_time_us_per_step",
            "candidate_time_us_per_step",
            "time_saved_us_per_step",
            "bytes_basis",
        ]
    )
    for cd in diff.candidates:
        basis = (
            "bytes_avoided_per_step: LOGICAL (intermediates written and read back, every byte); "
            f"predicted_dram_bytes_avoided_per_step: replaced minus replacing kernels' {cd.base.dram_basis or 'unknown'}"
        )
        for f in cd.fusions + cd.swaps + cd.kernel_choices:
            w.writerow(
                [
                    _text_cell(cd.label),
                    _text_cell(f.kind),
                    _text_cell(f.fused_kernel),
                    _text_cell(" + ".join(counted(f.replaces))),
                    _text_cell("+".join(f.ops)),
                    f.count_per_step,
                    _text_cell("; ".join(_inter_text(i) for i in f.intermediates)),
                    _num_cell(f.bytes_avoided_per_step),
                    _num_cell(f.dram_bytes_avoided_per_step),
                    _num_cell(f.base_time_us_per_step),
                    _num_cell(f.candidate_time_us_per_step),
                    _num_cell(f.time_saved_us_per_step),
                    _text_cell(basis),
                ]
            )
    return buf.getvalue()


def _text_cell(s) -> str:
    """A text cell on one line (`fmt.safe_text`: no escape sequence, control or bidi override) that a spreadsheet
    will not evaluate."""
    return spreadsheet_safe(safe_text(s))


def _num_cell(x) -> str:
    return "" if x is None or (isinstance(x, float) and not math.isfinite(x)) else repr(float(x))


class Name(str):
    """A kernel or op name in a table cell: shown short (templates collapsed), the full name kept for the HTML
    tooltip. Both are escaped on output."""

    def __new__(cls, full: str, suffix: str = ""):
        obj = super().__new__(cls, short_name(full, 70) + suffix)
        obj.full = str(full)
        return obj


def _names(names, ops=None) -> list:
    """Kernel names with their ops, each distinct (name, op) once with ' ×k' when it repeats."""
    ops = ops or [""] * len(names)
    counts: dict = {}
    for n, o in zip(names, ops, strict=False):
        counts[(n, o)] = counts.get((n, o), 0) + 1
    return [Name(n, (f" ({o})" if o else "") + (f" ×{k}" if k > 1 else "")) for (n, o), k in counts.items()]


# --- content ------------------------------------------------------------------------------------------------------


def _title(diff) -> str:
    cands = ", ".join(c.label for c in diff.candidates)
    return f"FuseLens fusion diff: {cands} vs {diff.base.label}"


def _context_line(diff) -> str:
    ctx = diff_context(diff)
    return " · ".join(str(ctx[k]) for k in ("gpu", "workload", "shapes", "dtype") if ctx.get(k))


def _blocks(diff, html_figures: bool) -> list[tuple]:
    b: list[tuple] = [("h1", _title(diff))]
    for cd in diff.candidates:  # the one change to quote leads (analyzer.diff.headline), the rest supports it
        b.append(("lead", f"Headline: {headline_text(cd.quote(), cd.label, cd.base_label)}"))
    ctx = _context_line(diff)
    if ctx:
        b.append(("p", ctx))
    for cd in diff.candidates:
        b.append(("badge", cd.comparability.verdict if cd.comparability else "not checkable", _badge_text(cd)))
    b.append(("cards", [_card(diff, cd) for cd in diff.candidates]))
    for n in diff.notes:
        b.append(("note", n))

    b.append(("h2", "Side by side (per step, medians over steady-state steps)"))
    b.append(_side_by_side(diff))

    b.append(("h2", "GPU time per step by category"))
    if html_figures:
        from analyzer.figures.compare import category_time_figure

        b.append(("figure", category_time_figure(diff)))
    else:
        b.append(("bars", _category_bars(diff)))
    b.append(_category_table(diff))

    for cd in diff.candidates:
        b += _candidate_blocks(diff, cd, html_figures)

    b.append(("h2", "What every number rests on"))
    b.append(_facts_table(diff))
    b.append(("h3", "Bytes avoided: the rule"))
    b.append(("p", BYTES_RULE))
    b.append(("h3", "Estimates and measurements"))
    b.append(("list", list(ESTIMATES) + _measured_notes(diff)))
    run_notes = [f"{r.label}: {n}" for r in diff.runs for n in r.notes]
    if run_notes:
        b.append(("h3", "Notes"))
        b.append(("list", run_notes))
    b.append(
        (
            "p",
            f"Generated by FuseLens (python -m analyzer diff) on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        )
    )
    return b


def _card(diff, cd) -> tuple[str, list[str]]:
    b, r = cd.base, cd.run
    h = cd.headline()
    pct = h.get("raw_gpu_time_change_pct")
    sp = h.get("spread") or {}
    calls = sp.get("calls") or {}
    rb, rc = sp.get("gpu_time_us_per_step") or [None, None]
    norm = h.get("normalised_gpu_time_change_pct")
    lines = [
        f"headline: {headline_text(h['headline'], cd.label, cd.base_label)} — {h['headline']['reason']}",
        *cd.lead_lines()[1:],
        f"kernels per step: {cd.kernels_per_step[0]} → {cd.kernels_per_step[1]}",
        f"{cd.traffic_avoided()['text']}; logical: {cd.hbm_bytes_avoided_per_step:,.0f} B, estimate",
        f"GPU time per step as recorded: {fmt_us(b.gpu_time_us_per_step)}{fmt_range(rb)} → {fmt_us(r.gpu_time_us_per_step)}{fmt_range(rc)}"
        + (f": {fmt_pct(pct)} {calls.get('gpu_time') or ''}".rstrip() if pct is not None else "")
        + (
            f"; normalised {fmt_pct(norm)} {calls.get('gpu_time_normalised') or ''}".rstrip()
            if norm is not None
            else ""
        ),
        cd.step_times_text(),
        f"kernel time of the replaced vs replacing kernels: {fmt_saved(cd.time_saved_us_per_step)} per step",
    ]
    n = sum(f.count_per_step for f in cd.fusions)
    if n:
        lines.append(f"fusions: {n} per step ({len(cd.fusions)} distinct)")
    if h.get("measured_dram_bytes_saved_per_step") is not None:
        mb, mc = h["measured_dram_bytes_per_step"]
        lines.append(
            f"measured DRAM traffic (Nsight Compute, caches flushed before each kernel): {fmt_bytes(mb)} → {fmt_bytes(mc)} "
            f"({fmt_bytes(h['measured_dram_bytes_saved_per_step'])} less)"
        )
    ev = h.get("cuda_event_time_us_per_step") or [None, None]
    if ev[0] is not None and ev[1] is not None:
        eb, ec = sp.get("cuda_event_time_us_per_step") or [None, None]
        lines.append(
            f"time per step by CUDA events (runner, p10–p90): {fmt_us(ev[0])}{fmt_range(eb)} → {fmt_us(ev[1])}{fmt_range(ec)}"
            + (f": {calls['cuda_events']}" if calls.get("cuda_events") else "")
        )
    epi = [x for x in r.remaining if x["kind"] == "GEMM epilogue"]
    if epi:
        tot = sum(x["round_trip_bytes"] for x in epi if finite(x["round_trip_bytes"]))
        first = epi[0]
        lines.append(
            f"still on the table: a GEMM-epilogue fusion would avoid {fmt_bytes(tot)} per step more "
            f"(e.g. the {first['matrix']} {first['dtype']} output of {first['producer_op'] or 'a GEMM'} written and "
            "read back)"
        )
    lines += [f"warning: {n}" for n in cd.notes if "unreliable" in n]
    return (f"{cd.label} vs {cd.base_label}", lines)


def _badge_text(cd) -> str:
    why = cd.comparability.reason if cd.comparability is not None else "no control group"
    return f"GPU conditions of {cd.label} vs {cd.base_label}: {why}"


def _comparability_blocks(cd) -> list[tuple]:
    """What the conditions verdict rests on: the control probe or the same-context kernels, the factor, the spreads,
    and the identical kernels left out because their context differs."""
    c = cd.comparability
    b: list[tuple] = [("h3", "GPU conditions: the control group")]
    if c is None:
        return b + [("p", "not computed")]
    sp = c.within_run_spread_pct
    what = "the probe's time per turn" if c.source == "probe" else "their time per step"
    b.append(
        (
            "p",
            f"{c.verdict}: {c.reason}. Within-run spread of {what}: {cd.base_label} "
            f"{_pct_text(sp.get('base'))}, {cd.label} {_pct_text(sp.get('candidate'))}; tolerance "
            f"±{c.tolerance_pct:.1f}%.",
        )
    )
    if c.probe:
        pr = c.probe
        rows = [
            [
                role,
                [Name(pr["kernels"].get(role, ""))],
                f"{fmt_us(us[0])} → {fmt_us(us[1])}",
                f"{pr['ratio'][role]:.3f}",
            ]
            for role, us in pr["us_per_call"].items()
        ]
        b.append(("p", f"The runner's control probe, before each of {pr['turns']} turns (median over turns):"))
        b.append(("table", ["role", "kernel", "time per call", "ratio (median of turn pairs)"], rows))
    if c.control_kernels:
        rows = [
            [
                [Name(k["name"])],
                k["op"],
                k["shapes"],
                f"{k['grid']} / {k['block']}",
                f"{k['calls_per_step'][0]} / {k['calls_per_step'][1]}",
                f"{fmt_us(k['us_per_call'][0])} → {fmt_us(k['us_per_call'][1])}",
                f"{k['ratio']:.3f}",
                "; ".join(short_name(x, 60) for x in k.get("contexts", [])),
            ]
            for k in c.control_kernels
        ]
        more = c.n_control_kernels - len(c.control_kernels)
        b.append(
            ("p", "Kernels identical in both runs that ran in the same context (the calls the trace factor uses):")
        )
        b.append(
            (
                "table",
                ["kernel", "op", "shapes", "grid / block", "calls per step", "time per call", "ratio", "context"],
                rows,
            )
        )
        if more > 0:
            b.append(("p", f"… and {more} lighter identical kernels (the factor uses all of them)."))
    ex = c.context_excluded or {}
    if ex.get("n_calls"):
        rows = [
            [
                [Name(k["name"])],
                str(k["call"] + 1),
                f"{fmt_us(k['us_per_call'][0])} → {fmt_us(k['us_per_call'][1])}",
                f"{k['ratio']:.3f}",
                short_name(k["context"][0], 60),
                short_name(k["context"][1], 60),
            ]
            for k in ex["calls"]
        ]
        b.append(
            (
                "p",
                f"Identical kernels left out: {ex['n_calls']} call(s) that ran behind another kernel (or after an idle "
                "GPU) in each run. The same work in another context is not the same time: what ran before it "
                "changes it, so its ratio is part of what the change did, not evidence of the GPU's conditions.",
            )
        )
        b.append(
            (
                "table",
                ["kernel", "call", "time per call", "ratio", f"context in {cd.base_label}", f"context in {cd.label}"],
                rows,
            )
        )
    return b


def _pct_text(x) -> str:
    return "unknown (one step)" if x is None else f"{x:.1f}%"


def _side_by_side(diff) -> tuple:
    headers = [
        "run",
        "kernels",
        "memops",
        "launches",
        "GPU busy",
        "step span",
        "idle",
        "GPU time (sum of op durations)",
        "launch latency (median)",
        "still round-tripping",
        "measured DRAM bytes",
        "steps used",
    ]
    rows = []
    for r in diff.runs:
        rows.append(
            [
                r.label,
                str(r.kernels_per_step),
                str(r.memops_per_step),
                _n(r.launches_per_step, 0),
                fmt_us_spread(r.gpu_busy_us_per_step, r.step_range("gpu_busy_us")),
                fmt_us_spread(r.span_us_per_step, r.step_range("span_us")),
                fmt_us_spread(r.idle_us_per_step, r.step_range("idle_us")),
                fmt_us_spread(r.gpu_time_us_per_step, r.step_range("gpu_time_us")),
                fmt_us(r.launch_latency_us),
                fmt_bytes(r.remaining_bytes_per_step),
                fmt_bytes(r.measured_dram_bytes) if r.measured_dram_bytes is not None else "not measured",
                f"{len(r.steps_used)} ({', '.join(str(s) for s in r.steps_used[:6])}{'…' if len(r.steps_used) > 6 else ''})",
            ]
        )
    return ("table", headers, rows)


def _category_table(diff) -> tuple:
    cats = diff.categories()
    order = list(dict.fromkeys(cats["category"].tolist()))
    headers = ["run", *order, "idle"]
    rows = []
    for r in diff.runs:
        row = [r.label]
        for c in order:
            v = r.by_category.get(c)
            row.append(f"{fmt_us(v['time_us'])} ({fmt_num(v['count'], ',.0f', missing='unknown')})" if v else "—")
        row.append(fmt_us(r.idle_us_per_step))
        rows.append(row)
    return ("table", headers, rows)


def _category_bars(diff) -> list[tuple[str, str, str]]:
    """(run, bar, total) rows: one text bar per run, one letter per category, 40 characters = the longest run."""
    cats = diff.categories()
    order = list(dict.fromkeys(cats["category"].tolist()))
    letters = {c: (c[0].upper() if c != "memset" else "S") for c in order}
    totals = [r.gpu_time_us_per_step for r in diff.runs]
    top = max([t for t in totals if finite(t)] or [1.0]) or 1.0
    rows = []
    for r in diff.runs:
        bar = ""
        for c in order:
            v = r.by_category.get(c)
            if v and finite(v["time_us"]):
                bar += letters[c] * int(round(40 * v["time_us"] / top))
        rows.append((r.label, bar, fmt_us(r.gpu_time_us_per_step)))
    legend = ", ".join(f"{letters[c]} = {c}" for c in order)
    rows.append(("", legend, ""))
    return rows


def _inter_text(i: dict) -> str:
    shape = "×".join(str(s) for s in i["shape"])
    return f"[{shape}] {i['dtype']} = {i['bytes']:,.0f} B, written once, read {i['reads']}×"


def _accounting_blocks(cd) -> list[tuple]:
    """Where the baseline's time went (every kernel in one bucket), a training step's phases, and the fusion groups
    by pattern when there are many (a whole model): the same figures as the CLI and Compare."""
    acct = cd.accounting
    if acct is None:
        return []
    b: list[tuple] = [("h3", f"Where {cd.base_label}'s GPU time went"), ("p", acct.text())]
    total = sum(acct.base_time_us.values()) or 1.0
    b.append(
        (
            "table",
            ["baseline kernels", "per step", "GPU time / step", "share"],
            [
                [k, str(acct.base_count[k]), fmt_us(acct.base_time_us[k]), f"{acct.base_time_us[k] / total:.1%}"]
                for k in ("matched", "fused", "replaced", "removed", "unexplained")
            ],
        )
    )
    if acct.unexplained:
        b.append(
            (
                "table",
                ["unexplained kernel", "op", "shapes", "per step", "time / step"],
                [
                    [[Name(k["name"])], k["op"], k["shapes"], str(k["count_per_step"]), fmt_us(k["time_us_per_step"])]
                    for k in acct.unexplained
                ],
            )
        )
    if cd.phases:
        b.append(
            (
                "table",
                ["phase", cd.base_label, cd.label, "saved", "saved by fusion groups"],
                [
                    [
                        p,
                        fmt_us(v["base_us"]),
                        fmt_us(v["candidate_us"]),
                        fmt_us(v["saved_us"]),
                        fmt_us(v["fusions_saved_us"]),
                    ]
                    for p, v in cd.phases.items()
                ],
            )
        )
    patterns = cd.pattern_summary()
    if len(cd.fusions) > 4:
        b.append(
            (
                "table",
                ["fusion groups by what they compute", "phase", "groups / step", "HBM bytes avoided / step", "saved / step"],
                [
                    [p["pattern"], p["phase"], str(p["groups_per_step"]), fmt_bytes(p["bytes_avoided_per_step"]),
                     fmt_us(p["time_saved_us_per_step"])]
                    for p in patterns
                ],
            )
        )  # fmt: skip
    return b


def _candidate_blocks(diff, cd, html_figures: bool) -> list[tuple]:
    b: list[tuple] = [("h2", f"{cd.label} vs {cd.base_label}")]
    b += _comparability_blocks(cd)
    b += _accounting_blocks(cd)
    b.append(("h3", "Fusion groups"))
    if cd.fusions:
        rows = []
        for f in sorted(
            cd.fusions, key=lambda f: -(f.time_saved_us_per_step if finite(f.time_saved_us_per_step) else 0)
        ):
            what = [f.pattern] if f.pattern else []
            rows.append(
                [
                    what + [Name(f.fused_kernel, f" ({f.count_per_step} per step)" if f.count_per_step > 1 else "")],
                    _names(f.replaces, f.replaced_ops)
                    + (
                        [f"(also gone: {', '.join(short_name(x, 40) for x in f.also_removed)})"]
                        if f.also_removed
                        else []
                    ),
                    "+".join(f.ops),
                    "\n".join(_inter_text(i) for i in f.intermediates) or "none",
                    f"{fmt_bytes(f.bytes_avoided_per_step)}"
                    + ("" if f.bytes_complete else " (at least)")
                    + (f"\n{f.bytes_note}" if f.bytes_note else ""),
                    f"{fmt_us(f.base_time_us_per_step)} → {fmt_us(f.candidate_time_us_per_step)} "
                    f"({fmt_saved(f.time_saved_us_per_step)})",
                    f"{fmt_num(f.base_gbps, ',.0f', missing='unknown')} → {fmt_num(f.candidate_gbps, ',.0f', missing='unknown')}",
                    "\n".join(f.evidence),
                ]
            )
        b.append(
            (
                "table",
                [
                    "fused kernel",
                    "replaces (baseline kernels)",
                    "ops",
                    "intermediates never materialized",
                    "HBM bytes avoided / step",
                    "kernel time / step",
                    "achieved GB/s (est.)",
                    "evidence",
                ],
                rows,
            )
        )
    else:
        b.append(("p", f"No fusion: {cd.label} replaces no group of baseline kernels by one kernel."))
    if html_figures and (cd.fusions or cd.swaps):
        from analyzer.figures.compare import fusion_groups_figure

        b.append(("figure", fusion_groups_figure(diff, cd.label)))

    if cd.swaps or cd.kernel_choices:
        b.append(("h3", "Kernel swaps and kernel choices (no bytes avoided by the rule)"))
        rows = [
            [
                f.kind,
                _names(f.fused_kernel.split(" + ")),
                _names(f.replaces, f.replaced_ops),
                "+".join(f.ops),
                f"{fmt_us(f.base_time_us_per_step)} → {fmt_us(f.candidate_time_us_per_step)}",
                str(f.count_per_step),
            ]
            for f in cd.swaps + cd.kernel_choices
        ]
        b.append(("table", ["kind", "candidate kernel", "baseline kernel(s)", "ops", "time / step", "per step"], rows))

    b.append(("h3", "Where the kernel time went"))
    if html_figures:
        from analyzer.figures.compare import time_breakdown_figure

        b.append(("figure", time_breakdown_figure(diff, cd.label)))
    tb = cd.time_breakdown
    b.append(
        (
            "table",
            ["term", "µs per step (positive = saved)"],
            [
                ["baseline kernel time", _n(tb["base_kernel_time_us"], 1)],
                ["fusion groups and swaps", _n(tb["saved_by_fusion_groups_us"], 1)],
                ["kernel choices", _n(tb["saved_by_kernel_choices_us"], 1)],
                ["matched GEMMs", _n(tb["saved_on_matched_gemms_us"], 1)],
                ["other matched kernels", _n(tb["saved_on_other_matched_us"], 1)],
                ["removed kernels", _n(tb["removed_kernels_us"], 1)],
                ["added kernels", _n(tb["added_kernels_us"], 1)],
                ["candidate kernel time", _n(tb["candidate_kernel_time_us"], 1)],
            ],
        )
    )

    b.append(("h3", "Matched GEMMs (by M, N, K, dtype)"))
    if cd.matched_gemms:
        rows = [
            [
                g["problem"],
                str(g["count_per_step"]),
                _names([g["base_kernel"]], [g["base_op"]]),
                _names([g["candidate_kernel"]], [g["candidate_op"]]),
                f"{fmt_us(g['base_time_us_per_step'])} → {fmt_us(g['candidate_time_us_per_step'])}",
                f"{fmt_num(g['base_tflops'], ',.1f', missing='unknown')} → {fmt_num(g['candidate_tflops'], ',.1f', missing='unknown')}",
            ]
            for g in cd.matched_gemms
        ]
        b.append(
            ("table", ["problem", "per step", "baseline kernel", "candidate kernel", "time / step", "TFLOP/s"], rows)
        )
    else:
        b.append(("p", "No GEMM with the same M, N, K and dtype on both sides."))

    b.append(("h3", "Unmatched kernels"))
    if cd.unmatched_base or cd.unmatched_candidate:
        rows = [
            [side, [Name(k["name"])], k["op"], k["shapes"], str(k["count_per_step"]), fmt_us(k["time_us_per_step"])]
            for side, ks in (("baseline only", cd.unmatched_base), ("candidate only", cd.unmatched_candidate))
            for k in ks
        ]
        b.append(("table", ["side", "kernel", "op", "shapes", "per step", "time / step"], rows))
    else:
        b.append(("p", "None: every kernel on both sides is matched or in a group above."))

    b.append(("h3", f"What is left: tensors {cd.label} still writes to HBM and reads straight back"))
    if cd.run.remaining_unknown:
        b.append(("p", f"Unknown: {cd.run.remaining_unknown}."))
    elif cd.run.remaining:
        rows = [
            [
                x["kind"],
                _names([x["producer"]], [x["producer_op"]]),
                _names(x["readers"]),
                f"[{'×'.join(str(s) for s in x['shape'])}] {x['dtype']}",
                f"{fmt_bytes(x['round_trip_bytes'])}"
                + (f" ({x['count_per_step']} per step)" if x.get("count_per_step", 1) > 1 else ""),
                x["would_avoid"],
            ]
            for x in cd.run.remaining[:40]
        ]
        b.append(
            (
                "table",
                ["kind", "written by", "read back by", "tensor", "round trip / step (est.)", "what would avoid it"],
                rows,
            )
        )
        if len(cd.run.remaining) > 40:
            b.append(("p", f"… and {len(cd.run.remaining) - 40} more (python -m analyzer diff --json lists all)."))
    else:
        b.append(("p", "Nothing found: no GEMM or pointwise output is read straight back by a pointwise kernel."))
    for n in cd.notes:
        b.append(("note", n))
    return b


def _facts_table(diff) -> tuple:
    keys = [
        ("source", "trace file"),
        ("gpu", "GPU"),
        ("torch", "PyTorch"),
        ("cuda", "CUDA"),
        ("triton", "Triton"),
        ("liger_kernel", "Liger-Kernel"),
        ("driver", "driver"),
        ("git_commit", "git commit"),
        ("workload", "workload"),
        ("shapes", "shapes"),
        ("dtype", "dtype"),
        ("train", "training step"),
        ("timing", "CUDA-event timing"),
        ("conditions", "GPU conditions while profiled (runner)"),
        ("top_gemm", "main GEMM (from the trace)"),
        ("steps", "steps used"),
    ]
    rows = []
    for key, label in keys:
        vals = []
        for r in diff.runs:
            if key == "source":
                v = r.source
            elif key == "top_gemm":
                v = r.top_gemm
            elif key == "steps":
                v = f"{len(r.steps_used)}; kernel list shown from step {r.step_shown}"
            elif key == "shapes":
                s = r.facts.get("shapes")
                v = ", ".join(f"{k}={x}" for k, x in s.items()) if isinstance(s, dict) else None
            elif key == "workload":
                v = workload_parts(r.facts)["workload"]
            elif key == "conditions":
                v = conditions_text(r.facts.get("conditions"))
            else:
                v = r.facts.get(key)
            vals.append("unknown" if v is None or v == "" else str(v))
        if key in (
            "torch",
            "cuda",
            "triton",
            "liger_kernel",
            "driver",
            "git_commit",
            "timing",
            "train",
            "conditions",
        ) and all(v == "unknown" for v in vals):
            continue
        rows.append([label, *vals])
    return ("table", ["fact", *[r.label for r in diff.runs]], rows)


def _measured_notes(diff) -> list[str]:
    if any(r.measured_dram_bytes is not None for r in diff.runs):
        return [
            "Measured DRAM bytes come from Nsight Compute (one step, every kernel, L2 caching included): they are lower "
            "than the estimates when tensors hit in L2 (50 MB on an H100), so the measured saving is usually below "
            "the estimated bytes avoided."
        ]
    return ["No hardware counters were recorded for these runs: every byte figure is an estimate."]


def _n(x, digits: int) -> str:
    return fmt_num(x, f",.{digits}f", missing="unknown")


# --- HTML ---------------------------------------------------------------------------------------------------------

_CSS = """
body{font-family:Inter,Helvetica Neue,Helvetica,Arial,sans-serif;color:#1F2933;margin:2rem auto;max-width:1400px;
padding:0 1.5rem;line-height:1.45}
h1{font-size:1.7rem;margin-bottom:.2rem}h2{margin-top:2.4rem;border-bottom:2px solid #E4E7EB;padding-bottom:.3rem}
h3{margin-top:1.6rem;color:#323F4B}p.ctx{color:#52606D;margin-top:0}
.cards{display:flex;flex-wrap:wrap;gap:1rem;margin:1.2rem 0}
.card{border:1px solid #CBD2D9;border-left:6px solid #0072B2;border-radius:6px;padding:.8rem 1.1rem;min-width:320px;
flex:1;background:#F5F7FA}.card h3{margin:.1rem 0 .5rem 0}.card li{margin:.15rem 0}
table{border-collapse:collapse;margin:.6rem 0 1rem 0;font-size:.88rem;width:100%}
th,td{border:1px solid #E4E7EB;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#F5F7FA}td{word-break:break-word;max-width:520px}
.note{background:#FFF8E1;border-left:4px solid #E69F00;padding:.4rem .8rem;margin:.5rem 0}
.fig{margin:.5rem 0 1rem 0}
.lead{font-size:1.15rem;margin:.3rem 0}
.badge{padding:.45rem .9rem;margin:.4rem 0;border-radius:6px;font-weight:600;border:1px solid}
.badge.ok{background:#E3F9E5;border-color:#2F8132;color:#0E5814}
.badge.bad{background:#FFE3E3;border-color:#CF1124;color:#8A041A}
.badge.unk{background:#F5F7FA;border-color:#9AA5B1;color:#323F4B}
"""


def _cell_html(c) -> str:
    """A cell: text (newlines become <br>), a Name (short, full name as tooltip) or a list of those."""
    if isinstance(c, list):
        return "<br>".join(_cell_html(x) for x in c)
    if isinstance(c, Name):
        return f'<span title="{html_text(c.full, quote=True)}">{html_text(c, quote=True)}</span>'
    return "<br>".join(html_text(x, quote=True) for x in str(c).split("\n"))


def _render_html(blocks: list[tuple], title: str) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(title, quote=True)}</title><style>{_CSS}</style></head><body>",
    ]
    plotly_js_done = False
    first_p = True
    for blk in blocks:
        kind = blk[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{html_text(blk[1], quote=True)}</{kind}>")
        elif kind == "lead":
            out.append(f'<p class="lead"><strong>{html_text(blk[1], quote=True)}</strong></p>')
        elif kind == "p":
            cls = ' class="ctx"' if first_p else ""
            first_p = False
            out.append(f"<p{cls}>{_cell_html(blk[1])}</p>")
        elif kind == "note":
            out.append(f'<div class="note">{_cell_html(blk[1])}</div>')
        elif kind == "badge":
            cls = {"comparable": "ok", "skewed": "bad"}.get(blk[1], "unk")
            out.append(
                f'<div class="badge {cls}"><b>{html_text(blk[1].upper(), quote=True)}</b> {html_text(blk[2], quote=True)}</div>'
            )
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{_cell_html(x)}</li>" for x in blk[1]) + "</ul>")
        elif kind == "cards":
            out.append('<div class="cards">')
            for t, lines in blk[1]:
                out.append(f'<div class="card"><h3>{html_text(t, quote=True)}</h3><ul>')
                out.append("".join(f"<li>{html_text(x, quote=True)}</li>" for x in lines))
                out.append("</ul></div>")
            out.append("</div>")
        elif kind == "table":
            _, headers, rows = blk
            out.append(
                "<table><thead><tr>"
                + "".join(f"<th>{html_text(h, quote=True)}</th>" for h in headers)
                + "</tr></thead><tbody>"
            )
            for row in rows:
                out.append("<tr>" + "".join(f"<td>{_cell_html(c)}</td>" for c in row) + "</tr>")
            out.append("</tbody></table>")
        elif kind == "figure":
            from analyzer.figures.theme import fit_layout

            fig = fit_layout(blk[1])  # the legend below the x-axis title, not on it (as in the app)
            # plotly.js (~4.6 MB) inlined once, so the file opens offline; later figures reuse it
            div = fig.to_html(
                full_html=False,
                include_plotlyjs=not plotly_js_done,
                config={"displaylogo": False, "responsive": True},
            )
            plotly_js_done = True
            out.append(f'<div class="fig">{div}</div>')
        # 'bars' is Markdown-only: the HTML has the chart
    out.append("</body></html>")
    return "\n".join(out)


# --- Markdown -----------------------------------------------------------------------------------------------------

_MD_SPECIAL = set("\\`*_{}[]#!|~")


def md_escape(s) -> str:
    """Text that renders as itself in Markdown (CommonMark/GFM): HTML inert (&lt; &gt; &amp;), emphasis, code, link,
    table and heading characters backslash-escaped, on one line with no escape sequence, control or bidi override
    (`fmt.safe_text`)."""
    s = safe_text(s)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in s)


def _md_cell(c) -> str:
    if isinstance(c, list):
        return "<br>".join(_md_cell(x) for x in c)
    return "<br>".join(md_escape(x) for x in str(c).split("\n"))


def _render_md(blocks: list[tuple]) -> str:
    out: list[str] = []
    for blk in blocks:
        kind = blk[0]
        if kind == "h1":
            out += [f"# {md_escape(blk[1])}", ""]
        elif kind == "h2":
            out += [f"## {md_escape(blk[1])}", ""]
        elif kind == "h3":
            out += [f"### {md_escape(blk[1])}", ""]
        elif kind == "lead":
            out += [f"**{md_escape(blk[1])}**", ""]
        elif kind == "p":
            out += [md_escape(blk[1]), ""]
        elif kind == "note":
            out += [f"> **Note:** {md_escape(blk[1])}", ""]
        elif kind == "badge":
            out += [f"> **{md_escape(blk[1].upper())}** {md_escape(blk[2])}", ""]
        elif kind == "list":
            out += [f"- {md_escape(x)}" for x in blk[1]] + [""]
        elif kind == "cards":
            for t, lines in blk[1]:
                out += [f"### {md_escape(t)}", ""] + [f"- {md_escape(x)}" for x in lines] + [""]
        elif kind == "table":
            _, headers, rows = blk
            out.append("| " + " | ".join(md_escape(h) for h in headers) + " |")
            out.append("|" + "---|" * len(headers))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("")
        elif kind == "bars":
            out.append("```text")
            width = max((len(safe_text(r[0])) for r in blk[1]), default=0)
            for run, bar, total in blk[1]:
                # nothing renders in a code block, but a label could hold ``` and close it; no raw < > either
                safe = safe_text(run).replace("`", "'").replace("<", "‹").replace(">", "›")
                line = f"{safe:<{width}}  {bar}  {total}".rstrip()
                out.append(line)
            out += ["```", ""]
    return "\n".join(out).rstrip() + "\n"
