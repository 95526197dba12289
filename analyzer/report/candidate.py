"""The report's blocks of one candidate: its card, the GPU-conditions control group, where the baseline's time went,
fusion groups, swaps and choices, the time breakdown, matched GEMMs, unmatched kernels and what is left."""

from __future__ import annotations

from analyzer.diff.headline import headline_text
from analyzer.figures.compare import fusion_groups_figure, time_breakdown_figure
from analyzer.fmt import finite, fmt_bytes, fmt_num, fmt_pct, fmt_saved, fmt_us, fmt_us_spread, short_name
from analyzer.report.text import Name, inter_text, names, num_text, pct_text


def card(diff, cd) -> tuple[str, list[str]]:
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
        f"GPU time per step as recorded: {fmt_us_spread(b.gpu_time_us_per_step, rb)} → {fmt_us_spread(r.gpu_time_us_per_step, rc)}"
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
            f"time per step by CUDA events (runner, p10–p90): {fmt_us_spread(ev[0], eb)} → {fmt_us_spread(ev[1], ec)}"
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


def badge_text(cd) -> str:
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
            f"{pct_text(sp.get('base'))}, {cd.label} {pct_text(sp.get('candidate'))}; tolerance "
            f"±{c.tolerance_pct:.1f}%.",
        )
    )
    b += _probe_blocks(c)
    b += _control_kernel_blocks(c)
    b += _excluded_blocks(cd, c)
    return b


def _probe_blocks(c) -> list[tuple]:
    """The runner's control probe: each role's kernel and its time per call in both runs."""
    if not c.probe:
        return []
    b: list[tuple] = []
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
    return b


def _control_kernel_blocks(c) -> list[tuple]:
    """The kernels identical in both runs and in the same context: the calls the trace factor uses."""
    if not c.control_kernels:
        return []
    b: list[tuple] = []
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
    b.append(("p", "Kernels identical in both runs that ran in the same context (the calls the trace factor uses):"))
    b.append(
        (
            "table",
            ["kernel", "op", "shapes", "grid / block", "calls per step", "time per call", "ratio", "context"],
            rows,
        )
    )
    if more > 0:
        b.append(("p", f"… and {more} lighter identical kernels (the factor uses all of them)."))
    return b


def _excluded_blocks(cd, c) -> list[tuple]:
    """The identical kernels left out because what ran before them differs between the runs."""
    ex = c.context_excluded or {}
    if not ex.get("n_calls"):
        return []
    b: list[tuple] = []
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


def candidate_blocks(diff, cd, html_figures: bool) -> list[tuple]:
    """Every block of one candidate, in the report's order."""
    b: list[tuple] = [("h2", f"{cd.label} vs {cd.base_label}")]
    b += _comparability_blocks(cd)
    b += _accounting_blocks(cd)
    b += _fusion_blocks(diff, cd, html_figures)
    b += _swap_blocks(cd)
    b += _time_breakdown_blocks(diff, cd, html_figures)
    b += _matched_gemm_blocks(cd)
    b += _unmatched_blocks(cd)
    b += _remaining_blocks(cd)
    for n in cd.notes:
        b.append(("note", n))
    return b


def _fusion_row(f) -> list:
    """One fusion group as a table row: fused kernel, what it replaced, ops, intermediates, bytes, time, GB/s."""
    what = [f.pattern] if f.pattern else []
    return [
        what + [Name(f.fused_kernel, f" ({f.count_per_step} per step)" if f.count_per_step > 1 else "")],
        names(f.replaces, f.replaced_ops)
        + ([f"(also gone: {', '.join(short_name(x, 40) for x in f.also_removed)})"] if f.also_removed else []),
        "+".join(f.ops),
        "\n".join(inter_text(i) for i in f.intermediates) or "none",
        f"{fmt_bytes(f.bytes_avoided_per_step)}"
        + ("" if f.bytes_complete else " (at least)")
        + (f"\n{f.bytes_note}" if f.bytes_note else ""),
        f"{fmt_us(f.base_time_us_per_step)} → {fmt_us(f.candidate_time_us_per_step)} "
        f"({fmt_saved(f.time_saved_us_per_step)})",
        f"{fmt_num(f.base_gbps, ',.0f', missing='unknown')} → {fmt_num(f.candidate_gbps, ',.0f', missing='unknown')}",
        "\n".join(f.evidence),
    ]


def _fusion_blocks(diff, cd, html_figures: bool) -> list[tuple]:
    """The fusion groups, most time saved first, and (HTML) their chart."""
    b: list[tuple] = [("h3", "Fusion groups")]
    if cd.fusions:
        ranked = sorted(
            cd.fusions, key=lambda f: -(f.time_saved_us_per_step if finite(f.time_saved_us_per_step) else 0)
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
                [_fusion_row(f) for f in ranked],
            )
        )
    else:
        b.append(("p", f"No fusion: {cd.label} replaces no group of baseline kernels by one kernel."))
    if html_figures and (cd.fusions or cd.swaps):
        b.append(("figure", fusion_groups_figure(diff, cd.label)))
    return b


def _swap_blocks(cd) -> list[tuple]:
    if not (cd.swaps or cd.kernel_choices):
        return []
    rows = [
        [
            f.kind,
            names(f.fused_kernel.split(" + ")),
            names(f.replaces, f.replaced_ops),
            "+".join(f.ops),
            f"{fmt_us(f.base_time_us_per_step)} → {fmt_us(f.candidate_time_us_per_step)}",
            str(f.count_per_step),
        ]
        for f in cd.swaps + cd.kernel_choices
    ]
    return [
        ("h3", "Kernel swaps and kernel choices (no bytes avoided by the rule)"),
        ("table", ["kind", "candidate kernel", "baseline kernel(s)", "ops", "time / step", "per step"], rows),
    ]


def _time_breakdown_blocks(diff, cd, html_figures: bool) -> list[tuple]:
    b: list[tuple] = [("h3", "Where the kernel time went")]
    if html_figures:
        b.append(("figure", time_breakdown_figure(diff, cd.label)))
    tb = cd.time_breakdown
    b.append(
        (
            "table",
            ["term", "µs per step (positive = saved)"],
            [
                ["baseline kernel time", num_text(tb["base_kernel_time_us"], 1)],
                ["fusion groups and swaps", num_text(tb["saved_by_fusion_groups_us"], 1)],
                ["kernel choices", num_text(tb["saved_by_kernel_choices_us"], 1)],
                ["matched GEMMs", num_text(tb["saved_on_matched_gemms_us"], 1)],
                ["other matched kernels", num_text(tb["saved_on_other_matched_us"], 1)],
                ["removed kernels", num_text(tb["removed_kernels_us"], 1)],
                ["added kernels", num_text(tb["added_kernels_us"], 1)],
                ["candidate kernel time", num_text(tb["candidate_kernel_time_us"], 1)],
            ],
        )
    )
    return b


def _matched_gemm_blocks(cd) -> list[tuple]:
    b: list[tuple] = [("h3", "Matched GEMMs (by M, N, K, dtype)")]
    if not cd.matched_gemms:
        return b + [("p", "No GEMM with the same M, N, K and dtype on both sides.")]
    rows = [
        [
            g["problem"],
            str(g["count_per_step"]),
            names([g["base_kernel"]], [g["base_op"]]),
            names([g["candidate_kernel"]], [g["candidate_op"]]),
            f"{fmt_us(g['base_time_us_per_step'])} → {fmt_us(g['candidate_time_us_per_step'])}",
            f"{fmt_num(g['base_tflops'], ',.1f', missing='unknown')} → {fmt_num(g['candidate_tflops'], ',.1f', missing='unknown')}",
        ]
        for g in cd.matched_gemms
    ]
    return b + [
        ("table", ["problem", "per step", "baseline kernel", "candidate kernel", "time / step", "TFLOP/s"], rows)
    ]


def _unmatched_blocks(cd) -> list[tuple]:
    b: list[tuple] = [("h3", "Unmatched kernels")]
    if not (cd.unmatched_base or cd.unmatched_candidate):
        return b + [("p", "None: every kernel on both sides is matched or in a group above.")]
    rows = [
        [side, [Name(k["name"])], k["op"], k["shapes"], str(k["count_per_step"]), fmt_us(k["time_us_per_step"])]
        for side, ks in (("baseline only", cd.unmatched_base), ("candidate only", cd.unmatched_candidate))
        for k in ks
    ]
    return b + [("table", ["side", "kernel", "op", "shapes", "per step", "time / step"], rows)]


def _remaining_blocks(cd) -> list[tuple]:
    """What is left: the first 40 tensors the candidate still writes to HBM and reads straight back."""
    b: list[tuple] = [("h3", f"What is left: tensors {cd.label} still writes to HBM and reads straight back")]
    if cd.run.remaining_unknown:
        return b + [("p", f"Unknown: {cd.run.remaining_unknown}.")]
    if not cd.run.remaining:
        return b + [("p", "Nothing found: no GEMM or pointwise output is read straight back by a pointwise kernel.")]
    rows = [
        [
            x["kind"],
            names([x["producer"]], [x["producer_op"]]),
            names(x["readers"]),
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
    return b
