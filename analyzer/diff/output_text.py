"""The diff as text: the terminal view of `python -m analyzer diff` and the sentences every surface shares
(CLI, report, Compare), built from the result model (analyzer.diff.model).

    text_lines(diff)          # the terminal view: every candidate's headline, then one block per candidate
    lead_lines(cd)            # the conditions' verdict and what the changed kernels saved, first in every view
    step_times_text(cd)       # GPU busy, step span and idle per step with their spreads and calls
    traffic_avoided(cd)       # bytes avoided three ways (logical, predicted DRAM, measured DRAM) and its sentence
    phases_text(cd)           # a training step's time per phase

The model's methods of the same names call these; the functions take the model's objects and never import that
module, which imports this one.
"""

from __future__ import annotations

from analyzer.diff.headline import headline_text
from analyzer.fmt import clean_json, finite, fmt_bytes, fmt_pct, fmt_us, fmt_us_spread, short_name
from analyzer.runmeta import conditions_text

GROUPS_SHOWN = 12  # fusion groups listed in full; a whole model's others are summed in the 'by pattern' line
UNEXPLAINED_SHOWN = 8


def pct_call(pct, call: str | None) -> str:
    """'13.0% faster' (the word carries the sign: never '-13.0% faster'), '+0.3% tie' without a clear call."""
    word = str(call or "").strip()
    if finite(pct) and word.split(" ")[0] in ("faster", "slower"):
        return f"{abs(float(pct)):,.1f}% {word}"
    return f"{fmt_pct(pct)} {word}".rstrip()


def phases_text(cd) -> str:
    """A training step's time per phase, base → candidate, and what fusion saved in each ('' for inference)."""
    if not cd.phases:
        return ""
    parts = [
        f"{p} {fmt_us(v['base_us'])} → {fmt_us(v['candidate_us'])} (fusions saved {fmt_us(v['fusions_saved_us'])})"
        for p, v in cd.phases.items()
        if v["base_us"] or v["candidate_us"]
    ]
    return "phases: " + " · ".join(parts)


def traffic_avoided(cd) -> dict:
    """The bytes a fusion saves, three ways and named apart: logical (the intermediates' round trips, as if
    none stayed on chip), predicted DRAM (the L2-aware model, step against step) and measured DRAM (Nsight
    Compute in sequence, when the runner recorded it). `text` is the one sentence every surface shows."""
    logical = cd.hbm_bytes_avoided_per_step
    dram = cd.predicted_dram_bytes_saved_per_step
    measured = cd.measured_warm_dram_bytes_saved_per_step
    parts = [f"{fmt_bytes(logical)} logical" + ("" if cd.bytes_complete else " (at least)")]
    if finite(dram):
        why = ""
        if finite(logical) and logical > 0 and dram < 0.97 * logical:
            why = " (part of what the fusion avoids stayed in L2 in the baseline anyway)"
        elif finite(logical) and logical > 0 and dram > 1.03 * logical:
            why = " (the candidate also finds more of its inputs still in L2)"
        elif finite(logical) and logical > 0:
            why = " (streamed in order, the baseline's intermediates left L2 before they were read back)"
        if dram < 0:  # a candidate that moves more than its baseline (e.g. the diff taken the other way round)
            parts.append(f"none predicted: ≈{fmt_bytes(-dram)} MORE DRAM traffic than {cd.base.label}")
        else:
            parts.append(f"≈{fmt_bytes(dram)} DRAM predicted{why}")
    else:
        why = [f"{r.label}: {r.dram_basis}" for r in (cd.base, cd.run) if not finite(r.dram_bytes_per_step)]
        parts.append("DRAM not predicted (" + ("; ".join(why) or "unknown") + ")")
    if measured is not None and measured < 0:
        parts.append(f"{fmt_bytes(-measured)} MORE DRAM traffic measured (Nsight Compute, in sequence)")
    elif measured is not None:
        parts.append(f"{fmt_bytes(measured)} DRAM measured (Nsight Compute, in sequence)")
    return clean_json(
        {
            "logical_bytes_per_step": logical,
            "predicted_dram_bytes_per_step": dram,
            "measured_dram_bytes_per_step": measured,
            "text": "HBM traffic avoided per step: " + ", ".join(parts),
            "basis": {
                "logical": "intermediates written and read back between replaced kernels, every byte counted",
                "predicted": cd.base.dram_basis or "unknown",
                "measured": "ncu --cache-control none over steady-state steps in a row (docs/KERNELS.md)",
            },
        }
    )


def step_times_text(cd) -> str:
    """GPU busy time, step span and idle per step, base → candidate, each median with its spread over the
    steady steps, and the busy and span changes with their call: the same line in the CLI and the report."""
    b, c, h = cd.base, cd.run, cd.headline()
    calls = (h.get("spread") or {}).get("calls") or {}

    def change(pct_key: str, call_key: str) -> str:
        return pct_call(h.get(pct_key), calls.get(call_key))

    def side(run, value: float, key: str) -> str:
        return fmt_us_spread(value, run.step_range(key))

    return (
        f"GPU busy/step {side(b, b.gpu_busy_us_per_step, 'gpu_busy_us')} → "
        f"{side(c, c.gpu_busy_us_per_step, 'gpu_busy_us')} ({change('gpu_busy_change_pct', 'gpu_busy')}) · "
        f"step span {side(b, b.span_us_per_step, 'span_us')} → {side(c, c.span_us_per_step, 'span_us')} "
        f"({change('span_change_pct', 'span')}) · idle {side(b, b.idle_us_per_step, 'idle_us')} → "
        f"{side(c, c.idle_us_per_step, 'idle_us')}"
    )


def lead_lines(cd) -> list[str]:
    """The first lines of every view of this candidate (CLI, report card, Compare): the GPU conditions'
    verdict, then what the changed kernels saved (normalised when a factor is known), each with its spread."""
    comp = cd.comparability
    sp = cd.spreads()
    calls = sp["calls"]
    n = " and ".join(dict.fromkeys(str(x) for x in sp["steps"]))
    verdict = comp.verdict if comp is not None else "not checkable"
    cond = f"conditions: {verdict.upper() if verdict == 'skewed' else verdict} — " + (
        comp.reason if comp is not None else "no control group"
    )
    rec = [conditions_text(r.facts.get("conditions")) for r in (cd.base, cd.run)]
    if rec[0] or rec[1]:
        cond += (
            f"; runner's record while profiled: {cd.base_label} {rec[0] or 'not recorded'}, "
            f"{cd.label} {rec[1] or 'not recorded'}"
        )
    raw = cd.changed_kernels_saved_us_per_step
    norm = cd.changed_kernels_saved_normalised_us_per_step
    rng = sp.get("changed_kernels_saved_us_per_step")
    if norm is not None:
        nr = sp.get("changed_kernels_saved_normalised_us_per_step")
        withheld = cd.normalised.get("range_withheld")
        spread = (
            f"no range: {withheld}"
            if withheld
            else f"{_range_text(nr, _is_cost(norm))} over {n} steps: "
            f"{_call_text(calls.get('changed_kernels_normalised'))}"
        )
        saved = (
            f"changed kernels {_saved_text(norm)}/step at equal conditions ({spread}; as recorded: {_saved_text(raw)})"
        )
    else:
        saved = (
            f"changed kernels {_saved_text(raw)}/step as recorded ({_range_text(rng, _is_cost(raw))} over {n} steps: "
            f"{_call_text(calls.get('changed_kernels'))}; not normalised: "
            + ("only kernels in another context to check" if comp is not None and comp.factor else "no control group")
            + ")"
        )
    return ([f"NOT ONE PROGRAM: {cd.different_work}"] if cd.different_work else []) + [cond, saved]


def _is_cost(us) -> bool:
    return finite(us) and us < 0


def _saved_text(us: float) -> str:
    return f"saved {fmt_us(us)}" if not finite(us) or us >= 0 else f"cost {fmt_us(-us)} more"


def _range_text(r, cost: bool = False) -> str:
    """A saved-µs range over steps; cost: the figure beside it reads as a cost ('cost 1,676.0 µs more'), so the
    range is given as costs too (1,302.7 to 2,620.1), not as negative savings."""
    if not r:
        return "spread unknown"
    lo, hi = (-r[1], -r[0]) if cost else (r[0], r[1])
    return f"{lo:,.1f} to {hi:,.1f} µs"


def _call_text(call: str | None) -> str:
    return {
        "faster": "faster in every step",
        "slower": "slower in every step",
        "tie": "a tie: within the step-to-step spread",
    }.get(call or "", "no call")


def text_lines(diff) -> list[str]:
    """The terminal view: the headline of every candidate first (analyzer.diff.headline), then one block per
    candidate with the figures it rests on."""
    b = diff.base
    heads = [(cd, cd.headline()) for cd in diff.candidates]
    out = [
        f"headline: {headline_text(h['headline'], cd.label, cd.base_label)}"
        + (" (not one program's two versions: see below)" if cd.different_work else "")
        for cd, h in heads
    ]
    out.append(f"baseline {b.label}: {b.source}" + (f" · {b.gpu}" if b.gpu else ""))
    for cd, h in heads:
        out.append("")
        out += _candidate_lines(cd, h)
    for n in diff.notes:
        out.append(f"note: {n}")
    return out


def _candidate_lines(cd, h: dict) -> list[str]:
    """One candidate's block: headline reason, lead lines, times, bytes, accounting, groups, what is left."""
    out = [f"{cd.label} vs {cd.base_label}: {cd.run.source}", f"  headline: {h['headline']['reason']}"]
    out += [f"  {line}" for line in cd.lead_lines()]
    out += _time_lines(cd, h)
    out.append(
        f"  {cd.traffic_avoided()['text']}; logical: {cd.hbm_bytes_avoided_per_step:,.0f} B, estimate · "
        f"time saved by fusions {fmt_us(cd.time_saved_us_per_step)}/step"
    )
    out += _accounting_lines(cd)
    if cd.phases:
        out.append(f"  {cd.phases_text()}")
    out += _fusion_lines(cd)
    out += _left_over_lines(cd)
    return out


def _time_lines(cd, h: dict) -> list[str]:
    """Kernels and GPU time per step as recorded (and normalised), busy/span/idle, the runner's CUDA events."""
    b, r = cd.base, cd.run
    pct = h.get("raw_gpu_time_change_pct")
    sp = h.get("spread") or {}
    calls = sp.get("calls") or {}
    change = f": {pct_call(pct, calls.get('gpu_time'))}" if pct is not None else ""
    rb, rc = sp.get("gpu_time_us_per_step") or [None, None]
    norm = h.get("normalised_gpu_time_change_pct")
    out = [
        f"  kernels/step {cd.kernels_per_step[0]} → {cd.kernels_per_step[1]} · GPU time/step as recorded "
        f"{fmt_us_spread(b.gpu_time_us_per_step, rb)} → {fmt_us_spread(r.gpu_time_us_per_step, rc)}{change}"
        + (f", normalised {pct_call(norm, calls.get('gpu_time_normalised'))}" if norm is not None else ""),
        "  " + cd.step_times_text(),
    ]
    ev = h.get("cuda_event_time_us_per_step") or [None, None]
    if ev[0] is not None and ev[1] is not None:
        eb, ec = sp.get("cuda_event_time_us_per_step") or [None, None]
        out.append(
            f"  CUDA events (runner): {fmt_us_spread(ev[0], eb, what='p10–p90')} → {fmt_us_spread(ev[1], ec, what='p10–p90')}"
            + (f" {calls['cuda_events']}" if calls.get("cuda_events") else "")
        )
    return out


def _accounting_lines(cd) -> list[str]:
    """Where every baseline kernel went, and the first unexplained kernels by name."""
    if cd.accounting is None:
        return []
    out = [f"  accounting: {cd.accounting.text()}"]
    for k in cd.accounting.unexplained[:UNEXPLAINED_SHOWN]:
        out.append(
            f"      unexplained: {short_name(k['name'])} ({k['op']}) ×{k['count_per_step']} "
            f"{fmt_us(k['time_us_per_step'])}/step"
        )
    if len(cd.accounting.unexplained) > UNEXPLAINED_SHOWN:
        out.append(f"      (+{len(cd.accounting.unexplained) - UNEXPLAINED_SHOWN} more: see --json)")
    return out


def _fusion_lines(cd) -> list[str]:
    """The fusion groups (by pattern first on a whole model, then the GROUPS_SHOWN that saved most), swaps and
    kernel choices."""
    out = []
    if len(cd.fusions) > GROUPS_SHOWN:
        out.append(
            "  by pattern: "
            + " · ".join(
                f"{p['pattern']} ×{p['groups_per_step']}"
                + (f" ({p['phase']})" if cd.phases else "")
                + f" saved {fmt_us(p['time_saved_us_per_step'])}, {fmt_bytes(p['bytes_avoided_per_step'])}"
                for p in cd.pattern_summary()
            )
        )
    shown = sorted(cd.fusions, key=lambda f: -f.time_saved_us_per_step)[:GROUPS_SHOWN]
    for f in cd.fusions:
        if f in shown:
            out += _fusion_group_lines(f)
    if len(cd.fusions) > GROUPS_SHOWN:
        out.append(f"  (+{len(cd.fusions) - GROUPS_SHOWN} more fusion groups, less time saved: --json or --report)")
    for f in cd.swaps:
        out.append(f"  swap: {short_name(f.fused_kernel)} ← {short_name(f.replaces[0])} ({'+'.join(f.ops) or '?'})")
    if cd.kernel_choices:
        out.append(f"  kernel choices (same op and shapes, other kernels): {len(cd.kernel_choices)}")
    return out


def traffic_text(i: dict) -> str:
    """How a fusion's intermediate (a FusionRow.intermediates row) moved through HBM in the baseline, in the words
    every surface uses: 'written once, read 2×', or for a tensor the fused kernel still writes (it saves it for the
    backward): 'read 1×, its write kept: the fused kernel saves it'."""
    if i.get("shared_operand"):
        return f"the merged GEMMs' shared operand: read once, not {i['reads'] + 1}×"
    other = len(i.get("readers_in_other_groups") or ())
    where = f" ({other} in another group)" if other else ""
    if i.get("still_written"):
        return f"read {i['reads']}×{where}, its write kept: the fused kernel saves it"
    return f"written once, read {i['reads']}×{where}"


def _fusion_group_lines(f) -> list[str]:
    """One fusion group (a FusionRow): what it replaced, its intermediates, bytes avoided and times."""
    inter = ", ".join(f"{i['matrix']} {i['dtype']} ({traffic_text(i)})" for i in f.intermediates)
    inter = inter or "none"
    out = [
        f"  fusion{f' ({f.count_per_step} per step)' if f.count_per_step > 1 else ''}: {short_name(f.fused_kernel)} ← "
        f"{' + '.join(f.ops) or '?'} ({len(f.replaces)} kernels) · intermediates {inter} · "
        f"{fmt_bytes(f.bytes_avoided_per_step)} avoided · {fmt_us(f.base_time_us_per_step)} → "
        f"{fmt_us(f.candidate_time_us_per_step)}" + (f" · {f.pattern}" if f.pattern else "")
    ]
    if f.bytes_note:
        out.append(f"      bytes: {f.bytes_note}")
    return out


def _left_over_lines(cd) -> list[str]:
    """Unmatched kernels per step and the HBM round trips the candidate still makes."""
    out = []
    n_ub = sum(k["count_per_step"] for k in cd.unmatched_base)
    n_uc = sum(k["count_per_step"] for k in cd.unmatched_candidate)
    if n_ub or n_uc:
        out.append(f"  unmatched kernels/step: {n_ub} baseline, {n_uc} candidate (see --json or --report)")
    r = cd.run
    left = r.remaining_bytes_per_step
    if r.remaining_unknown:
        out.append(f"  still round-tripping through HBM: unknown ({r.remaining_unknown})")
    elif left > 0:
        out.append(f"  still round-tripping through HBM: {fmt_bytes(left)}/step (see the report's 'What is left')")
    return out
