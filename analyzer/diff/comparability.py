"""Were two runs recorded under the same GPU conditions? The control group answers it.

Kernels that are identical in both runs (same kernel name, same launch config — grid and block where recorded —
and the same work: a GEMM's (batch, M, N, K, dtype), anything else its op and input shapes) and that ran in the same
context (the same kernel ran last before them, and they were queued right behind it or both started after an idle
GPU: analyzer.diff.align.kernel_contexts) did the
same work in both. If the candidate's copies ran slower or faster, the GPU ran under other conditions (SM clock,
power limit, temperature, another process's load), and every other time of that run is off by about as much.
Identical work in another context is not: what ran before a kernel changes its time (dirty L2 lines written back
during it, a power/clock transient, an idle GPU ramping up), so such calls are listed and left out.

    c = check(base_seq, cseq, probes)      # RunSeqs of analyzer.diff.align; probes: facts.recorded_probe per run
    c.verdict                              # 'comparable' | 'skewed' | 'not checkable'
    c.factor                               # candidate / baseline time of the control group
    c.normalise(us)                        # a candidate time at the baseline's conditions: us / factor

The rule (docs/DIFF.md, "Comparability"):
- cells: each call paired one to one (the k-th call of a kernel with its k-th call in the other run), split by its
  context per step; a (call, context) cell counts when both runs ran it so in >= MIN_CONTEXT_STEPS steps.
- factor = the interpolated weighted median over the cells of candidate / baseline median time (weight: the
  baseline's median × its share of steps in that context) — or, when both runner manifests hold the control probe
  (kernels/lab/control.py: a fixed GEMM and elementwise pass before every turn, the same context by construction),
  the median over turns of the probe's candidate / baseline time.
- within-run spread = how much the control time varies over the run's own steady steps (or the probe's turns):
  (max − min) / median, or (p90 − p10) / median from 10 values on. It is the noise the factor must stand out of.
- tolerance = max(3 %, both runs' within-run spreads). Beyond it → 'skewed'. A run whose own control time varies
  by more than 10 % was recorded under changing conditions → 'skewed' as well.
- 'not checkable' when there is no probe and no cell, or the cells' calls take < 2 % of the baseline's kernel time.
- The normalised change divides the candidate's times by the factor of their class. It assumes every kernel moved
  like the control group (a lower SM clock slows a memory-bound kernel less than a GEMM): an estimate, said so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analyzer.diff.align import NO_PREDECESSOR, launch_text
from analyzer.diff.measures import spread_pct, weighted_median, weighted_quantile
from analyzer.fmt import finite, short_name

MIN_TOLERANCE_PCT = 3.0  # clock/power drift below this is normal between two recordings on one H100
UNSTABLE_SPREAD_PCT = 10.0  # control group varying more than this within one run: conditions changed mid-run
MIN_CONTROL_SHARE = 0.02  # control kernels must carry >= 2% of the baseline's kernel time to set a factor
MAX_LISTED = 12  # control kernels listed in the JSON (the heaviest first); the factor uses all
MIN_CONTEXT_STEPS = 2  # a (call, context) cell needs this many steps in each run (or all of a run's steps, if fewer)
# What a different predecessor alone does to an identical kernel, measured on real traces recorded under the same
# conditions (the comparable recorded pairs, factor 0.98-1.02): of the 86 identical calls run in another context,
# the 75 of 10 µs and more moved 0.97-1.066× once divided by their pair's factor (the HF up projection behind the
# gate GEMM instead of eager's GELU kernel: 1.047-1.066× in 9 pairs; the plain MLP's down projection behind the
# fused GEMM + GELU: 1.014-1.018×); docs/DIFF.md, "Evidence in tiers". Beyond it they are evidence of the GPU's
# conditions.
CONTEXT_ALLOWANCE_PCT = 7.0
MAX_IDENTICAL = 100  # identical calls listed with their tier in the JSON (the heaviest first); the count is of all
TIERS = ("same context", "probe", "other context")  # evidence of the GPU's conditions, strongest first

VERDICTS = ("comparable", "skewed", "not checkable")


@dataclass
class Comparability:
    verdict: str  # one of VERDICTS
    reason: str  # one sentence: why this verdict, with the figures
    factor: float | None  # candidate / baseline time of the identical kernels; None when not checkable
    kernel_ratio_range: list[float] | None  # [lowest, highest] per-kernel ratio among the control group
    within_run_spread_pct: dict  # {'base': pct | None, 'candidate': pct | None}
    tolerance_pct: float
    control_kernels: list[dict]  # name, op, shapes, grid, block, calls_per_step [b, c], us_per_call [b, c], ratio
    n_control_kernels: int  # distinct identical kernels (all of them; control_kernels lists the heaviest)
    control_us_per_step: list[float]  # [base, candidate]: time of the control calls in the representative step
    control_share: float  # control_us_per_step[0] / the baseline's kernel time per step
    steps: list[int]  # [base, candidate]: steady steps the spreads are taken over
    notes: list[str] = field(default_factory=list)
    n_control_calls: int = 0  # calls paired one to one (the factor's median runs over these)
    # per GPU op of each run's representative step: the share of its time that belongs to the control group (1 for
    # a control kernel; m/n when a run makes n calls of a control kernel and the other only m; 0 otherwise)
    control_weight: tuple = field(default=(None, None), repr=False, compare=False)
    # the factor per kernel class ('compute': GEMM/attention, 'memory': everything else) among the control kernels;
    # a lower SM clock or a time-sliced neighbour slows compute-bound kernels far more than memory-bound ones
    # (tests/data/comparability/h100_hf_geglu_skew_round0, H100 under a concurrent matmul load: cuBLAS GEMMs
    # 1.17-1.22×, Inductor's pointwise kernel 0.99×)
    class_factors: dict = field(default_factory=dict)
    # per GPU op of the candidate's representative step, the factor its time is divided by: (point, other) — point
    # takes its class's factor, or for a class without control kernels 1.0 (memory-bound) / the overall factor
    # (compute-bound); other takes the opposite assumption for those, so the two bracket the normalised figures
    candidate_factors: tuple = field(default=(None, None), repr=False, compare=False)
    # per class the range its factor may take (class_band: the middle 80% of its control time's call ratios), and per
    # candidate GPU op the (low, high) factor it could take
    class_ratio_ranges: dict = field(default_factory=dict)
    candidate_factor_bounds: tuple = field(default=(None, None), repr=False, compare=False)
    # where the factor comes from: 'probe' (the runner's control probe, in both manifests), 'trace' (the calls
    # identical in both traces and run in the same context) or 'none' (not checkable)
    source: str = "trace"
    trace_factor: float | None = None  # the factor of the traces' context-matched calls (also when the probe sets it)
    probe: dict | None = None  # the probe's kernels, turns, µs per call [base, candidate] and ratio per role
    # calls identical in both runs whose contexts differ in every step: listed, not used (n_calls, us_per_step,
    # calls: the heaviest, with the kernel each ran behind in each run)
    context_excluded: dict = field(default_factory=lambda: {"n_calls": 0, "us_per_step": [0.0, 0.0], "calls": []})
    # every identical call's ratio with its evidence tier (TIERS): n_calls, calls [{name, call, tier, us_per_call,
    # ratio, context}] (the MAX_IDENTICAL heaviest), and the probe's roles as tier 'probe'
    identical_kernels: dict = field(default_factory=lambda: {"n_calls": 0, "calls": []})
    # the tier the verdict rests on: 'same context' (source trace), 'probe', 'other context' (source context), or None
    tier: str | None = None
    # where the factor normalises the candidate's figures; False when kernels in another context, within their widened
    # tolerance, only show that nothing beyond a context effect moved them (a context effect is part of the change)
    normalises: bool = True

    @property
    def checkable(self) -> bool:
        return self.factor is not None

    def normalise(self, us: float | None) -> float | None:
        """A candidate time as if recorded under the baseline's conditions (us / factor); None if not checkable."""
        if us is None or self.factor is None or not finite(us):
            return None
        return float(us) / self.factor

    def badge(self) -> str:
        """One short line for a badge: 'comparable · factor 1.004', 'SKEWED · factor 1.27 (+27%)', …"""
        if self.factor is None:
            return "not checkable"
        head = "comparable" if self.verdict == "comparable" else "SKEWED"
        where = " from kernels in another context" if self.source == "context" else ""
        return (
            f"{head} · factor {self.factor:.3f}{where} ({100 * (self.factor - 1):+.1f}%, "
            f"tolerance ±{self.tolerance_pct:.1f}%)"
        )

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "factor": self.factor,
            "factor_change_pct": None if self.factor is None else 100.0 * (self.factor - 1.0),
            "kernel_ratio_range": self.kernel_ratio_range,
            "within_run_spread_pct": self.within_run_spread_pct,
            "tolerance_pct": self.tolerance_pct,
            "n_control_kernels": self.n_control_kernels,
            "n_control_calls": self.n_control_calls,
            "control_kernels": self.control_kernels,
            "control_us_per_step": self.control_us_per_step,
            "control_share": self.control_share,
            "steps": self.steps,
            "class_factors": self.class_factors,
            "class_ratio_ranges": self.class_ratio_ranges,
            "source": self.source,
            "trace_factor": self.trace_factor,
            "probe": self.probe,
            "context_excluded": self.context_excluded,
            "tier": self.tier,
            "normalises": self.normalises,
            "identical_kernels": self.identical_kernels,
            "rule": RULE,
            "notes": self.notes,
        }


RULE = (
    "control group = calls identical in both runs (name, grid/block, GEMM problem or op and input shapes) that ran "
    "in the same context (the same kernel last before them, queued right behind it or after an idle GPU) in at least "
    "2 steps of each; without those or the probe, every identical call (tier 'other context') with the tolerance "
    f"widened by {CONTEXT_ALLOWANCE_PCT:.0f}% (what another predecessor alone did on real traces), normalising only "
    "beyond it; "
    "factor = the time-weighted median over those (call, context) cells of candidate/baseline median time, also per "
    "class (compute = GEMM/attention, memory = the rest) — or, when both runner manifests hold the control probe "
    "(a fixed GEMM and copy before every turn, the same context by construction), the median over turns of its "
    "candidate/baseline time; tolerance = max(3%, each run's own spread of the control time); |factor − 1| beyond "
    "it, or a run whose control time varies by more than 10%, = skewed; normalised candidate time = each kernel's "
    "time / its class's factor (a class without control kernels: memory-bound 1.0, compute-bound the overall "
    "factor; the other assumption gives the bounds) — an estimate: it assumes every kernel moved like the control "
    "kernels of its class"
)


def control_keys(rows: pd.DataFrame) -> pd.Series:
    """The identity of each kernel of a representative step (rows of analyzer.diff.align.sequence); '' for memops
    and communication kernels.

    The alignment key (GEMM problem, or op and shapes) plus the kernel name and its launch config: a cuBLAS kernel
    of the same M, N, K but another tile config is not the same work, and neither is the same name at other shapes."""
    # a collective's time is mostly waiting for the other ranks (HTA's 2-rank trace: NCCL SendRecv 0.39-1.46× between
    # ranks of one program), not this GPU's speed: never a control
    is_kernel = rows["kind"].eq("kernel") & rows["category"].ne("communication")
    key = launch_text(rows) + "\x1f" + rows["key"].map(repr)
    return key.where(is_kernel, "")


@dataclass
class _Controls:
    """A pair's control group before any verdict: identical calls (pairs), the same-context ones used (upairs) and
    their (call, context) cells, the weights and spreads of their time, and the runner's probe."""

    pairs: pd.DataFrame
    cells: pd.DataFrame
    upairs: pd.DataFrame
    spreads: dict
    share: float
    n_kernels: int
    probe: dict | None
    trace_ok: bool
    base_kernel_us: float
    steps: list[int]
    excl_text: str
    common: dict  # the fields every Comparability of the pair carries


def check(bseq, cseq, probes: tuple = (None, None)) -> Comparability:
    """The comparability of candidate run cseq against baseline run bseq (RunSeqs; see the module doc). probes: each
    run's control probe from its runner manifest (analyzer.runmeta.recorded_probe), or None."""
    ctl = _controls(bseq, cseq, probes)
    early = _without_enough_controls(bseq, cseq, ctl)
    if early is not None:
        return early
    factor, class_factors, class_ranges, spreads, what = _measured_factor(bseq, cseq, ctl)
    c = cseq.rows
    point, other, lo, hi = _candidate_factors(kernel_classes(c), class_factors, class_ranges, factor)
    known = [x for x in spreads.values() if x is not None]
    if ctl.probe is not None:
        known += [x for x in ctl.probe["spreads"].values() if x is not None]
    tol = max([MIN_TOLERANCE_PCT, *known])
    verdict, reason = _verdict(bseq, cseq, ctl, factor, class_factors, spreads, what, tol)
    ratios = ctl.cells["ratio"].to_numpy(float) if len(ctl.cells) else np.array([factor])
    return Comparability(
        verdict=verdict,
        reason=reason + ctl.excl_text,
        factor=float(factor),
        kernel_ratio_range=[float(ratios.min()), float(ratios.max())],
        within_run_spread_pct=spreads,
        tolerance_pct=float(tol),
        steps=ctl.steps,
        notes=_check_notes(c, class_factors, ctl),
        class_factors=class_factors,
        class_ratio_ranges=class_ranges,
        candidate_factors=(point, other),
        candidate_factor_bounds=(lo, hi),
        source="trace" if ctl.trace_ok else "probe",
        tier="same context" if ctl.trace_ok else "probe",
        **ctl.common,
    )


def _controls(bseq, cseq, probes: tuple) -> _Controls:
    """The control group: identical calls paired, those in the same context used, and the probe read."""
    b, c = bseq.rows, cseq.rows
    kb, kc = control_keys(b), control_keys(c)
    base_kernel_us = float(b["dur_us"].to_numpy(dtype=float).sum())
    pairs = _call_pairs(b, kb, c, kc)
    cells, used = _context_cells(bseq, cseq, pairs)
    upairs = pairs[used]
    excluded = _excluded(bseq, cseq, pairs[~used])
    wb = np.zeros(len(b))
    wc = np.zeros(len(c))
    wb[upairs["pos_b"].to_numpy(int)] = 1.0
    wc[upairs["pos_c"].to_numpy(int)] = 1.0
    ctrl_b = float(upairs["dur_b"].sum())
    ctrl_c = float(upairs["dur_c"].sum())
    share = ctrl_b / base_kernel_us if base_kernel_us > 0 else 0.0
    n_kernels = int(upairs["key"].nunique())
    trace_factor = (
        weighted_median(cells["ratio"].to_numpy(float), cells["weight_us"].to_numpy(float)) if len(cells) else None
    )
    probe = _probe(*probes)
    common = {
        "control_kernels": _listed(upairs, cells, bseq, b),
        "n_control_kernels": n_kernels,
        "n_control_calls": len(upairs),
        "control_us_per_step": [ctrl_b, ctrl_c],
        "control_share": float(share),
        "control_weight": (wb, wc),
        "context_excluded": excluded,
        "trace_factor": trace_factor,
        "probe": probe["json"] if probe else None,
        "identical_kernels": _identical(bseq, cseq, pairs, used, probe),
    }
    return _Controls(
        pairs=pairs,
        cells=cells,
        upairs=upairs,
        spreads={"base": spread_pct(per_step_us(bseq, wb)), "candidate": spread_pct(per_step_us(cseq, wc))},
        share=share,
        n_kernels=n_kernels,
        probe=probe,
        trace_ok=len(cells) > 0 and share >= MIN_CONTROL_SHARE,
        base_kernel_us=base_kernel_us,
        steps=[_n_steps(bseq), _n_steps(cseq)],
        excl_text=_excluded_text(excluded, bseq.label, cseq.label),
        common=common,
    )


def _without_enough_controls(bseq, cseq, ctl: _Controls) -> Comparability | None:
    """Without the probe and with too little in the same context: the other-context tier, else not checkable.
    None when the same-context calls or the probe can decide."""
    if ctl.probe is not None or ctl.trace_ok:
        return None
    shifted = _other_context(bseq, cseq, ctl.pairs, ctl.base_kernel_us, ctl.steps, ctl.common, ctl.excl_text)
    if shifted is not None:
        return shifted
    if not len(ctl.cells):
        why = (
            "no kernel ran identically in both runs (same name, launch config and shapes)"
            if not len(ctl.pairs)
            else "no kernel ran identically in both runs in the same context"
        )
        return _unchecked(
            f"{why}: {cseq.label} and {bseq.label} share no control group, so their GPU conditions cannot be compared"
            f"{ctl.excl_text}",
            ctl.spreads,
            ctl.steps,
            **ctl.common,
        )
    return _unchecked(
        f"the kernels identical in both runs, in the same context, take {ctl.share:.1%} of {bseq.label}'s kernel "
        f"time per step (under {MIN_CONTROL_SHARE:.0%}): too little to tell the GPU's conditions apart{ctl.excl_text}",
        ctl.spreads,
        ctl.steps,
        **ctl.common,
    )


def _measured_factor(bseq, cseq, ctl: _Controls) -> tuple[float, dict, dict, dict, str]:
    """The factor that normalises, per class with its ranges, the spreads it rests on and what it says.

    The traces' own same-context calls when they carry enough of the step (they ran inside the profiled steps:
    under a concurrent load the workload's GEMMs slowed 1.16-1.20×, the probe's 1.21-1.23×, and the traces' factor
    normalises to within 1.6 points of the CUDA events where the probe's misses by 4), else the probe; the verdict
    weighs both."""
    probe = ctl.probe
    probe_read = ""
    if probe is not None:
        pf = probe["class_factors"]
        probe_read = f"{pf.get('compute', probe['factor']):.3f}× (GEMM) and {pf.get('memory', probe['factor']):.3f}× (elementwise)"
    if not ctl.trace_ok:
        factor = probe["factor"]
        what = (
            f"the runner's control probe ({probe['text']}, the same sequence in the same context before each of "
            f"{probe['turns']} turns) ran {probe_read} as long in {cseq.label} ({100.0 * (factor - 1.0):+.1f}% overall)"
        )
        return factor, probe["class_factors"], probe["class_ranges"], probe["spreads"], what
    factor = ctl.common["trace_factor"]
    class_factors, class_ranges = {}, {}
    for k, g in ctl.cells.groupby("cls", sort=True):
        ratio, weight = g["ratio"].to_numpy(float), g["weight_us"].to_numpy(float)
        class_factors[str(k)] = weighted_median(ratio, weight)
        class_ranges[str(k)] = class_band(ratio, weight)
    what = (
        f"{_calls_text(ctl.n_kernels, len(ctl.upairs))} identical in both runs and in the same context ({ctl.share:.0%} "
        f"of {bseq.label}'s kernel time) ran {factor:.3f}× as long in {cseq.label} ({100.0 * (factor - 1.0):+.1f}%)"
    )
    if probe is not None:
        what += f"; the runner's control probe read {probe_read}"
    return factor, class_factors, class_ranges, ctl.spreads, what


def _verdict(
    bseq, cseq, ctl: _Controls, factor: float, class_factors: dict, spreads: dict, what: str, tol: float
) -> tuple[str, str]:
    """'skewed' when any factor measured lies beyond the tolerance or a run's control time varied by more than
    UNSTABLE_SPREAD_PCT, else 'comparable'; with its reason."""
    # every factor measured is evidence of the conditions: the overall one, each class's, and the probe's per class
    evidence = [factor, *class_factors.values(), *(ctl.probe["class_factors"].values() if ctl.probe else [])]
    worst = max(evidence, key=lambda f: abs(f - 1.0))
    dev = 100.0 * (worst - 1.0)
    unstable = [(lab, x) for lab, x in (("base", spreads["base"]), ("candidate", spreads["candidate"])) if x]
    unstable = [(lab, x) for lab, x in unstable if x > UNSTABLE_SPREAD_PCT]
    if abs(dev) > tol:
        by_class = ", ".join(f"{k} {v:.3f}" for k, v in class_factors.items())
        if "memory" not in class_factors:
            by_class += "; memory-bound kernels: no control kernel, taken at 1.0"
        elif "compute" not in class_factors:
            by_class += "; GEMM/attention: no control kernel, taken at the overall factor"
        why = "" if worst == factor else f" (the largest deviation: {worst:.3f}×)"
        return "skewed", (
            f"{what}, beyond the ±{tol:.1f}% tolerance{why}: the GPU ran under other conditions (clock, power, "
            f"temperature, other load); normalised figures divide {cseq.label}'s kernel times by their class's "
            f"factor ({by_class})"
        )
    if unstable:
        who = ", ".join(f"{bseq.label if lab == 'base' else cseq.label} {x:.1f}%" for lab, x in unstable)
        return "skewed", (
            f"{what}, but {'the probe' if not ctl.trace_ok else 'their time per step'} varied by more than "
            f"{UNSTABLE_SPREAD_PCT:.0f}% within a run ({who}): conditions changed while it was recorded"
        )
    return "comparable", f"{what}, within the ±{tol:.1f}% tolerance"


def _check_notes(c: pd.DataFrame, class_factors: dict, ctl: _Controls) -> list[str]:
    """What the verdict cannot see: a memory-bound control group (a clock drop barely shows), and a probe that
    read other factors than the same-context kernels."""
    notes = []
    if "compute" not in class_factors and (kernel_classes(c) == "compute").any():
        notes.append(
            "no GEMM or attention kernel is identical in both runs: the control group is memory-bound, and a lower "
            "SM clock barely shows in memory-bound kernels, so a clock difference may go unseen"
        )
    probe = ctl.probe
    if probe is not None and ctl.trace_ok:
        off = [
            f"{k} {probe['class_factors'][k]:.3f} against {v:.3f}"
            for k, v in class_factors.items()
            if k in probe["class_factors"] and abs(probe["class_factors"][k] - v) * 100.0 > MIN_TOLERANCE_PCT
        ]
        if off:
            notes.append(
                f"the runner's control probe, between turns, read {'; '.join(off)} for the same-context kernels inside "
                "the steps: the normalised figures use the latter, measured where the work ran"
            )
    return notes


def _other_context(bseq, cseq, pairs: pd.DataFrame, base_kernel_us: float, steps, common: dict, excl_text: str):
    """The third tier: no probe and too little in the same context, so every identical call counts, each at the
    median over its steps whatever ran before it. A different predecessor alone moves an identical kernel by up to
    CONTEXT_ALLOWANCE_PCT, so the tolerance is widened by that much: beyond it the GPU ran under other conditions
    ('skewed', normalised by these ratios: a rough estimate); within it the runs are 'comparable' but not normalised
    (the ratio may be the change's own context effect). None when the identical calls carry under
    MIN_CONTROL_SHARE of the baseline's kernel time."""
    if pairs.empty or base_kernel_us <= 0:
        return None
    share = float(pairs["dur_b"].sum()) / base_kernel_us
    if share < MIN_CONTROL_SHARE:
        return None
    ratio = (pairs["dur_c"] / pairs["dur_b"]).to_numpy(float)
    w = pairs["dur_b"].to_numpy(float)
    factor = weighted_median(ratio, w)
    wb = np.zeros(len(bseq.rows))
    wc = np.zeros(len(cseq.rows))
    wb[pairs["pos_b"].to_numpy(int)] = 1.0
    wc[pairs["pos_c"].to_numpy(int)] = 1.0
    spreads = {"base": spread_pct(per_step_us(bseq, wb)), "candidate": spread_pct(per_step_us(cseq, wc))}
    base_tol = max([MIN_TOLERANCE_PCT, *(x for x in spreads.values() if x is not None)])
    tol = base_tol + CONTEXT_ALLOWANCE_PCT
    a = CONTEXT_ALLOWANCE_PCT / 100.0
    class_factors, class_ranges = {}, {}
    cls = pairs["cls"].to_numpy()
    for k in sorted(set(cls)):
        m = cls == k
        class_factors[str(k)] = weighted_median(ratio[m], w[m])
        # the conditions' factor lies within a context effect of each ratio: the normalised ranges carry it
        lo, hi = class_band(ratio[m], w[m])
        class_ranges[str(k)] = [lo * (1 - a), hi * (1 + a)]
    n_kernels = int(pairs["key"].nunique())
    what = (
        f"no kernel ran identically in both runs in the same context, and there is no control probe; "
        f"{_calls_text(n_kernels, len(pairs))} identical in both runs but behind other kernels ({share:.0%} of "
        f"{bseq.label}'s kernel time) ran {factor:.3f}× as long in {cseq.label} ({100.0 * (factor - 1.0):+.1f}%)"
    )
    allowance = (
        f"±{tol:.1f}% tolerance for kernels in another context ({base_tol:.1f}% + the {CONTEXT_ALLOWANCE_PCT:.0f}% "
        "a different predecessor alone moved identical kernels on real traces)"
    )
    measured = {  # what both verdicts report of the other-context calls
        "factor": float(factor),
        "kernel_ratio_range": [float(ratio.min()), float(ratio.max())],
        "within_run_spread_pct": spreads,
        "tolerance_pct": float(tol),
        "steps": steps,
        "class_factors": class_factors,
        "class_ratio_ranges": class_ranges,
        "source": "context",
        "tier": "other context",
        **common,
    }
    if abs(100.0 * (factor - 1.0)) > tol:
        point, other, lo, hi = _candidate_factors(kernel_classes(cseq.rows), class_factors, class_ranges, factor)
        by_class = ", ".join(f"{k} {v:.3f}" for k, v in class_factors.items())
        return Comparability(
            verdict="skewed",
            reason=f"{what}, beyond the {allowance}: more than what ran before them explains, so the GPU ran under "
            f"other conditions (clock, power, temperature, other load); normalised figures divide {cseq.label}'s "
            f"kernel times by their class's factor ({by_class}), a rough estimate{excl_text}",
            candidate_factors=(point, other),
            candidate_factor_bounds=(lo, hi),
            **measured,
        )
    return Comparability(
        verdict="comparable",
        reason=f"{what}, within the {allowance}: no sign of other GPU conditions at that resolution; the figures are "
        "not normalised (the ratio may be the change's own effect on what runs before those kernels)",
        normalises=False,
        **measured,
    )


def _identical(bseq, cseq, pairs: pd.DataFrame, used: np.ndarray, probe: dict | None) -> dict:
    """Every identical call (the heaviest MAX_IDENTICAL) with its ratio and evidence tier: 'same context' when both
    runs ran it so in enough steps, else 'other context'; the probe's roles as tier 'probe'."""
    calls = []
    if probe is not None:
        pj = probe["json"]
        for role, (ub, uc) in pj["us_per_call"].items():
            calls.append(
                {
                    "name": str(pj["kernels"].get(role, role)),
                    "call": 0,
                    "tier": "probe",
                    "us_per_call": [ub, uc],
                    "ratio": pj["ratio"][role],
                    "context": ["the runner's control probe", "the runner's control probe"],
                }
            )
    if not pairs.empty:
        x = pairs.assign(same_ctx=used).sort_values("dur_b", ascending=False, kind="stable").head(MAX_IDENTICAL)
        ctx_b = _usual_context(bseq, x["pos_b"].to_numpy(int))
        ctx_c = _usual_context(cseq, x["pos_c"].to_numpy(int))
        names = bseq.rows["name"].astype(str).to_numpy()
        for r, cb, cc in zip(x.itertuples(), ctx_b, ctx_c, strict=True):
            calls.append(
                {
                    "name": str(names[int(r.pos_b)]),
                    "call": int(r.occ),
                    "tier": "same context" if r.same_ctx else "other context",
                    "us_per_call": [float(r.dur_b), float(r.dur_c)],
                    "ratio": float(r.dur_c / r.dur_b),
                    "context": [cb, cc],
                }
            )
    return {"n_calls": len(pairs), "calls": calls}


def _calls_text(n_kernels: int, n_calls: int) -> str:
    return f"{n_kernels} kernel{'s' if n_kernels != 1 else ''} ({n_calls} call{'s' if n_calls != 1 else ''})"


COMPUTE_CATEGORIES = ("gemm", "attention")


# The range a class's factor may take, for the kernels it normalises: the time-weighted BAND_TAIL and 1 - BAND_TAIL
# quantiles of its control calls' ratios. Kernels of one class answer a change of conditions unequally (GEMMs under a
# concurrent matmul load: 1.13-1.22x, tests/data/comparability/h100_hf_geglu_skew_round0), so the band is that
# spread, not the factor's step-to-step one; but not its extremes: calls of a few µs, timed to whole µs in older
# traces, read 0.5x or 2x (1 µs against 2), and the lowest and highest call ratio put the normalised step of a
# ResNet-50 pair (Kineto's tb_plugin samples, factor 1.000, recorded steps 100.5-100.7 ms and 101.9-102.5 ms) at
# 79.8-205.0 ms, which called a 1.5% slowdown a tie.
BAND_TAIL = 0.1
# Widest band (high / low) the normalised figures are bounded by; beyond it they are given without a range or a call
MAX_BAND_WIDTH = 1.5


def class_band(ratio: np.ndarray, weight_us: np.ndarray) -> list[float]:
    """[low, high] of the factor a class's kernels may take (BAND_TAIL above), its factor (the weighted median)
    always inside."""
    mid = weighted_median(ratio, weight_us)
    lo, hi = weighted_quantile(ratio, weight_us, BAND_TAIL), weighted_quantile(ratio, weight_us, 1 - BAND_TAIL)
    return [float(min(lo, mid)), float(max(hi, mid))]


def shared_work_note(b_rows: list, c_rows: list, b_label: str, c_label: str) -> str:
    """'' when the two runs can be two versions of one program, else why not: both run GEMMs of known problem size
    and not one problem (M, N, K up to the order of M and N, K; batch) is in both. A fused or compiled version keeps
    its model's GEMM problems (eager vs compile, vs Liger, vs FuseLens at the bundled traces: most shared); TraceLens's
    MI300X Qwen1.5-0.5B forward against its compiled transformer block (another model) shares none, and the diff
    there read one Triton kernel as replacing 475."""

    def problems(rows) -> set[tuple]:
        return {(g.batch, *sorted((g.m, g.n)), g.k) for r in rows if (g := getattr(r, "gemm", None)) is not None}

    pb, pc = problems(b_rows), problems(c_rows)
    if not pb or not pc or pb & pc:
        return ""
    return (
        f"{c_label} and {b_label} share no GEMM problem ({len(pc)} and {len(pb)} distinct M·N·K): not two versions "
        "of one program, so the fusions below (which baseline kernels a candidate kernel replaced) and the times "
        "saved compare different work"
    )


def kernel_classes(rows: pd.DataFrame) -> np.ndarray:
    """'compute' (GEMM, attention: bound by the SM clock) or 'memory' (everything else) per GPU op."""
    return np.where(rows["category"].isin(COMPUTE_CATEGORIES).to_numpy(), "compute", "memory")


def _candidate_factors(
    classes: np.ndarray, class_factors: dict, class_ranges: dict, factor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate GPU op: (point, other, low, high) factors. point/other: see Comparability.candidate_factors;
    low/high: the lowest and highest factor its time could take — its class's band (class_band), or
    for a class without control kernels the span of both assumptions — so normalised ranges carry the factor's own
    uncertainty and a change inside it is a tie."""
    point = np.full(len(classes), factor, dtype=float)
    other, lo, hi = point.copy(), point.copy(), point.copy()
    for cls in ("compute", "memory"):
        m = classes == cls
        if cls in class_factors:
            point[m] = other[m] = class_factors[cls]
            lo[m], hi[m] = class_ranges[cls]
        elif cls == "memory":  # memory-bound kernels barely follow the SM clock: 1.0, bracketed by the overall factor
            point[m], other[m] = 1.0, factor
            lo[m], hi[m] = min(1.0, factor), max(1.0, factor)
        else:  # compute-bound kernels follow it at least as much as the memory-bound control group did
            point[m] = other[m] = lo[m] = hi[m] = factor
    return point, other, lo, hi


def per_step_us(seq, weight: np.ndarray | None = None) -> np.ndarray:
    """Time per step (one value per step of seq.steps_with_signature) of the representative step's GPU ops, each
    weighted (1 = all of it; default every op); empty when the run kept no per-step durations."""
    durs = getattr(seq, "step_durs_us", None)
    if durs is None or durs.ndim != 2:
        return np.empty(0)
    return durs @ (np.ones(durs.shape[1]) if weight is None else weight)


# --- pieces -------------------------------------------------------------------------------------------------------


def _call_pairs(b: pd.DataFrame, kb: pd.Series, c: pd.DataFrame, kc: pd.Series) -> pd.DataFrame:
    """The identical kernels call by call: the k-th call of a kernel in the baseline's step with its k-th call in the
    candidate's (launch order): key, occ (k), pos_b / pos_c (positions in each run's step), dur_b / dur_c (their
    median µs over steps) and cls (kernel class)."""
    sides = []
    for rows, keys in ((b, kb), (c, kc)):
        m = keys.ne("").to_numpy()
        d = pd.DataFrame(
            {
                "key": keys.to_numpy()[m],
                "pos": np.flatnonzero(m),
                "dur": rows["dur_us"].to_numpy(float)[m],
                "cls": kernel_classes(rows)[m],
            }
        )
        d["occ"] = d.groupby("key", sort=False).cumcount()
        sides.append(d)
    pairs = sides[0].merge(sides[1][["key", "occ", "pos", "dur"]], on=["key", "occ"], suffixes=("_b", "_c"))
    return pairs[(pairs["dur_b"] > 0) & (pairs["dur_c"] > 0)].reset_index(drop=True)


def _context_cells(bseq, cseq, pairs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Each paired call split by the context its steps ran it in (RunSeq.step_context: the kernel it was queued
    behind, and whether the GPU idled in between): one cell per (call, context) that both runs ran in at least MIN_CONTEXT_STEPS steps
    (or in all their steps, when a run has fewer). Per cell: ratio = candidate / baseline median µs over those steps,
    weight_us = the baseline's median × the share of its steps in that context, cls. Also, per pair, whether any
    of its cells is shared (the calls the factor rests on)."""
    cols = ["pair", "ctx", "ratio", "weight_us", "cls"]
    if pairs.empty:
        return pd.DataFrame(columns=cols), np.zeros(0, dtype=bool)
    sides = []
    for seq, pos in ((bseq, pairs["pos_b"].to_numpy(int)), (cseq, pairs["pos_c"].to_numpy(int))):
        durs, ctx = getattr(seq, "step_durs_us", None), getattr(seq, "step_context", None)
        if durs is None or durs.ndim != 2 or len(durs) == 0:  # no per-step figures: the median, context unknown
            d = seq.rows["dur_us"].to_numpy(float)[pos][None, :]
            x = np.zeros(d.shape, dtype=np.uint64)
        else:
            d = durs[:, pos]
            x = ctx[:, pos] if ctx is not None else np.zeros(d.shape, dtype=np.uint64)
        long = pd.DataFrame({"pair": np.tile(np.arange(len(pos)), d.shape[0]), "ctx": x.ravel(), "dur": d.ravel()})
        agg = long.groupby(["pair", "ctx"], sort=False)["dur"].agg(["size", "median"])
        agg["need"] = min(MIN_CONTEXT_STEPS, d.shape[0])
        agg["n_steps"] = d.shape[0]
        sides.append(agg)
    cells = sides[0].merge(sides[1], left_index=True, right_index=True, suffixes=("_b", "_c"))
    ok = (cells["size_b"] >= cells["need_b"]) & (cells["size_c"] >= cells["need_c"])
    cells = cells[ok & (cells["median_b"] > 0) & (cells["median_c"] > 0)].reset_index()
    cells["ratio"] = cells["median_c"] / cells["median_b"]
    cells["weight_us"] = cells["median_b"] * cells["size_b"] / cells["n_steps_b"]
    cells["cls"] = pairs["cls"].to_numpy()[cells["pair"].to_numpy(int)]
    used = np.zeros(len(pairs), dtype=bool)
    used[cells["pair"].to_numpy(int)] = True
    return cells[cols], used


def _context_text(seq, h) -> str:
    h = int(h)
    if h == int(NO_PREDECESSOR):
        return "the start of the trace"
    return (getattr(seq, "context_names", {}) or {}).get(h, "?")


def _usual_context(seq, pos: np.ndarray) -> list[str]:
    """The most common context of each position's steps, as text."""
    ctx = getattr(seq, "step_context", None)
    if ctx is None or len(ctx) == 0:
        return ["unknown"] * len(pos)
    out = []
    for p in pos:
        vals, counts = np.unique(ctx[:, p], return_counts=True)
        out.append(_context_text(seq, vals[np.argmax(counts)]))
    return out


def _excluded(bseq, cseq, x: pd.DataFrame) -> dict:
    """Calls identical in both runs that ran in no common context: listed (the heaviest first), not used."""
    if x.empty:
        return {"n_calls": 0, "us_per_step": [0.0, 0.0], "calls": []}
    n, us = len(x), [float(x["dur_b"].sum()), float(x["dur_c"].sum())]
    x = x.sort_values("dur_b", ascending=False, kind="stable").head(MAX_LISTED)
    ctx_b = _usual_context(bseq, x["pos_b"].to_numpy(int))
    ctx_c = _usual_context(cseq, x["pos_c"].to_numpy(int))
    names = bseq.rows["name"].astype(str).to_numpy()
    calls = [
        {
            "name": str(names[int(r.pos_b)]),
            "call": int(r.occ),
            "us_per_call": [float(r.dur_b), float(r.dur_c)],
            "ratio": float(r.dur_c / r.dur_b),
            "context": [cb, cc],
        }
        for r, cb, cc in zip(x.itertuples(), ctx_b, ctx_c, strict=True)
    ]
    return {"n_calls": n, "us_per_step": us, "calls": calls}


def _excluded_text(excluded: dict, base: str, cand: str) -> str:
    """'; 1 identical call left out, its context differs (nvjet_… ran behind at::native::… in eager, behind
    fuselens_gemm_bias_act_kernel in fuselens: 1.024×)' — the heaviest such call; '' when none."""
    n = excluded["n_calls"]
    if not n:
        return ""
    k = excluded["calls"][0]
    ctx = [_short_context(c) for c in k["context"]]
    what = f"{n} identical call{'s' if n != 1 else ''} left out, {'their' if n != 1 else 'its'} context differs"
    eg = "e.g. " if n > 1 else ""
    return f"; {what} ({eg}{short_name(k['name'], 48)} ran {ctx[0]} in {base}, {ctx[1]} in {cand}: {k['ratio']:.3f}×)"


def _short_context(text: str) -> str:
    """'behind <a long C++ kernel name>' with the kernel name shortened (analyzer.fmt.short_name)."""
    for head in ("after an idle GPU, last behind ", "behind "):
        if text.startswith(head):
            return head + short_name(text[len(head) :], 48)
    return text


def _listed(upairs: pd.DataFrame, cells: pd.DataFrame, bseq, rows: pd.DataFrame) -> list[dict]:
    """The heaviest control kernels, for the JSON and the report: what the factor rests on, with the contexts."""
    if upairs.empty:
        return []
    ctx_of = cells.groupby("pair")["ctx"].agg(list)
    g = upairs.assign(_i=upairs.index.to_numpy())  # the pair ids the cells carry
    out = []
    per_key = g.groupby("key", sort=False).agg(
        calls=("occ", "size"), pos=("pos_b", "first"), us_b=("dur_b", "sum"), us_c=("dur_c", "sum")
    )
    per_key = per_key.sort_values("us_b", ascending=False, kind="stable").head(MAX_LISTED)
    for key, r in per_key.iterrows():
        f = rows.iloc[int(r["pos"])]
        pair_ids = g.loc[g["key"] == key, "_i"].to_numpy(int)
        ctxs = sorted({_context_text(bseq, h) for i in pair_ids for h in ctx_of.get(i, [])})
        n = int(r["calls"])
        out.append(
            {
                "name": str(f["name"]),
                "op": str(f["op_name"] or ""),
                "shapes": str(f["dims"]),
                "grid": str(f["grid"]),
                "block": str(f["block"]),
                "calls_per_step": [n, n],
                "us_per_call": [float(r["us_b"]) / n, float(r["us_c"]) / n],
                "us_per_step": [float(r["us_b"]), float(r["us_c"])],
                "ratio": float(r["us_c"] / r["us_b"]),
                "contexts": ctxs,
            }
        )
    return out


# the probe's control roles and the kernel class each stands for (kernels/lab/control.py)
PROBE_CLASSES = {"gemm": "compute", "copy": "memory"}
MIN_PROBE_TURNS = 3


def _probe(pb: dict | None, pc: dict | None) -> dict | None:
    """The factor from both runs' control probes (analyzer.runmeta.recorded_probe), turn k of one run with turn
    k of the other (the same round of the runner), or None when either run has none or they ran different probes."""
    if not pb or not pc or pb.get("spec") != pc.get("spec") or pb.get("kernels") != pc.get("kernels"):
        return None
    ctrl = [i for i, r in enumerate(pb["roles"]) if r in pb["controls"] and r in PROBE_CLASSES]
    n = min(len(pb["us"]), len(pc["us"]))
    if not ctrl or n < MIN_PROBE_TURNS:
        return None
    ub = np.asarray(pb["us"][:n], dtype=float)[:, ctrl]
    uc = np.asarray(pc["us"][:n], dtype=float)[:, ctrl]
    r = uc / ub
    roles = [pb["roles"][i] for i in ctrl]
    classes = {PROBE_CLASSES[x]: j for j, x in enumerate(roles)}
    factor = weighted_median(r.ravel(), ub.ravel())
    spec = pb.get("spec") or {}
    mnk = spec.get("gemm_mnk") or []
    what = {
        "gemm": f"a bf16 {'×'.join(str(x) for x in mnk)} GEMM" if mnk else "a GEMM",
        "copy": f"a {spec.get('copy_bytes', 0) / 2**20:.0f} MiB elementwise pass"
        if spec.get("copy_bytes")
        else "a copy",
    }
    med_b, med_c = np.median(ub, axis=0), np.median(uc, axis=0)
    return {
        "factor": factor,
        "class_factors": {k: weighted_median(r[:, j], ub[:, j]) for k, j in sorted(classes.items())},
        "class_ranges": {k: [float(r[:, j].min()), float(r[:, j].max())] for k, j in sorted(classes.items())},
        "spreads": {"base": spread_pct(ub.sum(axis=1)), "candidate": spread_pct(uc.sum(axis=1))},
        "turns": n,
        "text": ", ".join(f"{what[x]} {med_b[j]:.1f} µs" for j, x in enumerate(roles)),
        "json": {
            "turns": n,
            "kernels": {x: pb["kernels"][i] for x, i in zip(roles, ctrl, strict=True)},
            "us_per_call": {x: [float(med_b[j]), float(med_c[j])] for j, x in enumerate(roles)},
            "ratio": {x: float(np.median(r[:, j])) for j, x in enumerate(roles)},
            "spec": spec,
        },
    }


def _n_steps(seq) -> int:
    return len(seq.steps_with_signature)


def _unchecked(reason: str, spreads: dict, steps: list[int], **common) -> Comparability:
    return Comparability(
        verdict="not checkable",
        reason=reason,
        factor=None,
        kernel_ratio_range=None,
        within_run_spread_pct=spreads,
        tolerance_pct=MIN_TOLERANCE_PCT,
        steps=steps,
        source="none",
        **common,
    )
