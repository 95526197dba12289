"""Were two runs recorded under the same GPU conditions? The control group answers it.

Kernels that are identical in both runs (same kernel name, same launch config — grid and block where recorded —
and the same work: a GEMM's (batch, M, N, K, dtype), anything else its op and input shapes) did the same work in
both. If the candidate's copies ran slower or faster, the GPU ran under other conditions (SM clock, power limit,
temperature, another process's load), and every other time of that run is off by about as much.

    c = check(base_seq, cand_seq)          # RunSeqs of analyzer.diff.align
    c.verdict                              # 'comparable' | 'skewed' | 'not checkable'
    c.factor                               # candidate / baseline time of the identical kernels (time-weighted median)
    c.normalise(us)                        # a candidate time at the baseline's conditions: us / factor

The rule (docs/DIFF.md, "Comparability"):
- factor = the time-weighted median over the control kernels' calls (the k-th call of a kernel in one run paired
  with its k-th call in the other) of candidate / baseline time; weight = the call's baseline time. A median over
  calls, so neither a one-off stall nor a call whose neighbours changed sets it.
- within-run spread = how much the control group's time per step varies over the run's own steady steps:
  (max − min) / median, or (p90 − p10) / median from 10 steps on. It is the noise the factor must stand out of.
- tolerance = max(3 %, both runs' within-run spreads). Beyond it → 'skewed'. A run whose own control group varies
  by more than 10 % from step to step was recorded under changing conditions → 'skewed' as well.
- 'not checkable' when the runs share no identical kernel, or the shared ones take < 2 % of the baseline's kernel
  time (a few µs of small kernels set no clock).
- The normalised change divides the candidate's times by the factor. It assumes every kernel moved like the
  control group (a lower SM clock slows a memory-bound kernel less than a GEMM): an estimate, said so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analyzer.fmt import finite
from analyzer.steps import spread_range  # noqa: F401  (re-exported: one rule for every shown spread)

MIN_TOLERANCE_PCT = 3.0  # clock/power drift below this is normal between two recordings on one H100
UNSTABLE_SPREAD_PCT = 10.0  # control group varying more than this within one run: conditions changed mid-run
MIN_CONTROL_SHARE = 0.02  # control kernels must carry >= 2% of the baseline's kernel time to set a factor
MAX_LISTED = 12  # control kernels listed in the JSON (the heaviest first); the factor uses all

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
    # (round 0, H100 under a concurrent matmul load: cuBLAS GEMMs 1.17-1.22×, Inductor's pointwise kernel 0.99×)
    class_factors: dict = field(default_factory=dict)
    # per GPU op of the candidate's representative step, the factor its time is divided by: (point, other) — point
    # takes its class's factor, or for a class without control kernels 1.0 (memory-bound) / the overall factor
    # (compute-bound); other takes the opposite assumption for those, so the two bracket the normalised figures
    candidate_factors: tuple = field(default=(None, None), repr=False, compare=False)
    # [lowest, highest] call ratio per class, and per candidate GPU op the (low, high) factor it could take
    class_ratio_ranges: dict = field(default_factory=dict)
    candidate_factor_bounds: tuple = field(default=(None, None), repr=False, compare=False)

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
        return (
            f"{head} · factor {self.factor:.3f} ({100 * (self.factor - 1):+.1f}%, tolerance ±{self.tolerance_pct:.1f}%)"
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
            "rule": RULE,
            "notes": self.notes,
        }


RULE = (
    "control group = kernels identical in both runs (name, grid/block, GEMM problem or op and input shapes); "
    "factor = the time-weighted median over their calls (k-th call paired with k-th call) of candidate/baseline "
    "time, also per class (compute = GEMM/attention, memory = the rest); tolerance = max(3%, each run's own "
    "step-to-step spread of the control group's time); |factor − 1| beyond it, or a run whose control group varies "
    "by more than 10% from step to step, = skewed; normalised candidate time = each kernel's time / its class's "
    "factor (a class without control kernels: memory-bound 1.0, compute-bound the overall factor; the other "
    "assumption gives the bounds) — an estimate: it assumes every kernel moved like the control kernels of its class"
)


def control_keys(rows: pd.DataFrame) -> pd.Series:
    """The identity of each kernel of a representative step (rows of analyzer.diff.align.sequence); '' for memops.

    The alignment key (GEMM problem, or op and shapes) plus the kernel name and its launch config: a cuBLAS kernel
    of the same M, N, K but another tile config is not the same work, and neither is the same name at other shapes."""
    is_kernel = rows["kind"].eq("kernel")
    sep = "\x1f"
    key = (
        rows["name"].astype(str)
        + sep
        + rows["grid"].astype(str)
        + sep
        + rows["block"].astype(str)
        + sep
        + rows["key"].map(repr)
    )
    return key.where(is_kernel, "")


def check(bseq, cseq) -> Comparability:
    """The comparability of candidate run cseq against baseline run bseq (RunSeqs; see the module doc)."""
    b, c = bseq.rows, cseq.rows
    kb, kc = control_keys(b), control_keys(c)
    tb = _per_key(b, kb)
    tc = _per_key(c, kc)
    both = tb.join(tc, how="inner", suffixes=("_b", "_c")) if len(tb) and len(tc) else pd.DataFrame()
    base_kernel_us = float(b["dur_us"].to_numpy(dtype=float).sum())
    spreads = {"base": None, "candidate": None}
    steps = [_n_steps(bseq), _n_steps(cseq)]
    if both.empty:
        return _unchecked(
            f"no kernel ran identically in both runs (same name, launch config and shapes): {cseq.label} and "
            f"{bseq.label} share no control group, so their GPU conditions cannot be compared",
            spreads,
            steps,
        )
    both = both[(both["us_per_call_b"] > 0) & (both["us_per_call_c"] > 0)]
    both["calls"] = np.minimum(both["calls_b"], both["calls_c"])
    both["ratio"] = both["us_per_call_c"] / both["us_per_call_b"]
    both["weight_us"] = both["calls"] * both["us_per_call_b"]
    both = both.sort_values("weight_us", ascending=False, kind="stable")
    ctrl_b = float(both["weight_us"].sum())
    ctrl_c = float((both["calls"] * both["us_per_call_c"]).sum())
    share = ctrl_b / base_kernel_us if base_kernel_us > 0 else 0.0
    listed = _listed(both, b, kb)
    weights = (_position_weights(kb, both, "calls_b"), _position_weights(kc, both, "calls_c"))
    spreads = {
        "base": spread_pct(per_step_us(bseq, weights[0])),
        "candidate": spread_pct(per_step_us(cseq, weights[1])),
    }
    if share < MIN_CONTROL_SHARE:
        out = _unchecked(
            f"the kernels identical in both runs take {share:.1%} of {bseq.label}'s kernel time per step (under "
            f"{MIN_CONTROL_SHARE:.0%}): too little to tell the GPU's conditions apart",
            spreads,
            steps,
        )
        out.control_kernels, out.n_control_kernels = listed, len(both)
        out.control_us_per_step, out.control_share = [ctrl_b, ctrl_c], share
        return out
    pairs = _call_pairs(b, kb, c, kc)
    factor = _weighted_median(pairs["ratio"].to_numpy(float), pairs["weight_us"].to_numpy(float))
    class_factors = {
        str(cls): _weighted_median(g["ratio"].to_numpy(float), g["weight_us"].to_numpy(float))
        for cls, g in pairs.groupby("cls", sort=True)
    }
    class_ranges = {
        str(cls): [float(g["ratio"].min()), float(g["ratio"].max())] for cls, g in pairs.groupby("cls", sort=True)
    }
    point, other, lo, hi = _candidate_factors(kernel_classes(c), class_factors, class_ranges, factor)
    by_class = ", ".join(f"{k} {v:.3f}" for k, v in class_factors.items())
    if "memory" not in class_factors:
        by_class += "; memory-bound kernels: no control kernel, taken at 1.0"
    elif "compute" not in class_factors:
        by_class += "; GEMM/attention: no control kernel, taken at the overall factor"
    known = [s for s in spreads.values() if s is not None]
    tol = max([MIN_TOLERANCE_PCT, *known])
    dev = 100.0 * (factor - 1.0)
    kernels = f"{len(both)} kernel{'s' if len(both) != 1 else ''} ({len(pairs)} call{'s' if len(pairs) != 1 else ''})"
    what = (
        f"{kernels} identical in both runs ({share:.0%} of {bseq.label}'s kernel time) ran {factor:.3f}× as long in "
        f"{cseq.label} ({dev:+.1f}%)"
    )
    unstable = [(lab, s) for lab, s in (("base", spreads["base"]), ("candidate", spreads["candidate"])) if s]
    unstable = [(lab, s) for lab, s in unstable if s > UNSTABLE_SPREAD_PCT]
    if abs(dev) > tol:
        verdict = "skewed"
        reason = (
            f"{what}, beyond the ±{tol:.1f}% tolerance: the GPU ran under other conditions (clock, power, "
            f"temperature, other load); normalised figures divide {cseq.label}'s kernel times by their class's "
            f"factor ({by_class})"
        )
    elif unstable:
        verdict = "skewed"
        who = ", ".join(f"{bseq.label if lab == 'base' else cseq.label} {s:.1f}%" for lab, s in unstable)
        reason = (
            f"{what}, but their time per step varied by more than {UNSTABLE_SPREAD_PCT:.0f}% within a run "
            f"({who}): conditions changed while it was recorded"
        )
    else:
        verdict = "comparable"
        reason = f"{what}, within the ±{tol:.1f}% tolerance"
    ratios = both["ratio"].to_numpy(float)
    notes = []
    if "compute" not in class_factors and (kernel_classes(c) == "compute").any():
        notes.append(
            "no GEMM or attention kernel is identical in both runs: the control group is memory-bound, and a lower "
            "SM clock barely shows in memory-bound kernels, so a clock difference may go unseen"
        )
    return Comparability(
        verdict=verdict,
        reason=reason,
        factor=float(factor),
        kernel_ratio_range=[float(ratios.min()), float(ratios.max())],
        within_run_spread_pct=spreads,
        tolerance_pct=float(tol),
        control_kernels=listed,
        n_control_kernels=len(both),
        control_us_per_step=[ctrl_b, ctrl_c],
        control_share=float(share),
        steps=steps,
        notes=notes,
        n_control_calls=len(pairs),
        control_weight=weights,
        class_factors=class_factors,
        class_ratio_ranges=class_ranges,
        candidate_factors=(point, other),
        candidate_factor_bounds=(lo, hi),
    )


COMPUTE_CATEGORIES = ("gemm", "attention")


def kernel_classes(rows: pd.DataFrame) -> np.ndarray:
    """'compute' (GEMM, attention: bound by the SM clock) or 'memory' (everything else) per GPU op."""
    return np.where(rows["category"].isin(COMPUTE_CATEGORIES).to_numpy(), "compute", "memory")


def _candidate_factors(
    classes: np.ndarray, class_factors: dict, class_ranges: dict, factor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate GPU op: (point, other, low, high) factors. point/other: see Comparability.candidate_factors;
    low/high: the lowest and highest factor its time could take — its class's lowest and highest call ratio, or
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


def _per_key(rows: pd.DataFrame, keys: pd.Series) -> pd.DataFrame:
    """Per identical-kernel key: calls per step and mean time per call (of the per-position medians over steps)."""
    mask = keys.ne("").to_numpy()
    if not mask.any():
        return pd.DataFrame(columns=["calls", "us_per_call"])
    d = pd.DataFrame({"key": keys[mask].to_numpy(), "dur_us": rows["dur_us"].to_numpy(float)[mask]})
    agg = d.groupby("key", sort=False)["dur_us"].agg(["size", "sum"])
    return pd.DataFrame({"calls": agg["size"].astype(int), "us_per_call": agg["sum"] / agg["size"]})


def _call_pairs(b: pd.DataFrame, kb: pd.Series, c: pd.DataFrame, kc: pd.Series) -> pd.DataFrame:
    """The control kernels call by call: the k-th call of a kernel in the baseline's step with its k-th call in the
    candidate's (launch order), each with its ratio (candidate / baseline time), its baseline time as weight and its
    class. Per call, not per kernel: the same GEMM runs slower right behind another GEMM than behind a pointwise
    kernel (H100, round 1: the up projection 1.057× in compile, where it follows the gate GEMM, while the gate and
    down projections read 0.99×), and a median over calls is not moved by one call whose neighbours changed."""
    sides = []
    for rows, keys in ((b, kb), (c, kc)):
        m = keys.ne("").to_numpy()
        d = pd.DataFrame(
            {"key": keys.to_numpy()[m], "dur": rows["dur_us"].to_numpy(float)[m], "cls": kernel_classes(rows)[m]}
        )
        d["occ"] = d.groupby("key", sort=False).cumcount()
        sides.append(d)
    pairs = sides[0].merge(sides[1][["key", "occ", "dur"]], on=["key", "occ"], suffixes=("_b", "_c"))
    pairs = pairs[(pairs["dur_b"] > 0) & (pairs["dur_c"] > 0)]
    return pd.DataFrame(
        {"ratio": pairs["dur_c"] / pairs["dur_b"], "weight_us": pairs["dur_b"], "cls": pairs["cls"]}
    ).reset_index(drop=True)


def _position_weights(keys: pd.Series, both: pd.DataFrame, own_calls: str) -> np.ndarray:
    w = both["calls"] / both[own_calls]
    return keys.map(w).fillna(0.0).to_numpy(float)


def _listed(both: pd.DataFrame, rows: pd.DataFrame, keys: pd.Series) -> list[dict]:
    """The heaviest control kernels, for the JSON and the report: what the factor rests on."""
    first = rows.assign(_key=keys.to_numpy()).drop_duplicates("_key").set_index("_key")
    out = []
    for k, r in both.head(MAX_LISTED).iterrows():
        f = first.loc[k]
        out.append(
            {
                "name": str(f["name"]),
                "op": str(f["op_name"] or ""),
                "shapes": str(f["dims"]),
                "grid": str(f["grid"]),
                "block": str(f["block"]),
                "calls_per_step": [int(r["calls_b"]), int(r["calls_c"])],
                "us_per_call": [float(r["us_per_call_b"]), float(r["us_per_call_c"])],
                "us_per_step": [float(r["calls"] * r["us_per_call_b"]), float(r["calls"] * r["us_per_call_c"])],
                "ratio": float(r["ratio"]),
            }
        )
    return out


def _n_steps(seq) -> int:
    return len(seq.steps_with_signature)


def spread_pct(values) -> float | None:
    """Relative spread of per-step values, in % of their median: (max − min) / median, or (p90 − p10) / median
    from 10 values on (one outlier step in 20 does not set it). None for fewer than 2 values or a zero median."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return None
    med = float(np.median(v))
    if med <= 0:
        return None
    lo, hi = spread_range(v)
    return 100.0 * (hi - lo) / med


def _weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    """The value where the cumulative weight (x sorted) reaches half the total; the mean of the two neighbours
    when it lands exactly on a boundary (two equal-weight kernels: their mean)."""
    order = np.argsort(x, kind="stable")
    x, w = x[order], w[order]
    cum = np.cumsum(w)
    half = cum[-1] / 2.0
    i = int(np.searchsorted(cum, half, side="left"))
    if math.isclose(cum[i], half, rel_tol=1e-12) and i + 1 < len(x):
        return float((x[i] + x[i + 1]) / 2.0)
    return float(x[i])


def _unchecked(reason: str, spreads: dict, steps: list[int]) -> Comparability:
    return Comparability(
        verdict="not checkable",
        reason=reason,
        factor=None,
        kernel_ratio_range=None,
        within_run_spread_pct=spreads,
        tolerance_pct=MIN_TOLERANCE_PCT,
        control_kernels=[],
        n_control_kernels=0,
        control_us_per_step=[0.0, 0.0],
        control_share=0.0,
        steps=steps,
    )
