"""One headline per candidate: the one change a reviewer can quote, on the best-supported figure, with its verdict.

    h = decide(figures, idle=..., span=..., comparability=cd.comparability, labels=(base, candidate))
    h.change_pct, h.basis, h.verdict, h.reason      # what `diff --json` prints as `headline`
    headline_text(h.to_json(), "compile", "eager")  # the one line every surface leads with

Pure: it takes what analyzer.diff.model already computed (per-step times with their ranges over the steady steps and
the call each range gives, the CUDA-event times from the runner's manifest, the comparability verdict) and picks.

The basis, best-supported first (docs/DIFF.md, "The headline"):
1. ``cuda_events``: the runner's CUDA-event time per step, when both manifests have it (100 timed steps each, taken
   in turns, outside the profiler);
2. ``span``: the step's GPU span (first op start to last op end), when idle time per step ROSE by more than
   HOST_SHARE of the baseline's span: the candidate's GPU waited on the host, and the sum of kernel times leaves
   that out (it would oversell). When idle FELL by as much, the reason says so and the GPU time stays the basis:
   under the profiler the host launches slower than without it, and the same program's idle moves by that much
   from one recording to the next (eager HF GEGLU: 80.0 µs of a 335.9 µs step in one recording, 9.7 µs in
   another), so a span that fell with the idle would credit the change with the profiler's own overhead;
3. ``normalised_gpu_time``: the GPU time per step with the candidate's kernel times divided by the condition factor,
   when the comparability check found a control group that normalises (same-context kernels, the probe, or
   kernels in another context beyond their widened tolerance);
4. ``gpu_time``: the raw sum of kernel times per step.

The verdict is the basis's call (``faster`` / ``slower`` when the two runs' ranges over steps do not overlap,
``tie`` otherwise or below RESOLUTION_PCT), or ``uncertain`` when another figure of the GPU's work (the trace's GPU
time, normalised where a factor normalises) calls the opposite beyond its own spread: the reason names both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzer.diff.comparability import UNSTABLE_SPREAD_PCT
from analyzer.fmt import finite, fmt_pct, fmt_us

# An idle change per step beyond this share of the baseline's step span moves the span and the summed kernel time
# apart by as much: the decoder layer of the bundled Gemma set idles 266 µs of a 1,672 µs span in eager and 394 µs
# in compile-fuselens (+7.7%), a 4,096-token layer of a colleague's went from 69 to 455 µs of idle in a 1,529 µs step
# (+25%: GPU time -75.7%, span -47%). Below 10% the two figures tell the same story to within a tenth of the step.
HOST_SHARE = 0.10
RESOLUTION_PCT = 0.5  # as analyzer.diff.measures.RESOLUTION: a change below 0.5% is a tie whatever the ranges say
VERDICTS = ("faster", "slower", "tie", "uncertain")
BASES = ("cuda_events", "span", "normalised_gpu_time", "gpu_time")
BASIS_TEXT = {
    "cuda_events": "CUDA events",
    "span": "step span",
    "normalised_gpu_time": "GPU time, normalised",
    "gpu_time": "GPU time",
}


@dataclass(frozen=True)
class Figure:
    """One per-step time of both runs: [base, candidate] µs, their [low, high] ranges over steps (or None), and the
    call those ranges give ('faster' / 'slower' / 'tie' / None when unknown)."""

    us: tuple[float | None, float | None]
    ranges: tuple[list | None, list | None] = (None, None)
    call: str | None = None

    @property
    def known(self) -> bool:
        b, c = self.us
        return b is not None and c is not None and finite(b) and finite(c) and b > 0

    @property
    def change_pct(self) -> float | None:
        return 100.0 * (self.us[1] - self.us[0]) / self.us[0] if self.known else None


@dataclass
class Headline:
    change_pct: float | None
    basis: str  # one of BASES
    verdict: str  # one of VERDICTS
    reason: str
    us_per_step: list = field(default_factory=list)  # [base, candidate] of the basis
    range_us_per_step: list = field(default_factory=list)  # [[lo, hi], [lo, hi]] of the basis, or [None, None]
    host_bound: bool = False  # idle per step changed by more than HOST_SHARE of the baseline's span

    def to_json(self) -> dict:
        return {
            "change_pct": self.change_pct,
            "basis": self.basis,
            "verdict": self.verdict,
            "reason": self.reason,
            "us_per_step": self.us_per_step,
            "range_us_per_step": self.range_us_per_step,
            "host_bound": self.host_bound,
        }


def _verdict_of(fig: Figure) -> str | None:
    pct = fig.change_pct
    if pct is None:
        return None
    if abs(pct) < RESOLUTION_PCT:
        return "tie"
    return fig.call


def _opposite(a: str | None, b: str | None) -> bool:
    return {a, b} == {"faster", "slower"}


def _said(name: str, fig: Figure) -> str:
    call = _verdict_of(fig) or "no call"
    return f"{name} {fmt_pct(fig.change_pct)} ({call})"


def decide(
    events: Figure | None,
    normalised: Figure | None,
    raw: Figure,
    idle: Figure,
    span: Figure,
    comparability=None,
    labels: tuple[str, str] = ("baseline", "candidate"),
) -> Headline:
    """The headline of one candidate (module doc). events: the runner's CUDA-event time or None; normalised: the GPU
    time at the baseline's conditions or None (no factor, or one that does not normalise); raw: the GPU time as
    recorded; idle, span: per step; comparability: analyzer.diff.comparability.Comparability or None."""
    base, cand = labels
    host = _host_bound(idle, span)
    if normalised is not None and normalised.known:
        trace_name, trace_fig = "GPU time, normalised", normalised
    else:
        trace_name, trace_fig = "GPU time", raw
    basis, fig = _basis(events, normalised, raw, idle, span, host)
    pct = fig.change_pct
    verdict = _verdict_of(fig) or "uncertain"
    what = {
        "cuda_events": "the runner's CUDA events (timed steps outside the profiler)",
        "span": "the step span (first GPU op start to last op end, idle included)",
        "normalised_gpu_time": f"GPU time normalised to {base}'s GPU conditions",
        "gpu_time": "GPU time as recorded (sum of kernel times)",
    }[basis]
    parts = [
        f"{what}: {fmt_us(fig.us[0])} → {fmt_us(fig.us[1])} per step, {fmt_pct(pct)}, "
        + _verdict_words(verdict if _verdict_of(fig) else None)
    ]
    contradicted, said = _cross_check(basis, fig, trace_name, trace_fig, comparability, cand)
    if contradicted:
        verdict = "uncertain"
    parts += said
    unstable = _unstable(comparability, labels)
    if basis != "cuda_events" and unstable:
        verdict = "uncertain"
        parts.append(
            f"but the GPU's conditions changed while {unstable} was recorded (its identical kernels' time varied by "
            f"more than {UNSTABLE_SPREAD_PCT:.0f}% from step to step), so no per-step figure of that trace settles "
            "the change: time both runs with CUDA events (the runner) to quote one"
        )
    parts += _conditions_parts(basis, comparability, raw, labels)
    if host:
        parts.append(_host_words(basis, idle, span, raw, labels))
    return Headline(
        change_pct=pct,
        basis=basis,
        verdict=verdict,
        reason="; ".join(parts),
        us_per_step=[fig.us[0], fig.us[1]],
        range_us_per_step=[fig.ranges[0], fig.ranges[1]],
        host_bound=host,
    )


def _host_bound(idle: Figure, span: Figure) -> bool:
    """The GPU waited on the host: idle per step moved by more than HOST_SHARE of the baseline's step span."""
    ib, ic = idle.us
    sb = span.us[0]
    return bool(
        finite(ib) and finite(ic) and finite(sb) and sb is not None and sb > 0 and abs(ic - ib) > HOST_SHARE * sb
    )


def _basis(
    events: Figure | None, normalised: Figure | None, raw: Figure, idle: Figure, span: Figure, host: bool
) -> tuple[str, Figure]:
    """The figure to quote: CUDA events, else the step span when the candidate waited longer on the host, else the
    normalised GPU time, else the GPU time as recorded."""
    ib, ic = idle.us
    if events is not None and events.known:
        return "cuda_events", events
    if host and ic > ib and span.known:
        return "span", span
    if normalised is not None and normalised.known:
        return "normalised_gpu_time", normalised
    return "gpu_time", raw


def _cross_check(
    basis: str, fig: Figure, trace_name: str, trace_fig: Figure, comparability, cand: str
) -> tuple[bool, list[str]]:
    """The trace's own GPU time against a quoted figure from outside it (CUDA events, step span): (whether it calls
    the opposite beyond its spread, what to say)."""
    if basis == "cuda_events" and _opposite(_verdict_of(fig), _verdict_of(trace_fig)):
        return True, [
            f"but the trace's {_said(trace_name, trace_fig)} calls the opposite, each beyond its spread: "
            + _conditions_words(comparability, cand)
            + "; quote neither until a recording with the runner's control probe settles it"
        ]
    if basis == "span" and _opposite(_verdict_of(fig), _verdict_of(trace_fig)):
        return True, [
            f"but the trace's {_said(trace_name, trace_fig)} calls the opposite, each beyond its spread: the "
            "difference is the host's launch time, which the profiler itself slows, so whether the step is "
            "faster outside the profiler needs a timing with CUDA events (the runner's median_us)"
        ]
    if basis == "cuda_events" and trace_fig.known:
        agree = "agrees" if _verdict_of(trace_fig) == _verdict_of(fig) else "does not contradict it"
        return False, [f"the trace's {_said(trace_name, trace_fig)} {agree}"]
    return False, []


def _conditions_parts(basis: str, comparability, raw: Figure, labels: tuple[str, str]) -> list[str]:
    """What the GPU conditions' check says about the quoted figure: skewed, not checkable, or checked only on
    kernels in another context."""
    base, cand = labels
    verdict_c = comparability.verdict if comparability is not None else "not checkable"
    factor = comparability.factor if comparability is not None else None
    if verdict_c == "skewed" and factor is not None:
        return [
            f"the GPU ran under other conditions in {cand} (SKEWED, factor {factor:.3f}): the raw GPU time "
            f"{fmt_pct(raw.change_pct)} is off by them, do not quote it"
        ]
    if basis == "gpu_time" and verdict_c == "not checkable":
        return [f"the GPU's conditions could not be checked ({base} and {cand} share no control group)"]
    if basis == "gpu_time" and comparability is not None and comparability.source == "context":
        return [
            f"conditions checked only on kernels in another context (factor {factor:.3f}, within "
            f"±{comparability.tolerance_pct:.1f}%): a change inside that tolerance is not settled by the trace alone"
        ]
    return []


def _host_words(basis: str, idle: Figure, span: Figure, raw: Figure, labels: tuple[str, str]) -> str:
    """Which run waited on the host, and how far the step span and the GPU time parted because of it."""
    base, cand = labels
    ib, ic = idle.us
    sb = span.us[0]
    who = cand if ic > ib else base
    return (
        f"the GPU was waiting on the host in {who}: idle per step {fmt_us(ib)} → {fmt_us(ic)} "
        f"({100 * abs(ic - ib) / sb:.0f}% of {base}'s {fmt_us(sb)} step span), so the step span changed "
        f"{fmt_pct(span.change_pct)} where the GPU time changed {fmt_pct(raw.change_pct)}"
        + ("; the CUDA events queue launches ahead, so they leave the host out too" if basis == "cuda_events" else "")
    )


def _unstable(comp, labels: tuple[str, str]) -> str:
    """The run(s) whose control time varied by more than UNSTABLE_SPREAD_PCT over its steps ('' when none)."""
    spreads = getattr(comp, "within_run_spread_pct", None) or {}
    who = [
        lab
        for key, lab in zip(("base", "candidate"), labels, strict=True)
        if (spreads.get(key) or 0) > UNSTABLE_SPREAD_PCT
    ]
    return " and ".join(who)


def _verdict_words(call: str | None) -> str:
    return {
        "faster": "faster (the two runs' ranges over steps do not overlap)",
        "slower": "slower (the two runs' ranges over steps do not overlap)",
        "tie": "a tie (within the step-to-step spread or under 0.5%)",
    }.get(call or "", "no call (no range over steps)")


def _conditions_words(comp, cand: str) -> str:
    if comp is None or comp.factor is None:
        return (
            f"the GPU's conditions could not be checked (no control group), so {cand}'s trace may have run under "
            "other clocks"
        )
    if comp.source == "context":
        return (
            f"the GPU's conditions were checked only on kernels in another context (factor {comp.factor:.3f}, "
            f"tolerance ±{comp.tolerance_pct:.1f}%)"
        )
    return f"conditions {comp.verdict} (factor {comp.factor:.3f})"


def headline_text(h: dict | None, label: str, base_label: str) -> str:
    """The one line every surface leads with: 'compile vs eager: −4.8% per step (CUDA events), faster'."""
    if not h:
        return f"{label} vs {base_label}: no headline"
    basis = BASIS_TEXT.get(h.get("basis"), str(h.get("basis")))
    return f"{label} vs {base_label}: {fmt_pct(h.get('change_pct'), missing='unknown')} per step ({basis}), {h.get('verdict')}"
