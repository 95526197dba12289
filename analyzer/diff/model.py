"""The diff's result model: the typed objects `diff_runs` returns (analyzer.diff.build builds them).

    Diff                      # the baseline, every run side by side, one CandidateDiff per candidate, notes
    CandidateDiff             # one candidate against the baseline: fusion groups, swaps, kernel choices, matched
                              # GEMMs, unmatched kernels, accounting, phases, the GPU conditions' check
    FusionRow                 # one fusion group (or identical ones, count_per_step of them)
    RunFacts                  # one run: its representative step's per-step figures and facts

Derived figures (times saved, normalised times, spreads and their calls, the headline's decision) are computed
here; the text and JSON forms live in analyzer.diff.output_text and analyzer.diff.output_json, which the methods
of the same names call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from analyzer.diff import output_json, output_text
from analyzer.diff.accounting import Accounting
from analyzer.diff.comparability import Comparability
from analyzer.diff.headline import Figure
from analyzer.diff.headline import decide as decide_headline
from analyzer.diff.measures import RESOLUTION, call, div, event_range, gbps, range_or_none, saved_range, sub
from analyzer.fmt import finite
from analyzer.runmeta import measured_dram_bytes
from analyzer.schema import CATEGORIES


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
    remaining: list[dict]  # round trips this run still makes (analyzer.diff.flow.round_trip_rows)
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
        return range_or_none(self.step_values.get(key))

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
    # shape, matrix, dtype, bytes (one tensor), reads, round_trip_bytes, producer, readers (+ still_written: True
    # where the fused kernel writes it too; readers_in_other_groups: a saved tensor the backward reads again;
    # shared_operand: True for a GEMM merge's shared operand, reads = re-reads avoided: traffic_text)
    intermediates: list[dict]
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
    saved_unknown: bool = False  # a lower bound because the backward may re-read an avoided tensor (diff.saved)
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
        return gbps(self.base_bytes_per_step, self.base_time_us_per_step)

    @property
    def candidate_gbps(self) -> float:
        if finite(self.candidate_kernel_gbps):
            return self.candidate_kernel_gbps
        return gbps(self.candidate_bytes_per_step, self.candidate_time_us_per_step)

    def to_json(self) -> dict:
        return output_json.fusion_row_json(self)


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
    # why the two runs are not two versions of one program (comparability.shared_work_note); '' when they can be
    different_work: str = ""

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
        return output_text.phases_text(self)

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
        return None if eff is None else div(self.run.gpu_time_us_per_step, eff)

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
        return sub(self.base.measured_warm_dram_bytes, self.run.measured_warm_dram_bytes)

    def traffic_avoided(self) -> dict:
        return output_text.traffic_avoided(self)

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
                calls[key.removesuffix("_us")] = call(saved_range(rb, rc), floor)
            if key == "gpu_time_us":
                calls["gpu_time"] = call(saved_range(rb, rc), floor)
                er = self.normalised.get("effective_factor_range")
                if eff is not None and er is not None:  # None: too wide to bound (build._normalised says why)
                    rn = [rc[0] / er[1], rc[1] / er[0]] if rc else None  # the factor's uncertainty widens it
                    out["normalised_gpu_time_us_per_step"] = [rb, rn]
                    calls["gpu_time_normalised"] = call(saved_range(rb, rn), floor)
        for what, kb, kc in (
            ("changed_kernels", "changed_base", "changed_candidate"),
            ("fusions", "fusion_base", "fusion_candidate"),
        ):
            rb, rc = sr.get(kb), sr.get(kc)
            name = "changed_kernels_saved_us_per_step" if what == "changed_kernels" else "time_saved_us_per_step"
            out[name] = saved_range(rb, rc)
            calls[what] = call(out[name], floor)
            rn = sr.get(kc + "_normalised")
            if rn is not None:
                out[name.replace("saved_us", "saved_normalised_us")] = saved_range(rb, rn)
                calls[what + "_normalised"] = call(out[name.replace("saved_us", "saved_normalised_us")], floor)
        ev = [event_range(b.facts), event_range(c.facts)]
        if ev[0] and ev[1]:
            out["cuda_event_time_us_per_step"] = ev
            calls["cuda_events"] = call(saved_range(*ev))
        out["calls"] = calls
        return out

    def step_times_text(self) -> str:
        return output_text.step_times_text(self)

    def lead_lines(self) -> list[str]:
        return output_text.lead_lines(self)

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
        return output_json.headline_json(self)

    def to_json(self) -> dict:
        return output_json.candidate_json(self)


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
                    **output_json.per_step_fields(r),
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
        return output_json.diff_json(self)


def _ordered_categories(runs: list[RunFacts]) -> list[str]:
    seen = {c for r in runs for c in r.by_category}
    return [c for c in CATEGORIES if c in seen] + sorted(seen - set(CATEGORIES))
