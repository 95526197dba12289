"""Fusion diff: what candidate runs changed on the GPU against one baseline run, and what it bought.

    diff = diff_runs(base_summary, [cand_summary, ...], labels=["eager", "compile", ...])
    diff.to_json()            # what `python -m analyzer diff --json` prints
    diff.side_by_side()       # one row per run: kernels, launches, GPU time, idle per step
    diff.categories()         # GPU time per step by category, long form (run, category, count, time_us)
    diff.candidates[i]        # CandidateDiff: fusions, swaps, matched GEMMs, unmatched kernels, what is left

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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analyzer.cost import hbm_flags
from analyzer.diff import comparability as comp_
from analyzer.diff.accounting import Accounting, account
from analyzer.diff.align import RunSeq, align, sequence
from analyzer.diff.comparability import Comparability, spread_range
from analyzer.diff.headline import Figure
from analyzer.diff.headline import decide as decide_headline
from analyzer.diff.match import (
    ROUND_TRIP_FIXES,
    Group,
    RoundTrip,
    group_kernels,
    member_bytes,
    remaining_round_trips,
)
from analyzer.dram import device_of, predict_step
from analyzer.errors import DiffError
from analyzer.fmt import (
    clean_json,
    file_label,
    finite,
    fmt_bytes,
    fmt_pct,
    fmt_us,
    fmt_us_spread,
    safe_text,
    short_name,
    unique_label,
)
from analyzer.opinfo import names
from analyzer.opinfo.tensors import shape_text
from analyzer.phases import PHASES, is_training, phase_of_rows, phase_times_us
from analyzer.runmeta import conditions_text, measured_dram_bytes, run_facts, workload_text
from analyzer.schema import CATEGORIES

CHANGE_PCT_BASIS = (
    "quote headline.change_pct (its figure in headline.basis, its call in headline.verdict). "
    "raw_gpu_time_change_pct compares gpu_time_us_per_step AS RECORDED, not corrected for the GPU's conditions (a "
    "skewed pair can read it with the wrong sign): the sum of GPU op durations per step (median over steady "
    "steps), which leaves out GPU idle time inside the step and counts work on overlapping streams twice; "
    "gpu_busy_change_pct compares GPU busy time (union of GPU op intervals) and span_change_pct the step's GPU span "
    "(first op start to last op end = busy + idle): a run can be busy for less time yet take longer per step"
)
# A difference below 0.5% of the baseline's kernel time per step is a tie whatever the step ranges say: two runs'
# steady steps can each be tight (0.05% on the H100) yet differ by a memset's worth of time, which is no finding.
RESOLUTION = 0.005

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


# --- result types -------------------------------------------------------------------------------------------------


@dataclass
class RunFacts:
    """One run, side by side with the others."""

    label: str
    source: str
    facts: dict  # gpu, torch, workload, shapes, dtype, variant, … (analyzer.runmeta.run_facts)
    steps_used: list[int]
    steps_with_signature: list[int]
    step_shown: int
    kernels_per_step: int
    memops_per_step: int
    launches_per_step: float
    gpu_time_us_per_step: float
    gpu_busy_us_per_step: float
    idle_us_per_step: float
    span_us_per_step: float
    launch_latency_us: float
    kernel_time_us: float  # sum of the representative step's per-kernel median durations
    by_category: dict[str, dict]  # category -> {'count', 'time_us'} per step
    remaining: list[dict]  # round trips this run still makes (diff_match.remaining_round_trips)
    top_gemm: str | None = None  # the GEMM problem with the most time, e.g. 'M=8192 N=3072 K=768 bf16'
    dtype: str | None = None  # dtype of most GEMM/pointwise time
    notes: list[str] = field(default_factory=list)
    # predicted DRAM traffic per step (analyzer.dram via the Summary): read + write, and what it rests on
    dram_bytes_per_step: float = float("nan")
    dram_basis: str = ""
    # per steady step (steps_used order): 'gpu_time_us', 'gpu_busy_us', 'idle_us', 'span_us' — the values the
    # medians above are taken over, for their spread
    step_values: dict = field(default_factory=dict)
    # why this run's round trips cannot be listed (e.g. CUDA-graph replays: kernels without op or shapes); '' = known
    remaining_unknown: str = ""

    def step_range(self, key: str) -> list[float] | None:
        """[low, high] of a per-step figure over the steady steps (min–max; p10–p90 from 10 steps on), or None."""
        return _range_or_none(self.step_values.get(key))

    @property
    def gpu(self) -> str | None:
        return self.facts.get("gpu")

    @property
    def measured_dram_bytes(self) -> float | None:
        """Nsight Compute DRAM bytes read + written in one step with its default cache flush (runner manifest)."""
        return measured_dram_bytes(self.facts)

    @property
    def measured_warm_dram_bytes(self) -> float | None:
        """Nsight Compute DRAM bytes of one step in sequence (`--cache-control none`), or None."""
        return measured_dram_bytes(self.facts, warm=True)

    @property
    def remaining_bytes_per_step(self) -> float:
        if self.remaining_unknown:
            return float("nan")  # unknown is never 0
        return float(sum(r["round_trip_bytes"] for r in self.remaining if finite(r["round_trip_bytes"])))


@dataclass
class FusionRow:
    """One fusion group (or several identical ones in a step, count_per_step of them)."""

    kind: str  # 'fusion' (n baseline kernels -> 1) | 'swap' (1 -> 1) | 'kernel choice' (same op, other kernels)
    fused_kernel: str  # the new kernel (' + '-joined when a kernel choice runs several)
    fused_op: str
    replaces: list[str]  # baseline kernel names, in baseline order
    replaced_ops: list[str]  # their launching ops
    ops: list[str]  # canonical ops the replaced kernels computed
    count_per_step: int
    intermediates: list[dict]  # shape, matrix, dtype, bytes (one tensor), reads, round_trip_bytes, producer, readers
    bytes_avoided_per_step: float
    bytes_complete: bool
    base_time_us_per_step: float
    candidate_time_us_per_step: float
    base_bytes_per_step: float  # estimated traffic of the replaced kernels
    candidate_bytes_per_step: float  # the fused kernel's own estimate (analyzer.cost, as in summary)
    evidence: list[str]
    also_removed: list[str] = field(default_factory=list)  # memsets / helper kernels of the replaced op calls
    pattern: str = ""  # what the group computes: 'attention (…)', 'RMSNorm', 'RoPE', 'GEGLU gating', … or ''
    phase: str = "forward"  # forward | backward | optimizer: where in a training step its replaced kernels ran
    bytes_note: str = ""  # how bytes_avoided_per_step adds up, tensor by tensor
    # PREDICTED DRAM traffic (analyzer.dram, in sequence) of the replaced kernels and of the replacing kernel(s)
    base_dram_bytes_per_step: float = float("nan")
    candidate_dram_bytes_per_step: float = float("nan")
    # plain-words warnings about the figures (analyzer.cost.hbm_flags: a rate above the run's HBM peak)
    base_flags: list[str] = field(default_factory=list)
    candidate_flags: list[str] = field(default_factory=list)
    # one kernel on a side: its GB/s as the Summary's kernel table states it (what summary, Kernels, Roofline show);
    # several: NaN, and the side's GB/s is its bytes over its time in the representative step
    base_kernel_gbps: float = float("nan")
    candidate_kernel_gbps: float = float("nan")

    @property
    def dram_bytes_avoided_per_step(self) -> float:
        """Predicted DRAM traffic of the replaced kernels minus the replacing one's: the logical
        bytes_avoided_per_step less what stayed in L2 anyway, plus write-backs that moved between kernels."""
        return self.base_dram_bytes_per_step - self.candidate_dram_bytes_per_step

    @property
    def time_saved_us_per_step(self) -> float:
        return self.base_time_us_per_step - self.candidate_time_us_per_step

    @property
    def base_gbps(self) -> float:
        if finite(self.base_kernel_gbps):
            return self.base_kernel_gbps
        return _gbps(self.base_bytes_per_step, self.base_time_us_per_step)

    @property
    def candidate_gbps(self) -> float:
        if finite(self.candidate_kernel_gbps):
            return self.candidate_kernel_gbps
        return _gbps(self.candidate_bytes_per_step, self.candidate_time_us_per_step)

    def to_json(self) -> dict:
        return clean_json(
            {
                "kind": self.kind,
                "fused_kernel": self.fused_kernel,
                "fused_op": self.fused_op,
                "replaces": self.replaces,
                "replaced_ops": self.replaced_ops,
                "ops": self.ops,
                "count_per_step": self.count_per_step,
                "intermediates": self.intermediates,
                "bytes_avoided_per_step": self.bytes_avoided_per_step,
                "bytes_avoided_complete": self.bytes_complete,
                "base_time_us_per_step": self.base_time_us_per_step,
                "candidate_time_us_per_step": self.candidate_time_us_per_step,
                "time_saved_us_per_step": self.time_saved_us_per_step,
                "base_bytes_per_step": self.base_bytes_per_step,
                "candidate_bytes_per_step": self.candidate_bytes_per_step,
                "base_gbps": self.base_gbps,
                "candidate_gbps": self.candidate_gbps,
                "base_flags": self.base_flags,
                "candidate_flags": self.candidate_flags,
                "base_dram_bytes_per_step": self.base_dram_bytes_per_step,
                "candidate_dram_bytes_per_step": self.candidate_dram_bytes_per_step,
                "dram_bytes_avoided_per_step": self.dram_bytes_avoided_per_step,
                "evidence": self.evidence,
                "also_removed": self.also_removed,
                "pattern": self.pattern,
                "phase": self.phase,
                "bytes_note": self.bytes_note,
            }
        )


@dataclass
class CandidateDiff:
    label: str
    base_label: str
    base: RunFacts
    run: RunFacts
    fusions: list[FusionRow]
    swaps: list[FusionRow]
    kernel_choices: list[FusionRow]  # same op and shapes on both sides, other kernels (no bytes avoided by rule)
    matched_gemms: list[dict]
    matched_other: dict  # {'count', 'base_time_us', 'candidate_time_us'} per step, non-GEMM kernels paired as equal
    unmatched_base: list[dict]
    unmatched_candidate: list[dict]
    time_breakdown: dict  # how the representative step's kernel time changed; sums exactly
    notes: list[str] = field(default_factory=list)
    # every GPU op of both steps in one bucket (analyzer.diff.accounting); None: not computed
    accounting: Accounting | None = None
    # a training step's GPU time per phase (analyzer.phases): {phase: {base_us, candidate_us, saved_us,
    # fusions_saved_us}}; empty for inference (every kernel forward) on both sides
    phases: dict = field(default_factory=dict)
    # were both runs recorded under the same GPU conditions (analyzer.diff.comparability); None: not computed
    comparability: Comparability | None = None
    # kernel time per step outside the control group (what the candidate changed): [base, candidate]
    changed_kernels_us_per_step: list[float] = field(default_factory=lambda: [math.nan, math.nan])
    # [low, high] over steps of per-step figures no RunFacts holds: 'changed_base', 'changed_candidate',
    # 'fusion_base', 'fusion_candidate' (kernel time of the replaced / replacing kernels)
    step_ranges: dict = field(default_factory=dict)
    # the candidate at the baseline's conditions (comparability.candidate_factors): 'effective_factor' (raw /
    # normalised kernel time of its representative step), 'changed_candidate_us' and 'fusion_candidate_us'
    # [point, other assumption]; empty when not checkable
    normalised: dict = field(default_factory=dict)

    def pattern_summary(self) -> list[dict]:
        """The fusion groups by what they compute and where (pattern, phase): how many groups per step, the bytes
        they avoided and the time they saved, most time saved first. What a reviewer reads first on a whole model
        (a 16-layer training pair has ~100 groups; these are ~15 rows). Groups with no pattern are 'other fusions'."""
        agg: dict[tuple[str, str], dict] = {}
        for f in self.fusions:
            key = (f.pattern or "other fusions", f.phase)
            a = agg.setdefault(
                key,
                {"pattern": key[0], "phase": key[1], "groups_per_step": 0, "bytes_avoided_per_step": 0.0,
                 "bytes_complete": True, "base_time_us_per_step": 0.0, "time_saved_us_per_step": 0.0},
            )  # fmt: skip
            a["groups_per_step"] += f.count_per_step
            a["known"] = a.get("known", False) or finite(f.bytes_avoided_per_step)
            if finite(f.bytes_avoided_per_step):
                a["bytes_avoided_per_step"] += f.bytes_avoided_per_step
            a["bytes_complete"] = a["bytes_complete"] and f.bytes_complete and finite(f.bytes_avoided_per_step)
            a["base_time_us_per_step"] += f.base_time_us_per_step
            a["time_saved_us_per_step"] += f.time_saved_us_per_step
        for a in agg.values():  # no group of the pattern has a byte figure (an optimizer step): unknown, not 0
            if not a.pop("known"):
                a["bytes_avoided_per_step"] = float("nan")
        return sorted(agg.values(), key=lambda a: -a["time_saved_us_per_step"])

    def phases_text(self) -> str:
        """A training step's time per phase, base → candidate, and what fusion saved in each ('' for inference)."""
        if not self.phases:
            return ""
        parts = [
            f"{p} {fmt_us(v['base_us'])} → {fmt_us(v['candidate_us'])} (fusions saved {fmt_us(v['fusions_saved_us'])})"
            for p, v in self.phases.items()
            if v["base_us"] or v["candidate_us"]
        ]
        return "phases: " + " · ".join(parts)

    @property
    def factor(self) -> float | None:
        """Condition factor: candidate / baseline time of the kernels identical in both runs (None: not checkable)."""
        return self.comparability.factor if self.comparability is not None else None

    @property
    def changed_kernels_saved_us_per_step(self) -> float:
        """Kernel time per step the candidate's changed kernels saved (raw: as recorded)."""
        b, c = self.changed_kernels_us_per_step
        return b - c

    @property
    def changed_kernels_saved_normalised_us_per_step(self) -> float | None:
        """The same with each candidate kernel's time divided by its class's condition factor (None when not
        checkable; analyzer.diff.comparability)."""
        n = self.normalised.get("changed_candidate_us")
        return None if n is None else self.changed_kernels_us_per_step[0] - n[0]

    @property
    def changed_kernels_saved_normalised_bounds_us_per_step(self) -> list[float] | None:
        """[low, high] of the normalised saving under both assumptions for a kernel class without control kernels
        (equal when every class had some)."""
        n = self.normalised.get("changed_candidate_us")
        return None if n is None else sorted(self.changed_kernels_us_per_step[0] - x for x in n)

    @property
    def time_saved_normalised_us_per_step(self) -> float | None:
        n = self.normalised.get("fusion_candidate_us")
        if n is None:
            return None
        return float(sum(x.base_time_us_per_step for x in self.fusions + self.swaps)) - n[0]

    @property
    def normalised_gpu_time_us_per_step(self) -> float | None:
        """The candidate's GPU time per step at the baseline's conditions: its median divided by the effective
        factor of its kernels (raw kernel time / normalised kernel time of the representative step)."""
        eff = self.normalised.get("effective_factor")
        return None if eff is None else _div(self.run.gpu_time_us_per_step, eff)

    @property
    def hbm_bytes_avoided_per_step(self) -> float:
        return float(sum(f.bytes_avoided_per_step for f in self.fusions if finite(f.bytes_avoided_per_step)))

    @property
    def bytes_complete(self) -> bool:
        return all(f.bytes_complete and finite(f.bytes_avoided_per_step) for f in self.fusions)

    @property
    def predicted_dram_bytes_saved_per_step(self) -> float:
        """Predicted DRAM traffic per step, baseline minus candidate (analyzer.dram on each run's steady step)."""
        return self.base.dram_bytes_per_step - self.run.dram_bytes_per_step

    @property
    def measured_warm_dram_bytes_saved_per_step(self) -> float | None:
        return _sub(self.base.measured_warm_dram_bytes, self.run.measured_warm_dram_bytes)

    def traffic_avoided(self) -> dict:
        """The bytes a fusion saves, three ways and named apart: logical (the intermediates' round trips, as if
        none stayed on chip), predicted DRAM (the L2-aware model, step against step) and measured DRAM (Nsight
        Compute in sequence, when the runner recorded it). `text` is the one sentence every surface shows."""
        logical = self.hbm_bytes_avoided_per_step
        dram = self.predicted_dram_bytes_saved_per_step
        measured = self.measured_warm_dram_bytes_saved_per_step
        parts = [f"{fmt_bytes(logical)} logical" + ("" if self.bytes_complete else " (at least)")]
        if finite(dram):
            why = ""
            if finite(logical) and logical > 0 and dram < 0.97 * logical:
                why = " (part of what the fusion avoids stayed in L2 in the baseline anyway)"
            elif finite(logical) and logical > 0 and dram > 1.03 * logical:
                why = " (the candidate also finds more of its inputs still in L2)"
            elif finite(logical) and logical > 0:
                why = " (streamed in order, the baseline's intermediates left L2 before they were read back)"
            if dram < 0:  # a candidate that moves more than its baseline (e.g. the diff taken the other way round)
                parts.append(f"none predicted: ≈{fmt_bytes(-dram)} MORE DRAM traffic than {self.base.label}")
            else:
                parts.append(f"≈{fmt_bytes(dram)} DRAM predicted{why}")
        else:
            why = [f"{r.label}: {r.dram_basis}" for r in (self.base, self.run) if not finite(r.dram_bytes_per_step)]
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
                    "predicted": self.base.dram_basis or "unknown",
                    "measured": "ncu --cache-control none over steady-state steps in a row (docs/KERNELS.md)",
                },
            }
        )

    @property
    def time_saved_us_per_step(self) -> float:
        """By the fusion groups and swaps only (kernel durations of replaced vs replacing kernels)."""
        return float(sum(f.time_saved_us_per_step for f in self.fusions + self.swaps))

    @property
    def kernels_per_step(self) -> list[int]:
        return [self.base.kernels_per_step, self.run.kernels_per_step]

    @property
    def gpu_time_us_per_step(self) -> list[float]:
        return [self.base.gpu_time_us_per_step, self.run.gpu_time_us_per_step]

    def spreads(self) -> dict:
        """[low, high] over the profiled steps of every headline time (min–max; p10–p90 from 10 steps on; CUDA
        events: the runner's p10–p90), and for each change its call: 'faster' / 'slower' when the ranges of the two
        runs do not overlap, else 'tie' (the difference is within the step-to-step spread)."""
        b, c, sr = self.base, self.run, self.step_ranges
        eff = self.normalised.get("effective_factor")
        floor = RESOLUTION * b.kernel_time_us if finite(b.kernel_time_us) else 0.0
        out: dict = {"steps": [len(b.steps_used), len(c.steps_used)]}
        calls: dict = {}
        for key, name in (
            ("gpu_time_us", "gpu_time_us_per_step"),
            ("idle_us", "idle_us_per_step"),
            ("gpu_busy_us", "gpu_busy_us_per_step"),
            ("span_us", "span_us_per_step"),
        ):
            rb, rc = b.step_range(key), c.step_range(key)
            out[name] = [rb, rc]
            if key in ("gpu_busy_us", "span_us"):
                calls[key.removesuffix("_us")] = _call(_saved_range(rb, rc), floor)
            if key == "gpu_time_us":
                calls["gpu_time"] = _call(_saved_range(rb, rc), floor)
                if eff is not None:
                    er = self.normalised.get("effective_factor_range") or [eff, eff]
                    rn = [rc[0] / er[1], rc[1] / er[0]] if rc else None  # the factor's uncertainty widens it
                    out["normalised_gpu_time_us_per_step"] = [rb, rn]
                    calls["gpu_time_normalised"] = _call(_saved_range(rb, rn), floor)
        for what, kb, kc in (
            ("changed_kernels", "changed_base", "changed_candidate"),
            ("fusions", "fusion_base", "fusion_candidate"),
        ):
            rb, rc = sr.get(kb), sr.get(kc)
            name = "changed_kernels_saved_us_per_step" if what == "changed_kernels" else "time_saved_us_per_step"
            out[name] = _saved_range(rb, rc)
            calls[what] = _call(out[name], floor)
            rn = sr.get(kc + "_normalised")
            if rn is not None:
                out[name.replace("saved_us", "saved_normalised_us")] = _saved_range(rb, rn)
                calls[what + "_normalised"] = _call(out[name.replace("saved_us", "saved_normalised_us")], floor)
        ev = [_event_range(b.facts), _event_range(c.facts)]
        if ev[0] and ev[1]:
            out["cuda_event_time_us_per_step"] = ev
            calls["cuda_events"] = _call(_saved_range(*ev))
        out["calls"] = calls
        return out

    def step_times_text(self) -> str:
        """GPU busy time, step span and idle per step, base → candidate, each median with its spread over the
        steady steps, and the busy and span changes with their call: the same line in the CLI and the report."""
        b, c, h = self.base, self.run, self.headline()
        calls = (h.get("spread") or {}).get("calls") or {}

        def change(pct_key: str, call_key: str) -> str:
            word, pct = str(calls.get(call_key) or ""), h.get(pct_key)
            if finite(pct) and word.split(" ")[0] in ("faster", "slower"):  # the word carries the sign
                return f"{abs(float(pct)):,.1f}% {word}"
            return " ".join(x for x in (fmt_pct(pct), word) if x)

        def side(run, value: float, key: str) -> str:
            return fmt_us_spread(value, run.step_range(key))

        return (
            f"GPU busy/step {side(b, b.gpu_busy_us_per_step, 'gpu_busy_us')} → "
            f"{side(c, c.gpu_busy_us_per_step, 'gpu_busy_us')} ({change('gpu_busy_change_pct', 'gpu_busy')}) · "
            f"step span {side(b, b.span_us_per_step, 'span_us')} → {side(c, c.span_us_per_step, 'span_us')} "
            f"({change('span_change_pct', 'span')}) · idle {side(b, b.idle_us_per_step, 'idle_us')} → "
            f"{side(c, c.idle_us_per_step, 'idle_us')}"
        )

    def lead_lines(self) -> list[str]:
        """The first lines of every view of this candidate (CLI, report card, Compare): the GPU conditions'
        verdict, then what the changed kernels saved (normalised when a factor is known), each with its spread."""
        comp = self.comparability
        sp = self.spreads()
        calls = sp["calls"]
        n = " and ".join(dict.fromkeys(str(x) for x in sp["steps"]))
        verdict = comp.verdict if comp is not None else "not checkable"
        cond = f"conditions: {verdict.upper() if verdict == 'skewed' else verdict} — " + (
            comp.reason if comp is not None else "no control group"
        )
        rec = [conditions_text(r.facts.get("conditions")) for r in (self.base, self.run)]
        if rec[0] or rec[1]:
            cond += (
                f"; runner's record while profiled: {self.base_label} {rec[0] or 'not recorded'}, "
                f"{self.label} {rec[1] or 'not recorded'}"
            )
        raw = self.changed_kernels_saved_us_per_step
        norm = self.changed_kernels_saved_normalised_us_per_step
        rng = sp.get("changed_kernels_saved_us_per_step")
        if norm is not None:
            nr = sp.get("changed_kernels_saved_normalised_us_per_step")
            saved = (
                f"changed kernels {_saved_text(norm)}/step at equal conditions ({_range_text(nr)} over {n} steps: "
                f"{_call_text(calls.get('changed_kernels_normalised'))}; as recorded: {_saved_text(raw)})"
            )
        else:
            saved = (
                f"changed kernels {_saved_text(raw)}/step as recorded ({_range_text(rng)} over {n} steps: "
                f"{_call_text(calls.get('changed_kernels'))}; not normalised: "
                + (
                    "only kernels in another context to check"
                    if comp is not None and comp.factor
                    else "no control group"
                )
                + ")"
            )
        return [cond, saved]

    def quote(self, sp: dict | None = None) -> dict:
        """The one change to quote (analyzer.diff.headline): {change_pct, basis, verdict, reason, …}; every surface
        leads with it. sp: self.spreads(), when the caller has it."""
        b, c = self.base, self.run
        sp = self.spreads() if sp is None else sp
        calls = sp.get("calls") or {}

        def fig(us, key, call):
            return Figure(tuple(us), tuple(sp.get(key) or (None, None)), calls.get(call))

        return decide_headline(
            events=fig(
                [b.facts.get("median_us"), c.facts.get("median_us")], "cuda_event_time_us_per_step", "cuda_events"
            ),
            normalised=fig(
                [b.gpu_time_us_per_step, self.normalised_gpu_time_us_per_step],
                "normalised_gpu_time_us_per_step",
                "gpu_time_normalised",
            ),
            raw=fig(self.gpu_time_us_per_step, "gpu_time_us_per_step", "gpu_time"),
            idle=fig([b.idle_us_per_step, c.idle_us_per_step], "idle_us_per_step", ""),
            span=fig([b.span_us_per_step, c.span_us_per_step], "span_us_per_step", "span"),
            comparability=self.comparability,
            labels=(self.base_label, self.label),
        ).to_json()

    def headline(self) -> dict:
        b, c = self.base, self.run
        f = self.factor
        comp = self.comparability
        sp = self.spreads()
        return clean_json(
            {
                "headline": self.quote(sp),
                # what the changed kernels saved leads: drift of the GPU's conditions cannot flip it once normalised
                "changed_kernels_saved_us_per_step": self.changed_kernels_saved_us_per_step,
                "changed_kernels_saved_normalised_us_per_step": self.changed_kernels_saved_normalised_us_per_step,
                "changed_kernels_saved_normalised_bounds_us_per_step": (
                    self.changed_kernels_saved_normalised_bounds_us_per_step
                ),
                "changed_kernels_us_per_step": self.changed_kernels_us_per_step,
                "comparability": comp.verdict if comp is not None else "not checkable",
                "condition_factor": f,
                "kernels_per_step": self.kernels_per_step,
                "launches_per_step": [b.launches_per_step, c.launches_per_step],
                "gpu_time_us_per_step": self.gpu_time_us_per_step,
                "raw_gpu_time_change_pct": _pct(c.gpu_time_us_per_step, b.gpu_time_us_per_step),
                "normalised_gpu_time_us_per_step": [b.gpu_time_us_per_step, self.normalised_gpu_time_us_per_step],
                "normalised_gpu_time_change_pct": _pct(self.normalised_gpu_time_us_per_step, b.gpu_time_us_per_step),
                "idle_us_per_step": [b.idle_us_per_step, c.idle_us_per_step],
                "gpu_busy_us_per_step": [b.gpu_busy_us_per_step, c.gpu_busy_us_per_step],
                "gpu_busy_change_pct": _pct(c.gpu_busy_us_per_step, b.gpu_busy_us_per_step),
                "span_us_per_step": [b.span_us_per_step, c.span_us_per_step],
                "span_change_pct": _pct(c.span_us_per_step, b.span_us_per_step),
                "change_pct_basis": CHANGE_PCT_BASIS,
                "hbm_bytes_avoided_per_step": self.hbm_bytes_avoided_per_step,
                "hbm_bytes_avoided_complete": self.bytes_complete,
                "time_saved_us_per_step": self.time_saved_us_per_step,
                "time_saved_normalised_us_per_step": self.time_saved_normalised_us_per_step,
                "n_fusions": sum(f.count_per_step for f in self.fusions),
                "remaining_round_trip_bytes_per_step": c.remaining_bytes_per_step,
                "predicted_dram_bytes_per_step": [b.dram_bytes_per_step, c.dram_bytes_per_step],
                "predicted_dram_bytes_saved_per_step": self.predicted_dram_bytes_saved_per_step,
                "measured_warm_dram_bytes_per_step": [b.measured_warm_dram_bytes, c.measured_warm_dram_bytes],
                "measured_warm_dram_bytes_saved_per_step": self.measured_warm_dram_bytes_saved_per_step,
                "measured_dram_bytes_per_step": [b.measured_dram_bytes, c.measured_dram_bytes],
                "measured_dram_bytes_saved_per_step": _sub(b.measured_dram_bytes, c.measured_dram_bytes),
                "traffic_avoided": self.traffic_avoided(),
                "cuda_event_time_us_per_step": [b.facts.get("median_us"), c.facts.get("median_us")],
                "spread": sp,
            }
        )

    def to_json(self) -> dict:
        out = {"label": self.label, "base_label": self.base_label, **self.headline()}
        out["fusions"] = [f.to_json() for f in self.fusions]
        out["swaps"] = [f.to_json() for f in self.swaps]
        out["kernel_choices"] = [f.to_json() for f in self.kernel_choices]
        out["matched_gemms"] = clean_json(self.matched_gemms)
        out["matched_other"] = clean_json(self.matched_other)
        out["unmatched"] = clean_json({"base": self.unmatched_base, "candidate": self.unmatched_candidate})
        out["time_breakdown"] = clean_json(self.time_breakdown)
        if self.accounting is not None:
            out["explained_time_share"] = self.accounting.explained_time_share
            out["accounting"] = self.accounting.to_json()
        out["phases"] = clean_json(self.phases) or None
        out["fusion_patterns"] = clean_json(self.pattern_summary())
        out["remaining"] = clean_json(self.run.remaining)
        out["remaining_unknown"] = self.run.remaining_unknown or None
        comp = self.comparability.to_json() if self.comparability is not None else None
        if comp is not None:  # what the runner sampled while each run's steps ran (manifest), beside the factor
            comp["recorded_conditions"] = {
                "base": self.base.facts.get("conditions"),
                "candidate": self.run.facts.get("conditions"),
            }
        out["comparability"] = clean_json(comp)
        out["notes"] = self.notes
        return out


@dataclass
class Diff:
    base: RunFacts
    runs: list[RunFacts]  # base first, then the candidates in the order given
    candidates: list[CandidateDiff]
    notes: list[str] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.runs]

    def candidate(self, label: str) -> CandidateDiff:
        for c in self.candidates:
            if c.label == label:
                return c
        raise KeyError(label)

    def side_by_side(self) -> pd.DataFrame:
        """One row per run (base first): the per-step figures every run is compared on."""
        rows = []
        for r in self.runs:
            rows.append(
                {
                    "run": r.label,
                    "gpu": r.gpu or "",
                    **_per_step_fields(r),
                    "remaining_round_trip_bytes_per_step": r.remaining_bytes_per_step,
                    "steps_used": len(r.steps_used),
                }
            )
        return pd.DataFrame(rows)

    def categories(self) -> pd.DataFrame:
        """GPU time per step by category, long form: run, category, count, time_us (categories in schema order)."""
        rows = []
        for r in self.runs:
            for cat in _ordered_categories(self.runs):
                v = r.by_category.get(cat)
                if v is None:
                    continue
                rows.append({"run": r.label, "category": cat, "count": v["count"], "time_us": v["time_us"]})
        return pd.DataFrame(rows, columns=["run", "category", "count", "time_us"])

    def to_json(self) -> dict:
        out = {
            "base": self.base.label,
            "labels": self.labels,
            "runs": [_run_json(r) for r in self.runs],
            "candidates": [c.to_json() for c in self.candidates],
            "bytes_rule": BYTES_RULE,
            "estimates": list(ESTIMATES),
            "notes": self.notes,
        }
        if len(self.candidates) == 1:  # one candidate: its keys at top level too (issue 3, item 5)
            for k, v in self.candidates[0].to_json().items():
                out.setdefault(k, v)
        return out


# --- building it --------------------------------------------------------------------------------------------------


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
    remaining = _aggregate_round_trips([_round_trip_json(seq, r, gbps) for r in remaining_round_trips(seq)])
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
    b, c = bseq.rows, cseq.rows
    al = align(b, c)
    res = group_kernels(bseq, cseq, al)
    b_rows = bseq.records
    c_rows = cseq.records

    b_dram = bseq.rows["dram_bytes"].to_numpy(dtype=float) if "dram_bytes" in bseq.rows else None
    c_dram = cseq.rows["dram_bytes"].to_numpy(dtype=float) if "dram_bytes" in cseq.rows else None
    b_phase, c_phase = phase_of_rows(b), phase_of_rows(c)
    groups = [_group_row(g, b_rows, c_rows, b_dram, c_dram) for g in res.groups]
    for g, row in zip(res.groups, groups, strict=True):
        row.phase = str(b_phase[g.members[0]]) if g.members else "forward"
    fusions = _aggregate([r for r in groups if r.kind == "fusion"])
    swaps = _aggregate([r for r in groups if r.kind == "swap"])
    choices = _aggregate([r for r in groups if r.kind == "kernel choice"])

    gemm_rows, other = [], {"count": 0, "base_time_us": 0.0, "candidate_time_us": 0.0}
    for bi, cj, how in res.pairs:
        br, cr = b_rows[bi], c_rows[cj]
        if br.gemm is not None and cr.gemm is not None:
            gemm_rows.append((br, cr, how))
        else:
            other["count"] += 1
            other["base_time_us"] += float(br.dur_us)
            other["candidate_time_us"] += float(cr.dur_us)
    matched_gemms = _gemm_table(gemm_rows)

    unmatched_base = _kernel_list([b_rows[i] for i in res.unmatched_b])
    unmatched_cand = _kernel_list([c_rows[j] for j in res.unmatched_c])

    repl = [g for g in res.groups if g.kind != "kernel choice"]
    choice = [g for g in res.groups if g.kind == "kernel choice"]
    fused_base = sum(float(b_rows[m].dur_us) for g in repl for m in g.members + g.side)
    fused_cand = sum(float(c_rows[j].dur_us) for g in repl for j in g.fused)
    choice_base = sum(float(b_rows[m].dur_us) for g in choice for m in g.members)
    choice_cand = sum(float(c_rows[j].dur_us) for g in choice for j in g.fused)
    gemm_base = sum(float(x[0].dur_us) for x in gemm_rows)
    gemm_cand = sum(float(x[1].dur_us) for x in gemm_rows)
    removed = sum(float(b_rows[i].dur_us) for i in res.unmatched_b)
    added = sum(float(c_rows[j].dur_us) for j in res.unmatched_c)
    breakdown = {
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
    notes = [f"{cseq.label}: {n}" for n in cseq.notes] + [f"{bseq.label}: {n}" for n in bseq.notes]
    acct = account(bseq, cseq, res, _kernel_list)
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
    if not acct.reliable and len(b_rows) >= 10:
        notes.append(
            f"only {acct.explained_time_share:.0%} of {bseq.label}'s GPU time per step is matched, fused, replaced or"
            f" removed in {cseq.label}: these runs may not run the same model or shapes, so fusion groups and bytes"
            " avoided are unreliable (the unexplained kernels are listed)"
        )
    if any(not f.bytes_complete for f in fusions):
        notes.append("some fusion groups have kernels without recorded shapes: their bytes avoided are lower bounds")
    comp = comp_.check(bseq, cseq, probes=(brun.facts.get("control_probe"), crun.facts.get("control_probe")))
    notes += [f"GPU conditions: {n}" for n in comp.notes]
    wb, wc = comp.control_weight
    wb = np.zeros(len(b)) if wb is None else wb
    wc = np.zeros(len(c)) if wc is None else wc
    changed = [
        float(b["dur_us"].to_numpy(float) @ (1.0 - wb)),
        float(c["dur_us"].to_numpy(float) @ (1.0 - wc)),
    ]
    fb, fc = np.zeros(len(b)), np.zeros(len(c))
    fb[[m for g in repl for m in g.members + g.side]] = 1.0
    fc[[j for g in repl for j in g.fused]] = 1.0
    phases: dict = {}
    if is_training(b_phase) or is_training(c_phase):
        bt, ct = phase_times_us(b, b_phase), phase_times_us(c, c_phase)
        # what the fusion groups saved in each phase, member by member (a compiled loss kernel recomputes the
        # forward log_softmax inside the backward: its group spans both phases)
        bdur, cdur = b["dur_us"].to_numpy(float), c["dur_us"].to_numpy(float)
        for p in PHASES:
            saved = float(bdur[(fb > 0) & (b_phase == p)].sum() - cdur[(fc > 0) & (c_phase == p)].sum())
            phases[p] = {
                "base_us": bt[p],
                "candidate_us": ct[p],
                "saved_us": bt[p] - ct[p],
                "fusions_saved_us": saved,
            }
    step_ranges = {
        "changed_base": _range_or_none(comp_.per_step_us(bseq, 1.0 - wb)),
        "changed_candidate": _range_or_none(comp_.per_step_us(cseq, 1.0 - wc)),
        "fusion_base": _range_or_none(comp_.per_step_us(bseq, fb)),
        "fusion_candidate": _range_or_none(comp_.per_step_us(cseq, fc)),
    }
    normalised: dict = {}
    fp, fo = comp.candidate_factors
    if fp is not None:
        cdur = c["dur_us"].to_numpy(float)
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
        for key, w in (("changed_candidate", 1.0 - wc), ("fusion_candidate", fc)):
            a = _range_or_none(comp_.per_step_us(cseq, w / fhi))
            z = _range_or_none(comp_.per_step_us(cseq, w / flo))
            step_ranges[key + "_normalised"] = [a[0], z[1]] if a and z else None
        raw_total = float(cdur.sum())
        normalised["effective_factor_range"] = sorted(
            [
                raw_total / float(cdur @ (1.0 / fhi)),
                raw_total / float(cdur @ (1.0 / flo)),
            ]
        )
    return CandidateDiff(
        label=cseq.label,
        base_label=bseq.label,
        base=brun,
        run=crun,
        fusions=fusions,
        swaps=swaps,
        kernel_choices=choices,
        matched_gemms=matched_gemms,
        matched_other=other,
        unmatched_base=unmatched_base,
        unmatched_candidate=unmatched_cand,
        time_breakdown=breakdown,
        notes=notes,
        accounting=acct,
        phases=phases,
        comparability=comp,
        changed_kernels_us_per_step=changed,
        step_ranges=step_ranges,
        normalised=normalised,
    )


def _group_row(g: Group, b_rows: list, c_rows: list, b_dram=None, c_dram=None) -> FusionRow:
    fr = [c_rows[j] for j in g.fused]
    members = [b_rows[m] for m in g.members]
    ops: list[str] = []
    for m in members:
        for o in sorted(m.op_ops or m.name_ops):
            if o not in ops:
                ops.append(o)
    inter = []
    for it in g.intermediates:
        t = it.tensor
        inter.append(
            {
                "shape": list(t.shape),
                "matrix": t.matrix(),
                "dtype": t.dtype,
                "bytes": t.nbytes,
                "reads": len(it.consumers),
                "round_trip_bytes": it.round_trip_bytes,
                "producer": b_rows[it.producer].name,
                "producer_op": b_rows[it.producer].op_name,
                "readers": [b_rows[x].name for x in it.consumers],
            }
        )
    base_bytes = sum(member_bytes(m) for m in members)
    avoided = g.bytes_avoided if g.bytes_complete or g.intermediates else float("nan")
    attention = any(r.attn is not None for r in fr)
    backward = bool(members) and all(m.node >= 0 for m in members)
    pattern = names.fusion_pattern(ops, attention, backward) if g.kind == "fusion" else ""
    first = members[0] if members else None
    if pattern.endswith("Norm") and first is not None and names.op_base(first.op_name) == "add":
        out = first.io.output
        if out is not None and out.dtype in ("bf16", "fp16"):  # the norm's own eps add is fp32 [.., 1]
            pattern += " + residual add"
    cand_bytes = sum(member_bytes(r) for r in fr)  # the fused kernel's own estimate: what summary shows for it
    return FusionRow(
        kind=g.kind,
        fused_kernel=" + ".join(str(r.name) for r in fr),
        fused_op=str(fr[0].op_name or ""),
        replaces=[str(m.name) for m in members],
        replaced_ops=[str(m.op_name or "") for m in members],
        ops=ops,
        count_per_step=1,
        intermediates=inter,
        bytes_avoided_per_step=avoided,
        bytes_complete=g.bytes_complete,
        base_time_us_per_step=sum(float(m.dur_us) for m in members) + sum(float(b_rows[i].dur_us) for i in g.side),
        also_removed=[str(b_rows[i].name) for i in g.side],
        candidate_time_us_per_step=sum(float(r.dur_us) for r in fr),
        base_bytes_per_step=base_bytes,
        candidate_bytes_per_step=cand_bytes,
        evidence=[f"{short_name(b_rows[m].name)}: {g.evidence.get(m, '')}" for m in g.members],
        pattern=pattern,
        bytes_note=_bytes_note(g, attention),
        base_dram_bytes_per_step=float(b_dram[[*g.members, *g.side]].sum()) if b_dram is not None else float("nan"),
        candidate_dram_bytes_per_step=float(c_dram[g.fused].sum()) if c_dram is not None else float("nan"),
        base_kernel_gbps=float(members[0].kernel_gbps) if len(members) == 1 and not g.side else float("nan"),
        candidate_kernel_gbps=float(fr[0].kernel_gbps) if len(fr) == 1 else float("nan"),
    )


def _bytes_note(g: Group, attention: bool) -> str:
    """bytes avoided spelled out: each kind of intermediate (element count, dtype, readers), its size and count,
    e.g. '4 × [8,2048,2048] bf16 67,108,864 B × (1 write + 1 read) + … = 1,090,519,040 B'."""
    if not g.intermediates:
        return ""
    kinds: dict[tuple, list] = {}
    for it in g.intermediates:
        t = it.tensor
        kinds.setdefault((t.numel, t.dtype, len(it.consumers)), []).append(t)
    parts = []
    for (_, dtype, reads), ts in kinds.items():
        rw = f"(1 write + {reads} read{'s' if reads > 1 else ''})"
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


def _kernel_list(rows: list) -> list[dict]:
    agg: dict[tuple, dict] = {}
    for r in rows:
        key = (str(r.name), str(r.op_name), r.dims)
        a = agg.get(key)
        if a is None:
            a = agg[key] = {
                "name": str(r.name),
                "category": str(r.category),
                "op": str(r.op_name),
                "shapes": key[2],
                "count_per_step": 0,
                "time_us_per_step": 0.0,
            }
        a["count_per_step"] += 1
        a["time_us_per_step"] += float(r.dur_us)
    return sorted(agg.values(), key=lambda a: -a["time_us_per_step"])


def _round_trip_json(seq: RunSeq, rt: RoundTrip, hbm_gbps: float | None = None) -> dict:
    """One round trip; time_at_roof_us: its bytes at the GPU's peak HBM bandwidth, the least time it costs (what a
    fusion removing it would save at most, if the kernels around it are memory-bound)."""
    rows = seq.records
    t = rt.tensor
    return {
        "kind": rt.kind,
        "producer": str(rows[rt.producer].name),
        "producer_op": str(rows[rt.producer].op_name),
        "readers": [str(rows[c].name) for c in rt.consumers],
        "shape": list(t.shape),
        "matrix": t.matrix(),
        "dtype": t.dtype,
        "bytes": t.nbytes,
        "round_trip_bytes": rt.bytes,
        "time_at_roof_us": rt.bytes / (hbm_gbps * 1e3) if hbm_gbps else float("nan"),
        "would_avoid": ROUND_TRIP_FIXES[rt.kind],
    }


def _aggregate_round_trips(items: list[dict]) -> list[dict]:
    """The same round trip in every layer becomes one entry with count_per_step (bytes summed)."""
    out: dict[tuple, dict] = {}
    for it in items:
        key = (it["kind"], it["producer"], it["producer_op"], tuple(it["readers"]), tuple(it["shape"]), it["dtype"])
        a = out.get(key)
        if a is None:
            out[key] = {**it, "count_per_step": 1}
        else:
            a["count_per_step"] += 1
            a["round_trip_bytes"] += it["round_trip_bytes"]
            a["time_at_roof_us"] += it["time_at_roof_us"]
    # ranked by time at the bandwidth roof (the same order as bytes on one GPU; unknown bytes last)
    return sorted(
        out.values(),
        key=lambda a: (
            -(a["time_at_roof_us"] if finite(a["time_at_roof_us"]) else 0),
            -(a["round_trip_bytes"] if finite(a["round_trip_bytes"]) else 0),
        ),
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


def _per_step_fields(r: RunFacts) -> dict:
    return {f: getattr(r, f) for f in PER_STEP_FIELDS}


def _run_json(r: RunFacts) -> dict:
    return clean_json(
        {
            "label": r.label,
            "source": r.source,
            "facts": r.facts,
            "workload": workload_text(r.facts),
            "steps_used": r.steps_used,
            "steps_with_signature": r.steps_with_signature,
            "step_shown": r.step_shown,
            **_per_step_fields(r),
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


# --- small helpers --------------------------------------------------------------------------------------------------


def _ordered_categories(runs: list[RunFacts]) -> list[str]:
    seen = {c for r in runs for c in r.by_category}
    return [c for c in CATEGORIES if c in seen] + sorted(seen - set(CATEGORIES))


def _gbps(nbytes: float, us: float) -> float:
    if not finite(nbytes) or not finite(us) or us <= 0:
        return math.nan
    return nbytes / (us * 1e3)  # bytes per µs / 1e3 = 1e9 bytes per second


def _range_or_none(values) -> list[float] | None:
    if values is None or len(values) == 0:
        return None
    lo, hi = spread_range(values)
    return [lo, hi] if finite(lo) and finite(hi) else None


def _div(x, f: float | None):
    """x / f for a number or a [low, high] range; None when either is unknown."""
    if x is None or f is None:
        return None
    if isinstance(x, (list, tuple)):
        return [v / f for v in x]
    return x / f if finite(x) else None


def _saved_range(rb, rc) -> list[float] | None:
    """[low, high] of base − candidate from each side's [low, high] over steps."""
    if not rb or not rc:
        return None
    return [rb[0] - rc[1], rb[1] - rc[0]]


def _call(saved, floor_us: float = 0.0) -> str | None:
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


def _saved_text(us: float) -> str:
    return f"saved {fmt_us(us)}" if not finite(us) or us >= 0 else f"cost {fmt_us(-us)} more"


def _range_text(r) -> str:
    return "spread unknown" if not r else f"{r[0]:,.1f} to {r[1]:,.1f} µs"


def _call_text(call: str | None) -> str:
    return {
        "faster": "faster in every step",
        "slower": "slower in every step",
        "tie": "a tie: within the step-to-step spread",
    }.get(call or "", "no call")


def _event_range(facts: dict) -> list[float] | None:
    lo, hi = facts.get("p10_us"), facts.get("p90_us")
    return [float(lo), float(hi)] if finite(lo) and finite(hi) else None


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _pct(new: float, old: float) -> float:
    if not finite(new) or not finite(old) or old == 0:
        return math.nan
    return 100.0 * (new - old) / old
