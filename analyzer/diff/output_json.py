"""The diff as JSON: what `python -m analyzer diff --json` prints, built from the result model
(analyzer.diff.model) and nothing else.

    diff_json(diff)           # the whole object: runs, candidates, the byte rule and what is estimated
    candidate_json(cd)        # one candidate: its headline block, groups, matched and unmatched kernels, accounting
    headline_json(cd)         # the headline block every surface leads with (analyzer.diff.headline decides it)

The model's to_json / headline methods call these; the functions take the model's objects (Diff, CandidateDiff,
FusionRow, RunFacts) and never import that module, which imports this one.
"""

from __future__ import annotations

from analyzer.diff.measures import pct, sub
from analyzer.fmt import clean_json
from analyzer.runmeta import workload_text

CHANGE_PCT_BASIS = (
    "quote headline.change_pct (its figure in headline.basis, its call in headline.verdict). "
    "raw_gpu_time_change_pct compares gpu_time_us_per_step AS RECORDED, not corrected for the GPU's conditions (a "
    "skewed pair can read it with the wrong sign): the sum of GPU op durations per step (median over steady "
    "steps), which leaves out GPU idle time inside the step and counts work on overlapping streams twice; "
    "gpu_busy_change_pct compares GPU busy time (union of GPU op intervals) and span_change_pct the step's GPU span "
    "(first op start to last op end = busy + idle): a run can be busy for less time yet take longer per step"
)

BYTES_RULE = (
    "bytes avoided = for every tensor that one replaced baseline kernel writes to HBM and another replaced baseline "
    "kernel of the same group reads back: its size × (1 write + 1 read per reading kernel). Tensors entering or "
    "leaving the group are still moved by the fused kernel and are not counted; tensors are followed by shape, dtype "
    "and launch order (the trace records no tensor identities)."
)
ESTIMATES = (
    "HBM bytes (avoided, per group, per kernel) are estimates from each launching op's recorded shapes and dtypes, "
    "not hardware counters.",
    "Data flow between kernels is inferred from element counts, dtypes and launch order.",
    "Times are measured kernel durations: per kernel, the median over the steady-state steps that share the "
    "representative step's kernel list; per-step totals are the Summary's medians.",
    "Achieved bandwidth = estimated bytes / measured time.",
)


# The per-step figures every run is compared on, named as in diff --json and Diff.side_by_side (one list for both).
PER_STEP_FIELDS = (
    "kernels_per_step",
    "memops_per_step",
    "launches_per_step",
    "gpu_time_us_per_step",
    "gpu_busy_us_per_step",
    "idle_us_per_step",
    "span_us_per_step",
    "launch_latency_us",
)


def per_step_fields(r) -> dict:
    return {f: getattr(r, f) for f in PER_STEP_FIELDS}


def run_json(r) -> dict:
    """One run (a RunFacts) side by side with the others."""
    return clean_json(
        {
            "label": r.label,
            "source": r.source,
            "facts": r.facts,
            "workload": workload_text(r.facts),
            "steps_used": r.steps_used,
            "steps_with_signature": r.steps_with_signature,
            "step_shown": r.step_shown,
            **per_step_fields(r),
            "kernel_time_us": r.kernel_time_us,
            "by_category": r.by_category,
            "remaining": r.remaining,
            "remaining_round_trip_bytes_per_step": r.remaining_bytes_per_step,
            "remaining_unknown": r.remaining_unknown or None,
            "top_gemm": r.top_gemm,
            "measured_dram_bytes_per_step": r.measured_dram_bytes,
            "measured_warm_dram_bytes_per_step": r.measured_warm_dram_bytes,
            "predicted_dram_bytes_per_step": r.dram_bytes_per_step,
            "predicted_dram_basis": r.dram_basis,
            "dtype": r.dtype,
            "notes": r.notes,
        }
    )


def fusion_row_json(row) -> dict:
    """One fusion group (a FusionRow) with its derived figures."""
    return clean_json(
        {
            "kind": row.kind,
            "fused_kernel": row.fused_kernel,
            "fused_op": row.fused_op,
            "replaces": row.replaces,
            "replaced_ops": row.replaced_ops,
            "ops": row.ops,
            "count_per_step": row.count_per_step,
            "intermediates": row.intermediates,
            "bytes_avoided_per_step": row.bytes_avoided_per_step,
            "bytes_avoided_complete": row.bytes_complete,
            "base_time_us_per_step": row.base_time_us_per_step,
            "candidate_time_us_per_step": row.candidate_time_us_per_step,
            "time_saved_us_per_step": row.time_saved_us_per_step,
            "base_bytes_per_step": row.base_bytes_per_step,
            "candidate_bytes_per_step": row.candidate_bytes_per_step,
            "base_gbps": row.base_gbps,
            "candidate_gbps": row.candidate_gbps,
            "base_flags": row.base_flags,
            "candidate_flags": row.candidate_flags,
            "base_dram_bytes_per_step": row.base_dram_bytes_per_step,
            "candidate_dram_bytes_per_step": row.candidate_dram_bytes_per_step,
            "dram_bytes_avoided_per_step": row.dram_bytes_avoided_per_step,
            "evidence": row.evidence,
            "also_removed": row.also_removed,
            "pattern": row.pattern,
            "phase": row.phase,
            "bytes_note": row.bytes_note,
        }
    )


def headline_json(cd) -> dict:
    """A CandidateDiff's headline block: the one change to quote first, then every per-step figure it rests on."""
    b, c = cd.base, cd.run
    f = cd.factor
    comp = cd.comparability
    sp = cd.spreads()
    return clean_json(
        {
            "headline": cd.quote(sp),
            # what the changed kernels saved leads: drift of the GPU's conditions cannot flip it once normalised
            "changed_kernels_saved_us_per_step": cd.changed_kernels_saved_us_per_step,
            "changed_kernels_saved_normalised_us_per_step": cd.changed_kernels_saved_normalised_us_per_step,
            "changed_kernels_saved_normalised_bounds_us_per_step": (
                cd.changed_kernels_saved_normalised_bounds_us_per_step
            ),
            "changed_kernels_us_per_step": cd.changed_kernels_us_per_step,
            "comparability": comp.verdict if comp is not None else "not checkable",
            "condition_factor": f,
            "kernels_per_step": cd.kernels_per_step,
            "launches_per_step": [b.launches_per_step, c.launches_per_step],
            "gpu_time_us_per_step": cd.gpu_time_us_per_step,
            "raw_gpu_time_change_pct": pct(c.gpu_time_us_per_step, b.gpu_time_us_per_step),
            "normalised_gpu_time_us_per_step": [b.gpu_time_us_per_step, cd.normalised_gpu_time_us_per_step],
            "normalised_gpu_time_change_pct": pct(cd.normalised_gpu_time_us_per_step, b.gpu_time_us_per_step),
            "idle_us_per_step": [b.idle_us_per_step, c.idle_us_per_step],
            "gpu_busy_us_per_step": [b.gpu_busy_us_per_step, c.gpu_busy_us_per_step],
            "gpu_busy_change_pct": pct(c.gpu_busy_us_per_step, b.gpu_busy_us_per_step),
            "span_us_per_step": [b.span_us_per_step, c.span_us_per_step],
            "span_change_pct": pct(c.span_us_per_step, b.span_us_per_step),
            "change_pct_basis": CHANGE_PCT_BASIS,
            "hbm_bytes_avoided_per_step": cd.hbm_bytes_avoided_per_step,
            "hbm_bytes_avoided_complete": cd.bytes_complete,
            "time_saved_us_per_step": cd.time_saved_us_per_step,
            "time_saved_normalised_us_per_step": cd.time_saved_normalised_us_per_step,
            "n_fusions": sum(f.count_per_step for f in cd.fusions),
            "remaining_round_trip_bytes_per_step": c.remaining_bytes_per_step,
            "predicted_dram_bytes_per_step": [b.dram_bytes_per_step, c.dram_bytes_per_step],
            "predicted_dram_bytes_saved_per_step": cd.predicted_dram_bytes_saved_per_step,
            "measured_warm_dram_bytes_per_step": [b.measured_warm_dram_bytes, c.measured_warm_dram_bytes],
            "measured_warm_dram_bytes_saved_per_step": cd.measured_warm_dram_bytes_saved_per_step,
            "measured_dram_bytes_per_step": [b.measured_dram_bytes, c.measured_dram_bytes],
            "measured_dram_bytes_saved_per_step": sub(b.measured_dram_bytes, c.measured_dram_bytes),
            "traffic_avoided": cd.traffic_avoided(),
            "cuda_event_time_us_per_step": [b.facts.get("median_us"), c.facts.get("median_us")],
            "spread": sp,
        }
    )


def candidate_json(cd) -> dict:
    """One CandidateDiff: its headline block, then its groups, kernels, accounting, phases and notes."""
    out = {"label": cd.label, "base_label": cd.base_label, **cd.headline()}
    out["different_work"] = cd.different_work or None  # not two versions of one program, and why
    out["fusions"] = [f.to_json() for f in cd.fusions]
    out["swaps"] = [f.to_json() for f in cd.swaps]
    out["kernel_choices"] = [f.to_json() for f in cd.kernel_choices]
    out["matched_gemms"] = clean_json(cd.matched_gemms)
    out["matched_other"] = clean_json(cd.matched_other)
    out["unmatched"] = clean_json({"base": cd.unmatched_base, "candidate": cd.unmatched_candidate})
    out["time_breakdown"] = clean_json(cd.time_breakdown)
    if cd.accounting is not None:
        out["explained_time_share"] = cd.accounting.explained_time_share
        out["accounting"] = cd.accounting.to_json()
    out["phases"] = clean_json(cd.phases) or None
    out["fusion_patterns"] = clean_json(cd.pattern_summary())
    out["remaining"] = clean_json(cd.run.remaining)
    out["remaining_unknown"] = cd.run.remaining_unknown or None
    comp = cd.comparability.to_json() if cd.comparability is not None else None
    if comp is not None:  # what the runner sampled while each run's steps ran (manifest), beside the factor
        comp["recorded_conditions"] = {
            "base": cd.base.facts.get("conditions"),
            "candidate": cd.run.facts.get("conditions"),
        }
    out["comparability"] = clean_json(comp)
    out["notes"] = cd.notes
    return out


def diff_json(diff) -> dict:
    """The whole Diff: every run, every candidate, the byte rule and what is estimated."""
    out = {
        "base": diff.base.label,
        "labels": diff.labels,
        "runs": [run_json(r) for r in diff.runs],
        "candidates": [c.to_json() for c in diff.candidates],
        "bytes_rule": BYTES_RULE,
        "estimates": list(ESTIMATES),
        "notes": diff.notes,
    }
    if len(diff.candidates) == 1:  # one candidate: its keys at top level too, so a pair reads without indexing
        for k, v in diff.candidates[0].to_json().items():
            out.setdefault(k, v)
    return out
