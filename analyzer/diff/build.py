"""Building the fusion diff: what candidate runs changed on the GPU against one baseline run, and what it bought.

    diff = diff_runs(base_summary, [cand_summary, ...], labels=["eager", "compile", ...])
    diff.to_json()            # what `python -m analyzer diff --json` prints
    diff.side_by_side()       # one row per run: kernels, launches, GPU time, idle per step
    diff.categories()         # GPU time per step by category, long form (run, category, count, time_us)
    diff.candidates[i]        # CandidateDiff: fusions, swaps, matched GEMMs, unmatched kernels, what is left

The objects are the result model's (analyzer.diff.model); this module builds them.

How (docs/DIFF.md has the full rule): each run becomes its representative steady-state step (analyzer.diff.align),
the two kernel lists are aligned (GEMMs by M, N, K, dtype; others by name, op and shapes), each new candidate kernel
claims the baseline kernels it replaced (analyzer.diff.match), and each group's bytes avoided are the intermediates
its baseline kernels wrote to HBM and read back: size × (1 write + reads).

Every byte figure is an ESTIMATE from the launching ops' recorded shapes and dtypes (no counters); times are
measured kernel durations (median over steady steps).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pandas as pd

from analyzer.cost import hbm_flags
from analyzer.diff import comparability
from analyzer.diff.accounting import Accounting, account, kernel_list
from analyzer.diff.align import RunSeq, align, sequence
from analyzer.diff.comparability import Comparability
from analyzer.diff.flow import round_trip_rows
from analyzer.diff.match import Group, GroupResult, group_kernels, member_bytes
from analyzer.diff.measures import range_or_none
from analyzer.diff.merge import MERGE_EVIDENCE
from analyzer.diff.model import CandidateDiff, Diff, FusionRow, RunFacts
from analyzer.dram import device_of, predict_step
from analyzer.errors import DiffError
from analyzer.fmt import file_label, finite, safe_text, short_name, unique_label
from analyzer.opinfo import names
from analyzer.opinfo.tensors import shape_text
from analyzer.phases import PHASES, is_training, phase_of_rows, phase_times_us
from analyzer.runmeta import run_facts


def diff_runs(base, candidates: list, labels: list[str] | None = None, steps: list[int | None] | None = None) -> Diff:
    """Compare candidate Summaries against a baseline Summary (see module doc).

    labels: one per run, baseline first (default: trace file names, made unique).
    steps: one step number (or None: the representative step) per run, baseline first.
    Raises DiffError for bad arguments or a run with no kernels to compare.
    """
    if not isinstance(candidates, (list, tuple)) or not candidates:
        raise DiffError("diff: need at least one candidate run to compare with the baseline")
    summaries = [base, *candidates]
    n = len(summaries)
    labels = _labels(summaries, labels)
    if steps is not None and len(steps) != n:
        raise DiffError(f"diff: {len(steps)} steps given for {n} runs (baseline first)")
    seqs = [
        sequence(s, lab, None if steps is None else steps[i])
        for i, (s, lab) in enumerate(zip(summaries, labels, strict=True))
    ]
    runs = [_run_facts(s, q) for s, q in zip(summaries, seqs, strict=True)]
    notes = _cross_run_notes(runs)
    cds = [_candidate_diff(seqs[0], runs[0], seqs[i], runs[i]) for i in range(1, n)]
    for i, cd in enumerate(cds, start=1):
        _flag_rates(cd, summaries[0].trace.gpu, summaries[i].trace.gpu)
    return Diff(base=runs[0], runs=runs, candidates=cds, notes=notes)


def run_phases(summary) -> dict[str, float]:
    """GPU time per phase (forward / backward / optimizer) of a run's representative step, the same step and rule
    the diff uses (analyzer.phases); {} for an inference run (every kernel forward). Kept on the Summary."""
    cached = getattr(summary, "_phase_times_us", None)
    if cached is None:
        try:
            rows = sequence(summary, "run").rows
        except DiffError:  # no GPU kernel in any step (a truncated or CPU-only trace): no phases to show
            rows = None
        ph = phase_of_rows(rows) if rows is not None else None
        cached = phase_times_us(rows, ph) if ph is not None and is_training(ph) else {}
        with contextlib.suppress(AttributeError):  # a frozen or slotted summary: computed again next time
            summary._phase_times_us = cached
    return cached


def _labels(summaries: list, labels: list[str] | None) -> list[str]:
    n = len(summaries)
    if labels is not None:
        labels = [safe_text(x) for x in labels]
        if len(labels) != n:
            raise DiffError(f"diff: {len(labels)} labels given for {n} runs (baseline first, then each candidate)")
        if any(not x for x in labels):
            raise DiffError("diff: empty label")
        if len(set(labels)) != n:
            raise DiffError(f"diff: labels must be unique, got {labels}")
        return labels
    out: list[str] = []
    for s in summaries:
        facts = run_facts(s.trace.meta)
        name = safe_text(facts.get("variant")) or file_label(str(s.trace.meta.source)) or "run"
        out.append(unique_label(name, out))
    return out


def _num(d: dict, key: str) -> float:
    v = d.get(key) if isinstance(d, dict) else None
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _run_facts(summary, seq: RunSeq) -> RunFacts:
    per = summary.per_step if isinstance(summary.per_step, dict) else {}
    by_cat = {}
    for cat, v in (per.get("by_category") or {}).items():
        by_cat[str(cat)] = {"count": _num(v, "count"), "time_us": _num(v, "time_us")}
    gpu = getattr(summary.trace, "gpu", None)
    gbps = getattr(gpu, "hbm_gbps", None)
    remaining = round_trip_rows(seq, gbps)
    n_replay = int(seq.rows["graph_replay"].sum()) if "graph_replay" in seq.rows else 0
    remaining_unknown = (
        f"{n_replay} of its {len(seq.rows)} GPU ops per step ran as CUDA-graph replays, which record no op or "
        "tensor shapes per kernel, so the tensors they write and read back are unknown"
        if n_replay
        else ""
    )
    top_gemm, dtype = None, None
    gem = [(float(t), g) for t, g in zip(seq.rows["dur_us"], seq.rows["gemm"], strict=True) if g is not None]
    if gem:
        by: dict = {}
        for t, g in gem:
            by[g] = by.get(g, 0.0) + t
        top = max(by, key=by.get)
        top_gemm, dtype = top.label(), top.dtype
    dram_total, dram_basis = _predict_dram(summary, seq)
    return RunFacts(
        label=seq.label,
        source=str(summary.trace.meta.source),
        facts=run_facts(summary.trace.meta),
        steps_used=seq.steps_used,
        steps_with_signature=seq.steps_with_signature,
        step_shown=seq.step_shown,
        kernels_per_step=seq.n_kernels,
        memops_per_step=seq.n_memops,
        launches_per_step=_num(per, "launches"),
        gpu_time_us_per_step=_num(per, "gpu_time_us"),
        gpu_busy_us_per_step=_num(per, "gpu_busy_us"),
        idle_us_per_step=_num(per, "idle_us"),
        span_us_per_step=_num(per, "span_us"),
        launch_latency_us=_num(per, "launch_latency_us"),
        kernel_time_us=float(seq.rows["dur_us"].sum()),
        by_category=by_cat,
        remaining=remaining,
        top_gemm=top_gemm,
        dtype=dtype,
        notes=list(seq.notes),
        dram_bytes_per_step=dram_total,
        dram_basis=dram_basis,
        step_values=_step_values(summary),
        remaining_unknown=remaining_unknown,
    )


def _predict_dram(summary, seq: RunSeq) -> tuple[float, str]:
    """analyzer.dram on the representative step itself (its rows get dram_bytes): the step's predicted DRAM bytes
    (NaN when a GPU op has none) and what they rest on. Same kernels, shapes and bytes as the Summary's DRAM step
    give the same figures: the model reads no durations."""
    pred = predict_step(seq.rows, summary.trace.gpu, device_of(summary.trace))
    seq.rows["dram_bytes"] = pred["dram_bytes"].to_numpy()
    d = pred["dram_bytes"]
    if len(d) and d.notna().all():
        basis = next((str(b).split("; ")[0] for b in pred["dram_basis"] if str(b).startswith("predicted")), "")
        return float(d.sum()), basis or next(iter(pred["dram_basis"]), "unknown")
    if not len(d):
        return float("nan"), "no GPU ops in the step"
    # why not: which ops have no byte estimate, and how much of the step they are (a sum without them would
    # compare two runs over different work)
    miss = d.isna().to_numpy()
    dur = seq.rows["dur_us"].to_numpy(dtype=float)
    ops = seq.rows["op_name"].astype(str).to_numpy()[miss]
    top = pd.Series(dur[miss]).groupby(ops).sum().sort_values(ascending=False)
    share = dur[miss].sum() / max(dur.sum(), 1e-9)
    gpu_why = next(
        (str(b) for b in pred["dram_basis"] if str(b).startswith("unknown: GPU") or "cache size" in str(b)), ""
    )
    if gpu_why:
        return float("nan"), gpu_why.removeprefix("unknown: ")
    return float("nan"), (
        f"{int(miss.sum())} of the step's {len(d)} GPU ops ({share:.1%} of its GPU time) have no byte estimate, e.g. "
        + ", ".join(f"{op or 'no op'}" for op in top.index[:3])
        + (
            " (multi-tensor ops record no shapes for their tensor lists)"
            if any("_foreach_" in o for o in top.index[:3])
            else ""
        )
    )


def _step_values(summary) -> dict[str, list[float]]:
    """Per steady step (the Summary's step table, steps_used order): GPU time, busy, idle and span, in µs."""
    t = summary.steps
    steady = t[t["steady"].to_numpy(dtype=bool)]
    return {k: steady[k].astype(float).tolist() for k in ("gpu_time_us", "gpu_busy_us", "idle_us", "span_us")}


def _cross_run_notes(runs: list[RunFacts]) -> list[str]:
    notes = []
    gpus = {r.gpu for r in runs if r.gpu}
    if len(gpus) > 1:
        notes.append(
            "runs were recorded on different GPUs ("
            + ", ".join(f"{r.label}: {r.gpu}" for r in runs if r.gpu)
            + "): time differences mix hardware and software"
        )
    for key in ("workload", "dtype"):
        vals = {str(r.facts.get(key)) for r in runs if r.facts.get(key) is not None}
        if len(vals) > 1:
            notes.append(f"runs differ in {key}: " + ", ".join(f"{r.label}: {r.facts.get(key)}" for r in runs))
    shapes = {repr(r.facts.get("shapes")) for r in runs if r.facts.get("shapes")}
    if len(shapes) > 1:
        notes.append("runs were recorded with different shapes; kernels will not line up one to one")
    return notes


def _flag_rates(cd: CandidateDiff, base_gpu, cand_gpu) -> None:
    """Every fusion / swap / kernel-choice row's GB/s gets the same HBM flags as the summary's kernel rows."""
    for r in (*cd.fusions, *cd.swaps, *cd.kernel_choices):
        r.base_flags = hbm_flags([r.base_gbps], base_gpu.hbm_gbps if base_gpu else None)[0]
        r.candidate_flags = hbm_flags([r.candidate_gbps], cand_gpu.hbm_gbps if cand_gpu else None)[0]


def _candidate_diff(bseq: RunSeq, brun: RunFacts, cseq: RunSeq, crun: RunFacts) -> CandidateDiff:
    """One candidate against the baseline: align the steps, group the kernels (analyzer.diff.match), then every
    figure the model holds, step by step."""
    b, c = bseq.rows, cseq.rows
    res = group_kernels(bseq, cseq, align(b, c))
    b_rows, c_rows = bseq.records, cseq.records
    b_phase, c_phase = phase_of_rows(b), phase_of_rows(c)
    fusions, swaps, choices = _fusion_rows(res, bseq, cseq, b_phase)
    gemm_pairs, other = _matched_pairs(res, b_rows, c_rows)
    unmatched_base = kernel_list([b_rows[i] for i in res.unmatched_b])
    unmatched_cand = kernel_list([c_rows[j] for j in res.unmatched_c])
    acct = account(bseq, cseq, res)
    notes = _grouping_notes(bseq, cseq, acct, unmatched_base, unmatched_cand, fusions)
    comp = comparability.check(bseq, cseq, probes=(brun.facts.get("control_probe"), crun.facts.get("control_probe")))
    notes += [f"GPU conditions: {n}" for n in comp.notes]
    wb, wc = comp.control_weight
    wb = np.zeros(len(b)) if wb is None else wb
    wc = np.zeros(len(c)) if wc is None else wc
    fb, fc = _replaced_masks(res, len(b), len(c))
    step_ranges = {
        "changed_base": range_or_none(comparability.per_step_us(bseq, 1.0 - wb)),
        "changed_candidate": range_or_none(comparability.per_step_us(cseq, 1.0 - wc)),
        "fusion_base": range_or_none(comparability.per_step_us(bseq, fb)),
        "fusion_candidate": range_or_none(comparability.per_step_us(cseq, fc)),
    }
    return CandidateDiff(
        label=cseq.label,
        base_label=bseq.label,
        base=brun,
        run=crun,
        fusions=fusions,
        swaps=swaps,
        kernel_choices=choices,
        matched_gemms=_gemm_table(gemm_pairs),
        matched_other=other,
        unmatched_base=unmatched_base,
        unmatched_candidate=unmatched_cand,
        time_breakdown=_time_breakdown(res, bseq, brun, cseq, crun, gemm_pairs, other),
        notes=notes,
        accounting=acct,
        phases=_phase_times(b, c, b_phase, c_phase, fb, fc),
        comparability=comp,
        changed_kernels_us_per_step=[
            float(b["dur_us"].to_numpy(float) @ (1.0 - wb)),
            float(c["dur_us"].to_numpy(float) @ (1.0 - wc)),
        ],
        step_ranges=step_ranges,
        normalised=_normalised(comp, cseq, wc, fc, step_ranges),
        different_work=comparability.shared_work_note(b_rows, c_rows, bseq.label, cseq.label),
    )


def _fusion_rows(
    res: GroupResult, bseq: RunSeq, cseq: RunSeq, b_phase: np.ndarray
) -> tuple[list[FusionRow], list[FusionRow], list[FusionRow]]:
    """The groups as rows, identical ones aggregated: fusions, swaps and kernel choices."""
    b_dram = bseq.rows["dram_bytes"].to_numpy(dtype=float) if "dram_bytes" in bseq.rows else None
    c_dram = cseq.rows["dram_bytes"].to_numpy(dtype=float) if "dram_bytes" in cseq.rows else None
    groups = [_group_row(g, bseq.records, cseq.records, b_dram, c_dram) for g in res.groups]
    for g, row in zip(res.groups, groups, strict=True):
        row.phase = str(b_phase[g.members[0]]) if g.members else "forward"
    return tuple(_aggregate([r for r in groups if r.kind == kind]) for kind in ("fusion", "swap", "kernel choice"))


def _matched_pairs(res: GroupResult, b_rows: list, c_rows: list) -> tuple[list[tuple], dict]:
    """The alignment's pairs: GEMM pairs (base row, candidate row, how) and the other pairs' count and times."""
    gemm_pairs, other = [], {"count": 0, "base_time_us": 0.0, "candidate_time_us": 0.0}
    for bi, cj, how in res.pairs:
        br, cr = b_rows[bi], c_rows[cj]
        if br.gemm is not None and cr.gemm is not None:
            gemm_pairs.append((br, cr, how))
        else:
            other["count"] += 1
            other["base_time_us"] += float(br.dur_us)
            other["candidate_time_us"] += float(cr.dur_us)
    return gemm_pairs, other


def _time_breakdown(
    res: GroupResult, bseq: RunSeq, brun: RunFacts, cseq: RunSeq, crun: RunFacts, gemm_pairs: list, other: dict
) -> dict:
    """How the representative step's kernel time changed, in six terms that sum to base − candidate."""
    b_rows, c_rows = bseq.records, cseq.records
    repl = [g for g in res.groups if g.kind != "kernel choice"]
    choice = [g for g in res.groups if g.kind == "kernel choice"]
    fused_base = sum(float(b_rows[m].dur_us) for g in repl for m in g.members + g.side)
    fused_cand = sum(float(c_rows[j].dur_us) for g in repl for j in g.fused)
    choice_base = sum(float(b_rows[m].dur_us) for g in choice for m in g.members)
    choice_cand = sum(float(c_rows[j].dur_us) for g in choice for j in g.fused)
    gemm_base = sum(float(x[0].dur_us) for x in gemm_pairs)
    gemm_cand = sum(float(x[1].dur_us) for x in gemm_pairs)
    removed = sum(float(b_rows[i].dur_us) for i in res.unmatched_b)
    added = sum(float(c_rows[j].dur_us) for j in res.unmatched_c)
    return {
        "base_kernel_time_us": brun.kernel_time_us,
        "candidate_kernel_time_us": crun.kernel_time_us,
        "saved_by_fusion_groups_us": fused_base - fused_cand,
        "saved_by_kernel_choices_us": choice_base - choice_cand,
        "saved_on_matched_gemms_us": gemm_base - gemm_cand,
        "saved_on_other_matched_us": other["base_time_us"] - other["candidate_time_us"],
        "removed_kernels_us": removed,
        "added_kernels_us": -added,
        "note": "kernel time of the representative steps; the six saved/removed/added terms sum to base − candidate",
    }


def _grouping_notes(
    bseq: RunSeq, cseq: RunSeq, acct: Accounting, unmatched_base: list, unmatched_cand: list, fusions: list
) -> list[str]:
    """Both steps' own notes, then what the grouping could not explain or could only bound."""
    notes = [f"{cseq.label}: {n}" for n in cseq.notes] + [f"{bseq.label}: {n}" for n in bseq.notes]
    if unmatched_base or unmatched_cand:
        n_removed, n_unexplained = acct.base_count["removed"], acct.base_count["unexplained"]
        notes.append(
            f"{n_removed + n_unexplained} baseline kernels per step matched nothing ({n_removed} removed: copies,"
            f" fills, masks and checks {cseq.label} does not do; {n_unexplained} unexplained) and "
            f"{sum(k['count_per_step'] for k in unmatched_cand)} {cseq.label} kernels per step are new (listed under"
            " unmatched)"
        )
    # every baseline op in one bucket; the share of the baseline's time the diff explains decides whether its
    # groups can be shown as facts (two different models: most of the baseline is unexplained)
    if not acct.reliable and len(bseq.records) >= 10:
        notes.append(
            f"only {acct.explained_time_share:.0%} of {bseq.label}'s GPU time per step is matched, fused, replaced or"
            f" removed in {cseq.label}: these runs may not run the same model or shapes, so fusion groups and bytes"
            " avoided are unreliable (the unexplained kernels are listed)"
        )
    if any(not f.bytes_complete and not f.saved_unknown for f in fusions):
        notes.append("some fusion groups have kernels without recorded shapes: their bytes avoided are lower bounds")
    if any(f.saved_unknown for f in fusions):
        notes.append(
            "some fusion groups avoid writing a tensor the backward may read again through a derivative formula the"
            " diff does not follow (pow, a norm's): their bytes avoided are lower bounds"
        )
    return notes


def _replaced_masks(res: GroupResult, n_b: int, n_c: int) -> tuple[np.ndarray, np.ndarray]:
    """1.0 on the kernels a fusion or swap replaced (baseline: members and side work) and on their replacements."""
    repl = [g for g in res.groups if g.kind != "kernel choice"]
    fb, fc = np.zeros(n_b), np.zeros(n_c)
    fb[[m for g in repl for m in g.members + g.side]] = 1.0
    fc[[j for g in repl for j in g.fused]] = 1.0
    return fb, fc


def _phase_times(
    b: pd.DataFrame, c: pd.DataFrame, b_phase: np.ndarray, c_phase: np.ndarray, fb: np.ndarray, fc: np.ndarray
) -> dict:
    """A training step's GPU time per phase on both sides and what the fusion groups saved in each; {} when
    neither run trains."""
    if not (is_training(b_phase) or is_training(c_phase)):
        return {}
    bt, ct = phase_times_us(b, b_phase), phase_times_us(c, c_phase)
    # what the fusion groups saved in each phase, member by member (a compiled loss kernel recomputes the
    # forward log_softmax inside the backward: its group spans both phases)
    bdur, cdur = b["dur_us"].to_numpy(float), c["dur_us"].to_numpy(float)
    phases: dict = {}
    for p in PHASES:
        saved = float(bdur[(fb > 0) & (b_phase == p)].sum() - cdur[(fc > 0) & (c_phase == p)].sum())
        phases[p] = {"base_us": bt[p], "candidate_us": ct[p], "saved_us": bt[p] - ct[p], "fusions_saved_us": saved}
    return phases


def _normalised(comp: Comparability, cseq: RunSeq, wc: np.ndarray, fc: np.ndarray, step_ranges: dict) -> dict:
    """The candidate at the baseline's conditions (comparability.candidate_factors): its effective factor and the
    changed and replacing kernels' time under both assumptions; adds the normalised per-step ranges to
    step_ranges. {} when the conditions are not checkable."""
    fp, fo = comp.candidate_factors
    if fp is None:
        return {}
    cdur = cseq.rows["dur_us"].to_numpy(float)
    inv = (1.0 / fp, 1.0 / fo)
    norm_total = float(cdur @ inv[0])
    normalised = {
        "effective_factor": float(cdur.sum()) / norm_total if norm_total > 0 else None,
        "changed_candidate_us": [float((cdur * (1.0 - wc)) @ i) for i in inv],
        "fusion_candidate_us": [float((cdur * fc) @ i) for i in inv],
    }
    # normalised per-step ranges carry the factor's own uncertainty: the steps at the highest and the lowest
    # factor each row could take (comparability.candidate_factor_bounds)
    flo, fhi = comp.candidate_factor_bounds
    widest = float(np.max(fhi / flo)) if len(flo) else 1.0
    if widest > comparability.MAX_BAND_WIDTH:
        # a band that wide bounds nothing (HTA's trace_diff pair: control kernels with 4% of the time, ratios
        # spreading 0.2-6x, put the normalised change at -247.6 to +3.4 ms in a ~150 ms step)
        normalised["range_withheld"] = (
            f"the control kernels' ratios spread {float(np.min(flo)):.2f}-{float(np.max(fhi)):.2f}x (the middle 80% of "
            f"their time), more than {comparability.MAX_BAND_WIDTH:.1f}x from end to end: too wide to bound the "
            "normalised figures, so they carry no range and no call"
        )
        normalised["effective_factor_range"] = None
        for key in ("changed_candidate", "fusion_candidate"):
            step_ranges[key + "_normalised"] = None
        return normalised
    for key, w in (("changed_candidate", 1.0 - wc), ("fusion_candidate", fc)):
        a = range_or_none(comparability.per_step_us(cseq, w / fhi))
        z = range_or_none(comparability.per_step_us(cseq, w / flo))
        step_ranges[key + "_normalised"] = [a[0], z[1]] if a and z else None
    raw_total = float(cdur.sum())
    normalised["effective_factor_range"] = sorted(
        [
            raw_total / float(cdur @ (1.0 / fhi)),
            raw_total / float(cdur @ (1.0 / flo)),
        ]
    )
    return normalised


def _group_row(g: Group, b_rows: list, c_rows: list, b_dram=None, c_dram=None) -> FusionRow:
    """One group as a row: what it replaced, its intermediates and bytes avoided, both sides' times, bytes and
    predicted DRAM traffic (b_dram, c_dram: per row of each step, None when not predicted)."""
    fr = [c_rows[j] for j in g.fused]
    members = [b_rows[m] for m in g.members]
    ops = _member_ops(members)
    attention = any(r.attn is not None for r in fr)
    return FusionRow(
        kind=g.kind,
        fused_kernel=" + ".join(str(r.name) for r in fr),
        fused_op=str(fr[0].op_name or ""),
        replaces=[str(m.name) for m in members],
        replaced_ops=[str(m.op_name or "") for m in members],
        ops=ops,
        count_per_step=1,
        intermediates=_intermediate_rows(g, b_rows),
        bytes_avoided_per_step=g.bytes_avoided if g.bytes_complete or g.intermediates else float("nan"),
        bytes_complete=g.bytes_complete,
        base_time_us_per_step=sum(float(m.dur_us) for m in members) + sum(float(b_rows[i].dur_us) for i in g.side),
        also_removed=[str(b_rows[i].name) for i in g.side],
        candidate_time_us_per_step=sum(float(r.dur_us) for r in fr),
        base_bytes_per_step=sum(member_bytes(m) for m in members),
        # the fused kernel's own estimate: what summary shows for it
        candidate_bytes_per_step=sum(member_bytes(r) for r in fr),
        evidence=[f"{short_name(b_rows[m].name)}: {g.evidence.get(m, '')}" for m in g.members],
        pattern=_group_pattern(g, members, ops, attention),
        bytes_note=_bytes_note(g, attention),
        saved_unknown=g.saved_unknown,
        base_dram_bytes_per_step=_dram_sum(b_dram, [*g.members, *g.side]),
        candidate_dram_bytes_per_step=_dram_sum(c_dram, g.fused),
        base_kernel_gbps=float(members[0].kernel_gbps) if len(members) == 1 and not g.side else float("nan"),
        candidate_kernel_gbps=float(fr[0].kernel_gbps) if len(fr) == 1 else float("nan"),
    )


def _member_ops(members: list) -> list[str]:
    """The canonical ops the replaced kernels computed, first seen first (each kernel's own sorted)."""
    ops: list[str] = []
    for m in members:
        for o in sorted(m.op_ops or m.name_ops):
            if o not in ops:
                ops.append(o)
    return ops


def _intermediate_rows(g: Group, b_rows: list) -> list[dict]:
    """The tensors one member writes and another reads back: shape, dtype, bytes, readers, round-trip bytes."""
    inter = []
    for it in g.intermediates:
        t = it.tensor
        row = {
            "shape": list(t.shape),
            "matrix": t.matrix(),
            "dtype": t.dtype,
            "bytes": t.nbytes,
            "reads": len(it.consumers) + len(it.other_reads),
            "round_trip_bytes": it.round_trip_bytes,
            "producer": b_rows[it.producer].name,
            "producer_op": b_rows[it.producer].op_name,
            "readers": [b_rows[x].name for x in it.consumers],
        }
        if it.still_written:  # the fused kernel saves it: its write is not avoided (only then in the row)
            row["still_written"] = True
        if it.other_reads:  # read again by a replaced kernel of another group (the backward: analyzer.diff.saved)
            row["readers_in_other_groups"] = [b_rows[x].name for x in it.other_reads]
        if it.shared_operand:  # a GEMM merge's shared operand: reads = re-reads avoided; producer: its first reader
            row["shared_operand"] = True
        inter.append(row)
    return inter


def _group_pattern(g: Group, members: list, ops: list[str], attention: bool) -> str:
    """What a fusion computes (names.fusion_pattern), with ' + residual add' for a norm that starts with one; ''
    for swaps and kernel choices."""
    if g.kind != "fusion":
        return ""
    if all(g.evidence.get(m, "").startswith(MERGE_EVIDENCE) for m in g.members):
        return f"GEMM merge ({len(g.members)} GEMMs sharing an operand, run as one)"
    backward = bool(members) and all(m.node >= 0 for m in members)
    pattern = names.fusion_pattern(ops, attention, backward)
    first = members[0] if members else None
    if pattern.endswith("Norm") and first is not None and names.op_base(first.op_name) == "add":
        out = first.io.output
        if out is not None and out.dtype in ("bf16", "fp16"):  # the norm's own eps add is fp32 [.., 1]
            pattern += " + residual add"
    return pattern


def _dram_sum(dram: np.ndarray | None, rows: list[int]) -> float:
    """Predicted DRAM bytes of these rows of a step, NaN when the step has no prediction."""
    return float(dram[rows].sum()) if dram is not None else float("nan")


def _bytes_note(g: Group, attention: bool) -> str:
    """bytes avoided spelled out: each kind of intermediate (element count, dtype, readers), its size and count,
    e.g. '4 × [8,2048,2048] bf16 67,108,864 B × (1 write + 1 read) + … = 1,090,519,040 B'."""
    if not g.intermediates:
        if g.kind == "fusion" and all(g.evidence.get(m, "").startswith(MERGE_EVIDENCE) for m in g.members):
            return "no intermediate: merged GEMMs pass no tensor to each other (0 B by the rule)"
        return ""
    kinds: dict[tuple, list] = {}
    for it in g.intermediates:
        t = it.tensor
        key = (t.numel, t.dtype, len(it.consumers), it.still_written, len(it.other_reads), it.shared_operand)
        kinds.setdefault(key, []).append(t)
    parts = []
    for (_, dtype, reads, kept, other, shared), ts in kinds.items():
        rd = f"{reads} read{'s' if reads > 1 else ''}"
        if other:
            rd += f" + {other} read{'s' if other > 1 else ''} in another group"
        if shared:
            rw = f"({reads} re-read{'s' if reads > 1 else ''}: the merged GEMMs' shared operand, read once, not {reads + 1}×)"
        elif kept:
            rw = f"({rd}; its write kept: the fused kernel saves it)"
        else:
            rw = f"(1 write + {rd})"
        shapes = "/".join(dict.fromkeys(shape_text(t.shape) for t in sorted(ts, key=lambda t: -len(t.shape))))
        parts.append(f"{len(ts)} × {shapes} {dtype} {ts[0].nbytes:,.0f} B × {rw}")
    total = f" = {g.bytes_avoided:,.0f} B" + ("" if g.bytes_complete else " (at least)")
    lead = (
        "scores and probabilities the attention kernel never writes, and the tensors around them: " if attention else ""
    )
    return lead + " + ".join(parts) + total


def _aggregate(rows: list[FusionRow]) -> list[FusionRow]:
    """Identical groups (a fusion repeated in every layer) become one row with count_per_step."""
    out: dict[tuple, FusionRow] = {}
    for r in rows:
        key = (
            r.kind,
            " + ".join(names.kernel_family(k) for k in r.fused_kernel.split(" + ")),
            # the same fused code (one family) moving the same bytes: one row ×N, whatever Inductor's serial number
            r.candidate_bytes_per_step if finite(r.candidate_bytes_per_step) else None,
            tuple(r.replaces),
            tuple((tuple(i["shape"]), i["dtype"]) for i in r.intermediates),
        )
        if key not in out:
            out[key] = r
            continue
        a = out[key]
        a.count_per_step += 1
        for attr in (
            "bytes_avoided_per_step",
            "base_time_us_per_step",
            "candidate_time_us_per_step",
            "base_bytes_per_step",
            "candidate_bytes_per_step",
            "base_dram_bytes_per_step",
            "candidate_dram_bytes_per_step",
        ):
            setattr(a, attr, getattr(a, attr) + getattr(r, attr))
        a.bytes_complete = a.bytes_complete and r.bytes_complete
        a.saved_unknown = a.saved_unknown or r.saved_unknown
    return sorted(out.values(), key=lambda r: -(r.bytes_avoided_per_step if finite(r.bytes_avoided_per_step) else -1))


def _gemm_table(pairs: list) -> list[dict]:
    agg: dict[tuple, dict] = {}
    for br, cr, how in pairs:
        g = br.gemm
        key = (g.key, str(br.name), str(cr.name), str(br.op_name), str(cr.op_name))
        row = agg.get(key)
        if row is None:
            row = agg[key] = {
                "m": g.m,
                "n": g.n,
                "k": g.k,
                "batch": g.batch,
                "dtype": g.dtype,
                "problem": g.label(),
                "base_kernel": str(br.name),
                "candidate_kernel": str(cr.name),
                "base_op": str(br.op_name),
                "candidate_op": str(cr.op_name),
                "same_kernel": str(br.name) == str(cr.name),
                "count_per_step": 0,
                "base_time_us_per_step": 0.0,
                "candidate_time_us_per_step": 0.0,
                "flops_per_call": g.flops,
                "matched_by": how,
            }
        row["count_per_step"] += 1
        row["base_time_us_per_step"] += float(br.dur_us)
        row["candidate_time_us_per_step"] += float(cr.dur_us)
    for row in agg.values():
        f = row["flops_per_call"] * row["count_per_step"]
        row["base_tflops"] = f / (row["base_time_us_per_step"] * 1e6) if row["base_time_us_per_step"] > 0 else math.nan
        row["candidate_tflops"] = (
            f / (row["candidate_time_us_per_step"] * 1e6) if row["candidate_time_us_per_step"] > 0 else math.nan
        )
        row["time_saved_us_per_step"] = row["base_time_us_per_step"] - row["candidate_time_us_per_step"]
        if row["base_op"] != row["candidate_op"]:
            row["note"] = f"launched by {row['base_op'] or '?'} vs {row['candidate_op'] or '?'}"
    return sorted(agg.values(), key=lambda r: -r["base_time_us_per_step"])
