"""Predicted fused time of every opportunity in one baseline step, ranked by µs saved, and the predicted step.

What each prediction rests on (docs/OPPORTUNITIES.md has the checks against real fused runs):

* **Memory-bound groups**: the fused kernel still moves every tensor entering or leaving the group; what it no
  longer moves is each tensor one member writes and another reads (the diff's bytes-avoided rule, on the cost
  model's per-kernel `bytes`). Fused time = those bytes at the bandwidth this GPU reaches: the runner's measured
  copy bandwidth when the manifest beside the trace has one (`ceilings.copy_gbps`), else the best rate a
  memory-bound kernel of this trace reached (≥ MIN_ROOF_BYTES moved, at or under the HBM peak: a higher figure
  was served by L2), never less than the step's shortest kernel (a launch's floor).
* **Attention and GEMM work** (explicit attention, dual GEMM, GEMM epilogues): the FLOPs at the rate the trace's
  own GEMMs reach — the group's GEMMs' achieved TFLOP/s (an explicit attention's QKᵀ and PV GEMMs; the gate and up
  GEMMs), so the flash kernel or the dual GEMM is predicted to cost what those GEMMs cost; an epilogue adds the
  bytes of any other tensor it reads (a residual) at the bandwidth above.
* **The step**: gpu_busy_us_per_step (the Summary's median) minus the µs each chosen opportunity saves. Of
  overlapping opportunities (a dual GEMM and the gated activation inside it) a plan takes the one that saves most
  among those its takers can run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from analyzer.diff.align import RunSeq, sequence
from analyzer.diff.match import Intermediate
from analyzer.fmt import clean_json, fmt_bytes, short_name
from analyzer.opinfo import optim
from analyzer.opportunities import takers as tk
from analyzer.opportunities.detect import ACTIVATIONS, Group, find_groups
from analyzer.phases import is_training, phase_of_rows
from analyzer.runmeta import run_facts

MIN_ROOF_BYTES = 32 * 2**20  # a kernel moving less spends a visible share of its time starting and draining
MEMORY_CATEGORIES = ("pointwise", "reduction", "normalization", "memcpy")


@dataclass
class Roofs:
    gbps: float
    gbps_source: str
    floor_us: float
    floor_source: str
    hbm_peak_gbps: float | None


@dataclass
class Opportunity:
    id: int
    pattern: str
    kind: str
    members: list[int]
    kernels: list[dict]
    time_us: float
    bytes: float
    bytes_avoided: float
    fused_bytes: float
    fused_us: float
    saved_us: float
    arithmetic: list[str]
    takers: list[str]
    taker_notes: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    shape: str = ""  # the largest tensor a member writes ('[1, 8, 2048, 256] bf16'): tells two RoPEs apart
    alternative_to: int | None = None  # an overlapping opportunity that saves more (the plan takes that one)
    backward: bool = False
    count: int = 1  # identical occurrences per step (one per layer of a model), summed into this row
    # a taker whose own kernel was measured at this problem saves what it measured, not the ideal saved_us
    saved_us_by_taker: dict[str, float] = field(default_factory=dict)

    def saving_us(self, takers: set[str] | None = None) -> float:
        """µs saved when the best of `takers` (None: any) that can take it does."""
        if takers is None:  # the all-tools plan ranks and takes by the ideal
            return self.saved_us
        who = [t for t in self.takers if t in takers]
        return max((self.saved_us_by_taker.get(t, self.saved_us) for t in who), default=float("nan"))

    def lead_taker(self) -> dict | None:
        """The taker predicted to save most here, its µs, and whether that figure was measured (ties: list order);
        the other takers' measured figures beside it. None when nobody can take it."""
        if not self.takers:
            return None
        best = max(self.takers, key=lambda t: _finite(self.saved_us_by_taker.get(t, self.saved_us)))
        return {
            "who": best,
            "saved_us_per_step": self.saved_us_by_taker.get(best, self.saved_us),
            "measured": best in self.saved_us_by_taker,
            "others_measured_us_per_step": {t: v for t, v in self.saved_us_by_taker.items() if t != best},
        }

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "pattern": self.pattern,
            "kind": self.kind,
            "shape": self.shape,
            "kernels_removed": self.kernels,
            "n_kernels": len(self.kernels),
            "count_per_step": self.count,
            "time_us_per_step": self.time_us,
            "bytes_per_step": self.bytes,
            "bytes_avoided_per_step": self.bytes_avoided,
            "fused_bytes_per_step": self.fused_bytes,
            "predicted_fused_us_per_step": self.fused_us,
            "predicted_saved_us_per_step": self.saved_us,
            "predicted_saved_us_per_step_measured_by_taker": self.saved_us_by_taker,
            "lead_taker": self.lead_taker(),
            "arithmetic": self.arithmetic,
            "takers": [{"who": t, "how": tk.HOW[t]} for t in self.takers],
            "taker_notes": self.taker_notes,
            "evidence": self.evidence,
            "alternative_to": self.alternative_to,
            "backward": self.backward,
        }


@dataclass
class Plan:
    source: str
    gpu: str | None
    gpu_busy_us: float
    step: int
    roofs: Roofs
    opportunities: list[Opportunity]  # ranked by predicted µs saved; identical occurrences summed into one row
    training: bool
    notes: list[str]
    seq: RunSeq = field(repr=False)
    instances: list[Opportunity] = field(default_factory=list, repr=False)  # every occurrence, for overlap checks
    row_of: dict[int, int] = field(default_factory=dict, repr=False)  # instance id -> row id
    empty_reason: str = ""  # why nothing was found, when nothing was (_why_none)

    def choose(self, takers: set[str] | None = None) -> list[Opportunity]:
        """Non-overlapping opportunities some taker in `takers` can run (None: any), most µs saved first."""
        chosen: list[Opportunity] = []
        used: set[int] = set()
        pool = self.instances or self.opportunities
        for o in sorted(pool, key=lambda o: -_finite(o.saving_us(takers))):  # stable: ties keep the ranking
            if not o.takers or (takers is not None and not set(o.takers) & takers):
                continue
            saved = o.saving_us(takers)
            if not math.isfinite(saved) or saved <= 0 or used & set(o.members):
                continue
            chosen.append(o)
            used |= set(o.members)
        return chosen

    def predicted_busy_us(self, takers: set[str] | None = None) -> float:
        return self.gpu_busy_us - sum(o.saving_us(takers) for o in self.choose(takers))

    def by_taker(self) -> dict[str, float]:
        out = {t: self.predicted_busy_us({t}) for t in tk.ALL if any(t in o.takers for o in self.opportunities)}
        if any(set(o.takers) & set(tk.FUSELENS) for o in self.opportunities):
            out["FuseLens (all kernels)"] = self.predicted_busy_us(set(tk.FUSELENS))
        return out

    def to_json(self) -> dict:
        chosen = {self.row_of.get(o.id, o.id) for o in self.choose()}
        return clean_json(
            {
                "source": self.source,
                "gpu": self.gpu,
                "training": self.training,
                "step": self.step,
                "gpu_busy_us_per_step": self.gpu_busy_us,
                "predicted_gpu_busy_us_per_step": self.predicted_busy_us(),
                "predicted_saved_us_per_step": self.gpu_busy_us - self.predicted_busy_us(),
                "predicted_gpu_busy_us_per_step_by_taker": self.by_taker(),
                "roofs": {
                    "gbps": self.roofs.gbps,
                    "gbps_source": self.roofs.gbps_source,
                    "floor_us": self.roofs.floor_us,
                    "floor_source": self.roofs.floor_source,
                    "hbm_peak_gbps": self.roofs.hbm_peak_gbps,
                },
                "plan": [o.id for o in self.opportunities if o.id in chosen],
                "opportunities": [o.to_json() for o in self.opportunities],
                "estimates": "predictions: bytes are the cost model's estimates, times are measured kernel medians "
                "scaled by the roofs above; every opportunity's arithmetic says what it rests on",
                "notes": self.notes,
                "empty_reason": self.empty_reason or None,
            }
        )


def _finite(x: float) -> float:
    return x if math.isfinite(x) else -1e18


def roofs(summary, seq: RunSeq) -> Roofs:
    """The bandwidth a fused memory-bound kernel is predicted to reach on this GPU, and a kernel's floor."""
    rows = seq.rows
    gpu = summary.trace.gpu
    peak = gpu.hbm_gbps if gpu is not None else None
    k = rows[rows["kind"].eq("kernel")]
    # the floor: the shortest GPU op of the whole trace (a memset, a tiny kernel): a fused kernel takes at least
    # that long, however few bytes it moves (H100 sample traces: 0.70-1.1 µs)
    dur = summary.trace.gpu_ops["dur_us"].to_numpy(dtype=float)
    dur = dur[np.isfinite(dur) & (dur > 0)]
    floor = float(dur.min()) if len(dur) else 0.0
    floor_src = f"the trace's shortest GPU op ({floor:.2f} µs): a fused kernel takes at least that long"
    ceil = (run_facts(summary.trace.meta).get("ceilings") or {}).get("copy_gbps")
    if isinstance(ceil, (int, float)) and math.isfinite(ceil) and ceil > 0:
        return Roofs(float(ceil), f"the runner's measured copy bandwidth on this GPU (manifest ceilings): "
                     f"{ceil:,.1f} GB/s", floor, floor_src, peak)  # fmt: skip
    mem = k[k["category"].isin(MEMORY_CATEGORIES) & (k["bytes"] >= MIN_ROOF_BYTES) & (k["dur_us"] > 0)]
    gbps = mem["bytes"] / mem["dur_us"] / 1e3
    if peak:
        gbps = gbps[gbps <= peak]
    if len(gbps):
        best = gbps.idxmax()
        g = float(gbps[best])
        name = short_name(rows.at[best, "name"], 48)
        return Roofs(
            g,
            f"this trace's best memory-bound kernel ({name}, {fmt_bytes(rows.at[best, 'bytes'])} in "
            f"{rows.at[best, 'dur_us']:.1f} µs = {g:,.0f} GB/s"
            + (
                f", {100 * g / peak:.0f}% of the {peak:,.0f} GB/s HBM peak)"
                if peak
                else "; the GPU is not in the peak table, so this rate is not checked against its HBM peak: part of "
                "it may be L2 traffic)"
            ),
            floor,
            floor_src,
            peak,
        )
    if peak:
        return Roofs(0.8 * peak, f"80% of the {peak:,.0f} GB/s HBM peak (no memory-bound kernel of this trace "
                     f"moves ≥ {fmt_bytes(MIN_ROOF_BYTES)}: nothing measured to go by)", floor, floor_src, peak)  # fmt: skip
    return Roofs(float("nan"), "unknown: no GPU peak and no memory-bound kernel to measure", floor, floor_src, None)


def _intermediates(g: Group) -> list[Intermediate]:
    by_p: dict[int, Intermediate] = {}
    for p, c, t in g.edges:
        if t is None:
            continue
        by_p.setdefault(p, Intermediate(t, p, [])).consumers.append(c)
    return [by_p[p] for p in sorted(by_p)]


def _tensor_text(t) -> str:
    return f"[{', '.join(map(str, t.shape))}] {t.dtype or '?'}"


def _kernel_rows(rows: list, members: list[int]) -> list[dict]:
    return [
        {
            "pos": m,
            "name": rows[m].name,
            "op": rows[m].op_name,
            "dur_us": float(rows[m].dur_us),
            "bytes": float(rows[m].bytes) if rows[m].bytes is not None else None,
        }
        for m in members
    ]


def _us(x: float) -> str:
    return f"{x:,.1f} µs"


def _predict_memory(rows, g: Group, r: Roofs) -> tuple[float, float, float, float, list[str]]:
    """(bytes, avoided, fused bytes, fused µs, arithmetic) for a memory-bound group."""
    b = np.array([float(rows[m].bytes) if rows[m].bytes is not None else np.nan for m in g.members])
    total = float(b.sum())
    lines = [f"now: {len(g.members)} kernels, {_us(sum(rows[m].dur_us for m in g.members))}, moving "
             f"{fmt_bytes(total)} (cost model, each kernel's bytes)"]  # fmt: skip
    avoided = 0.0
    keeps_first = g.pattern.startswith("residual add")
    for it in _intermediates(g):
        reads = len(it.consumers)
        write = 0 if (keeps_first and it.producer == g.members[0]) else 1
        saved = it.nbytes * (write + reads)
        avoided += saved
        why = "written once, read" if write else "still written (the residual stream goes on), read"
        lines.append(f"{short_name(rows[it.producer].op_name, 28)}'s {_tensor_text(it.tensor)} "
                     f"({fmt_bytes(it.nbytes)}) {why} {reads}× inside → {fmt_bytes(saved)} avoided")  # fmt: skip
    fused = max(total - avoided, 0.0)
    t = fused / r.gbps / 1e3 if r.gbps == r.gbps and r.gbps > 0 else float("nan")
    fused_us = max(t, r.floor_us)
    lines.append(f"fused kernel moves {fmt_bytes(total)} − {fmt_bytes(avoided)} = {fmt_bytes(fused)}; at "
                 f"{r.gbps:,.0f} GB/s = {_us(t)}" + (f" → the {r.floor_us:.2f} µs floor" if t < r.floor_us else ""))  # fmt: skip
    return total, avoided, fused, fused_us, lines


def _gemm_rate(rows, flops: np.ndarray, gemms: list[int]) -> tuple[float, float, float]:
    """(FLOPs, µs, TFLOP/s) of these GEMM kernels (flops: the cost model's, by step position)."""
    f = float(np.nansum(flops[gemms]))
    t = sum(float(rows[m].dur_us) for m in gemms)
    return f, t, (f / t / 1e6 if t > 0 else float("nan"))


def _predict_compute(rows, flops_col: np.ndarray, g: Group, r: Roofs) -> tuple[float, float, float, float, list[str]]:
    b = np.array([float(rows[m].bytes) if rows[m].bytes is not None else np.nan for m in g.members])
    total = float(b.sum())
    avoided = sum(it.round_trip_bytes for it in _intermediates(g))
    flops, t_g, rate = _gemm_rate(rows, flops_col, g.gemms)
    now = sum(rows[m].dur_us for m in g.members)
    lines = [f"now: {len(g.members)} kernels, {_us(now)}, moving {fmt_bytes(total)} (cost model)"]
    for it in _intermediates(g):
        lines.append(f"{short_name(rows[it.producer].op_name, 28)}'s {_tensor_text(it.tensor)} "
                     f"({fmt_bytes(it.nbytes)}) written once, read {len(it.consumers)}× inside → "
                     f"{fmt_bytes(it.round_trip_bytes)} avoided")  # fmt: skip
    fused_us = flops / rate / 1e6 if rate > 0 else float("nan")
    if g.kind == "attention":
        lines.append(f"attention kernel: QKᵀ + PV {flops / 1e9:,.2f} GFLOP at {rate:,.0f} TFLOP/s (these two GEMMs' "
                     f"own rate) = {_us(fused_us)}; whether the mask is causal is not recorded, so the full work is "
                     f"counted (a causal kernel skips about half)")  # fmt: skip
    elif g.kind == "dual_gemm":
        lines.append(f"dual GEMM: {flops / 1e9:,.2f} GFLOP (both GEMMs) at {rate:,.0f} TFLOP/s (their own rate) = "
                     f"{_us(fused_us)}; it writes the gated product only")  # fmt: skip
    else:  # epilogue: the GEMM's own time plus any other tensor the pointwise kernel reads
        pw = [m for m in g.members if m not in g.gemms]
        extra = 0.0
        for m in pw:
            out = rows[g.gemms[0]].io.output
            rb = float(rows[m].bytes) if rows[m].bytes is not None else float("nan")
            extra += max(rb - 2 * (out.nbytes if out is not None else rb / 2), 0.0)
        t_extra = extra / r.gbps / 1e3 if r.gbps > 0 else float("nan")
        lines.append(f"GEMM {flops / 1e9:,.2f} GFLOP at {rate:,.0f} TFLOP/s (its own rate) = {_us(t_g)}"
                     + (f" + {fmt_bytes(extra)} more read at {r.gbps:,.0f} GB/s = {_us(t_extra)}" if extra else "")
                     + "; the pointwise work runs in its epilogue")  # fmt: skip
        fused_us = t_g + t_extra
        avoided = total - sum(float(rows[m].bytes) for m in g.gemms) - extra
    fused = max(total - avoided, 0.0)
    return total, avoided, fused, fused_us, lines


def _predict_attention_backward(rows, flops_col: np.ndarray, g: Group):
    """A flash / cuDNN backward: the eager backward's GEMM FLOPs, plus the QKᵀ it recomputes (5 GEMMs of work where
    eager ran 4: FlashAttention-2's 2.5× the forward), at the rate these GEMMs reach; no score tensor is written."""
    b = np.array([float(rows[m].bytes) if rows[m].bytes is not None else np.nan for m in g.members])
    total = float(np.nansum(b))
    flops, t_g, rate = _gemm_rate(rows, flops_col, g.gemms)
    n = len(g.gemms)
    work = flops * (n + 1) / n if n else float("nan")
    fused_us = work / rate / 1e6 if rate > 0 else float("nan")
    score = max((t.numel for m in g.gemms for t in rows[m].io.inputs), default=0)
    keep = 0.0  # what the fused kernel still moves: the GEMMs' tensors that are not scores (Q, K, V, dO, dQ, dK, dV)
    for m in g.gemms:
        io = rows[m].io
        for t in (*io.inputs, *([io.output] if io.output is not None else ())):
            if t.numel != score and np.isfinite(t.nbytes):
                keep += t.nbytes
    lines = [
        f"now: {len(g.members)} kernels, {_us(sum(rows[m].dur_us for m in g.members))}, moving {fmt_bytes(total)} "
        f"(cost model)",
        f"flash backward: the {n} GEMMs' {flops / 1e9:,.2f} GFLOP × {n + 1}/{n} (it recomputes QKᵀ) = "
        f"{work / 1e9:,.2f} GFLOP at {rate:,.0f} TFLOP/s (these GEMMs' own rate) = {_us(fused_us)}; no score tensor "
        "is written",
    ]
    return total, max(total - keep, 0.0), keep, fused_us, lines


def _predict_optimizer(rows, g: Group):
    """Multi-tensor kernels' bytes are not recorded (TensorList shapes are empty), but their passes over the
    parameter-sized lists are (analyzer.opinfo.optim): the fused step makes its passes at the rate these kernels made
    theirs."""
    calls: dict[int, str] = {}
    for m in g.members:
        ops = [o for o in (rows[m].op_ops or rows[m].name_ops or ()) if o.startswith("_foreach_")]
        key = rows[m].op_index if rows[m].op_index is not None and rows[m].op_index >= 0 else -1 - m
        if ops:
            calls.setdefault(key, ops[0])
    if any(op not in optim.FOREACH_PASSES for op in calls.values()):
        return None
    fused = optim.fused_passes(calls.values())
    if fused is None:
        return None
    name, n_fused = fused
    passes = sum(optim.FOREACH_PASSES[op] for op in calls.values())
    now = float(sum(rows[m].dur_us for m in g.members))
    per = now / passes
    fused_us = per * n_fused
    lines = [
        f"now: {len(g.members)} kernels of {len(calls)} _foreach_ calls, {_us(now)}; bytes not recorded (TensorList "
        "shapes are empty)",
        f"the calls make {passes} passes over the parameter-sized lists (analyzer.opinfo.optim): {_us(per)} a pass at "
        f"these kernels' own rate",
        f"a fused {name} step makes {n_fused} passes (read param, grad, exp_avg, exp_avg_sq; write three): "
        f"{n_fused} × {_us(per)} = {_us(fused_us)}",
    ]
    return float("nan"), float("nan"), float("nan"), fused_us, lines


def _act(rows, members) -> str:
    ops = set()
    for m in members:
        ops |= set(rows[m].op_ops or rows[m].name_ops or ())
    a = sorted(ops & ACTIVATIONS)
    return a[0] if a else ""


def plan_opportunities(summary, seq: RunSeq | None = None) -> Plan:
    """The ranked plan for one run (a Summary)."""
    seq = seq if seq is not None else sequence(summary, "baseline")
    rows = seq.records
    r = roofs(summary, seq)
    flops_col = seq.rows["flops"].to_numpy(dtype=float)
    training = is_training(phase_of_rows(seq.rows))  # autograd nodes, an optimizer, or backward ops (phases)
    gpu_name = summary.trace.meta.gpu_name
    spec = summary.trace.gpu
    amd = any("amd" in str(x or "").lower() or "instinct" in str(x or "").lower()
              for x in (gpu_name, spec.name if spec else None, spec.source if spec else None))  # fmt: skip
    opps: list[Opportunity] = []
    notes: list[str] = list(seq.notes)
    for g in find_groups(seq):
        if not _drop_unsized(rows, g, notes):
            continue
        pred = _predict(rows, flops_col, g, r)
        if pred is None:
            notes.append(f"{g.pattern} at kernels {g.members[:4]}…: not predicted (its passes are not known)")
            continue
        if pred[1] > pred[0] * (1 + 1e-9):  # avoided > moved: a tensor counted as read inside that is not
            notes.append(
                f"{g.pattern} at kernels {g.members[:4]}…: not predicted: the tensors it would keep on chip "
                f"({fmt_bytes(pred[1])} of round trips) outweigh what its kernels move ({fmt_bytes(pred[0])}, cost "
                "model), so the data flow or the byte estimates do not hold here"
            )
            continue
        opps.append(_opportunity(rows, g, pred, training, amd, gpu_name))
    if not training:  # the forward bench measured inference; a training step's kernels also save for backward
        _price_measured_takers(opps, rows, gpu_name)
    opps.sort(key=lambda o: (-_finite(o.saved_us), o.members[0]))
    for i, o in enumerate(opps, start=1):
        o.id = i
    rows_, row_of = _aggregate(opps)
    busy = float(summary.per_step.get("gpu_busy_us", float("nan")))
    plan = Plan(summary.trace.meta.source, gpu_name, busy, seq.step_shown, r, rows_, training, notes, seq, opps, row_of)
    plan.empty_reason = "" if opps else _why_none(seq)
    return plan


# Share of a step's GPU time without a byte estimate above which an empty plan is said to rest on missing shapes
UNSIZED_SHARE = 0.5


def _why_none(seq: RunSeq) -> str:
    """Why a plan found nothing: where most of the step's GPU time has no byte estimate (a trace recorded without
    shapes: HTA's alexnet, nccl and Kineto's GPU-metrics samples), it could not look, which is not 'nothing to fuse'."""
    dur = seq.rows["dur_us"].to_numpy(float)
    unsized = ~np.isfinite(seq.rows["bytes"].to_numpy(float)) if "bytes" in seq.rows else np.ones(len(dur), bool)
    share = float(dur[unsized].sum() / dur.sum()) if dur.sum() > 0 else 1.0
    if share > UNSIZED_SHARE:
        return (
            f"{share:.0%} of the step's GPU time has no byte estimate (its ops recorded no shapes: record_shapes off?), "
            "so fusible work could not be looked for: an empty plan here is not a step with nothing to fuse"
        )
    return "no fusible work found between the compute kernels of this step"


def _price_measured_takers(opps: list[Opportunity], rows, gpu_name: str | None) -> None:
    """A FuseLens GEMM taker measured at exactly an opportunity's GEMM problem on this GPU saves what it measured
    (takers.measured_saving_us); the opportunity's own saved_us stays the ideal, which the all-tools plan ranks by."""
    for o in opps:
        gemm = next((rows[m].gemm for m in o.members if rows[m].gemm is not None), None)
        if gemm is None:
            continue
        for t in o.takers:
            got = tk.measured_saving_us(t, gpu_name, gemm.m, gemm.k, gemm.n, gemm.dtype or "")
            if got is not None:
                o.saved_us_by_taker[t] = got[0]
                o.arithmetic.append(got[1])


def _drop_unsized(rows, g: Group, notes: list[str]) -> bool:
    """Leave the kernels the cost model cannot size out of a priced group (saying so in `notes`); False when what is
    left is no group to price."""
    unknown = [m for m in g.members if rows[m].bytes is None or not np.isfinite(rows[m].bytes)]
    if unknown and g.kind in ("memory", "epilogue", "dual_gemm", "attention"):
        # a kernel the cost model cannot size stays a kernel of its own; the rest of the group is still priced
        notes.append(f"{g.pattern}: {', '.join(str(rows[m].op_name) for m in unknown)} has no byte estimate "
                     "and is left out of the group")  # fmt: skip
        g.members = [m for m in g.members if m not in unknown]
        g.edges = [e for e in g.edges if e[0] in g.members and e[1] in g.members]
        if len(g.members) < 2 or (g.kind != "memory" and set(unknown) & set(g.gemms)):
            return False
    return True


def _predict(rows, flops_col, g: Group, r):
    """The prediction of one group by its kind: (total, avoided, fused bytes, fused µs, arithmetic lines) or None."""
    if g.kind == "memory":
        return _predict_memory(rows, g, r)
    if g.kind == "optimizer":
        return _predict_optimizer(rows, g)
    if g.kind == "attention_backward":
        return _predict_attention_backward(rows, flops_col, g)
    return _predict_compute(rows, flops_col, g, r)


def _measured_notes(rows, g: Group, who: list[str], gpu_name) -> list[str]:
    """What FuseLens's own kernels among the takers measured on this GPU at this group's shape."""
    out = []
    for t in who:
        gm = rows[g.gemms[0]].gemm if g.gemms else None
        if t in tk.FUSELENS:
            if gm is not None:
                line = tk.measured(t, gpu_name, gm.m, gm.k, gm.n, gm.dtype or "")
            else:
                o = rows[g.members[-1]].io.output
                shape = o.shape if o is not None else ()
                mm = int(np.prod(shape[:-1])) if len(shape) > 1 else 0
                line = tk.measured(t, gpu_name, mm, 0, shape[-1] if shape else 0, o.dtype if o else "",
                                   _act(rows, g.members))  # fmt: skip
            if line:
                out.append(f"{t}: {line}")
    return out


def _opportunity(rows, g: Group, pred: tuple, training: bool, amd: bool, gpu_name) -> Opportunity:
    """One priced group: now − fused = saved, with the takers that can do it here and what they measured."""
    total, avoided, fused, fused_us, lines = pred
    now = float(sum(rows[m].dur_us for m in g.members))
    saved = now - fused_us
    lines.append(f"saved {_us(now)} − {_us(fused_us)} = {_us(saved)} per step")
    who, t_notes = tk.available(tk.takers_for(g.kind, g.pattern), training, amd)
    t_notes += _measured_notes(rows, g, who, gpu_name)
    outs = [rows[m].io.output for m in g.members if rows[m].io.output is not None]
    big = max(outs, key=lambda t: t.nbytes if t.nbytes == t.nbytes else 0, default=None)
    return Opportunity(
        0,
        g.pattern,
        g.kind,
        g.members,
        _kernel_rows(rows, g.members),
        now,
        total,
        avoided,
        fused,
        fused_us,
        saved,
        lines,
        who,
        t_notes,
        g.evidence,
        _tensor_text(big) if big else "",
        backward=g.backward,
    )  # fmt: skip


def _alternatives(opps: list[Opportunity]) -> dict[int, int]:
    """{id: id of the chosen instance it overlaps}: instances, most saved first, as the all-tools plan takes them."""
    owner: dict[int, int] = {}  # kernel position -> the chosen instance holding it
    alt: dict[int, int] = {}
    for o in opps:  # instances, most saved first: what the all-tools plan takes, and what each smaller one overlaps
        hit = next((owner[m] for m in o.members if m in owner), None)
        if hit is not None:
            alt[o.id] = hit
        elif o.takers and math.isfinite(o.saved_us) and o.saved_us > 0:  # what Plan.choose() takes
            owner.update(dict.fromkeys(o.members, o.id))
    return alt


def _summed(inst: list[Opportunity]) -> Opportunity:
    """Identical occurrences as one row: figures summed, the first one's arithmetic shown × n."""
    first = inst[0]
    n = len(inst)
    row = Opportunity(
        0, first.pattern, first.kind, sorted(m for o in inst for m in o.members),
        [dict(k) for o in inst for k in o.kernels] if n == 1 else first.kernels,
        sum(o.time_us for o in inst), sum(o.bytes for o in inst), sum(o.bytes_avoided for o in inst),
        sum(o.fused_bytes for o in inst), sum(o.fused_us for o in inst), sum(o.saved_us for o in inst),
        list(first.arithmetic), first.takers, first.taker_notes, first.evidence, first.shape,
        backward=first.backward, count=n,
        saved_us_by_taker={t: sum(o.saved_us_by_taker[t] for o in inst) for t in first.saved_us_by_taker
                           if all(t in o.saved_us_by_taker for o in inst)},
    )  # fmt: skip
    if n > 1:
        row.arithmetic = [f"per occurrence ({n} per step, e.g. one per layer; the first one's figures):"] + [
            "  " + line for line in first.arithmetic
        ]
        row.arithmetic.append(
            f"× {n}: {_us(row.time_us)} now − {_us(row.fused_us)} fused = {_us(row.saved_us)} per step"
        )
    return row


def _aggregate(opps: list[Opportunity]) -> tuple[list[Opportunity], dict[int, int]]:
    """Identical occurrences (same pattern, kernels' ops, largest tensor and takers: one per layer) summed into one
    row, ranked by the total; each smaller overlapping occurrence points at the row the plan takes instead."""
    alt = _alternatives(opps)
    groups: dict[tuple, list[Opportunity]] = {}
    for o in opps:
        key = (o.pattern, o.shape, tuple(k["op"] for k in o.kernels), tuple(o.takers), o.id in alt)
        groups.setdefault(key, []).append(o)
    rows = []
    for inst in groups.values():
        row = _summed(inst)
        row._inst = inst  # noqa: SLF001  (row -> its instances, for the ids below)
        rows.append(row)
    rows.sort(key=lambda o: (-_finite(o.saved_us), o.members[0]))
    row_of: dict[int, int] = {}
    for i, row in enumerate(rows, start=1):
        row.id = i
        for o in row._inst:  # noqa: SLF001
            row_of[o.id] = i
    for row in rows:
        alts = [alt[o.id] for o in row._inst if o.id in alt]  # noqa: SLF001
        row.alternative_to = row_of[alts[0]] if alts else None
        del row._inst  # noqa: SLF001
    return rows, row_of
