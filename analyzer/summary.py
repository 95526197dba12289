"""Per-step summary of one trace: medians over steady-state steps, and the KERNEL_SUMMARY table.

summarize(trace) -> Summary. Summary.to_json() is what `python -m analyzer summary --json` prints.

Steady state: with 3 or more profiler steps the FIRST is dropped (it carries warm-up: lazy CUDA/cuBLAS init,
allocator growth, autotuning, often tens of extra kernels); with 1–2 steps all are used. Steps without a single
GPU op are never used (e.g. a last ProfilerStep cut short before it launched anything). A trace without step
markers is one step, 0. docs/COST_MODEL.md ("Summary") has the details.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import orjson
import pandas as pd

from analyzer import schema
from analyzer.codes import factorize, object_codes
from analyzer.cost import hbm_flags
from analyzer.dram import predict_steady
from analyzer.fmt import clean_json
from analyzer.steps import spread_range, spread_rule
from analyzer.trace import Trace

STEP_POLICY = (
    "first step dropped as warm-up when a trace has 3 or more steps; steps with no GPU op are skipped; in a truncated"
    " file the last step too"
)
ESTIMATES_NOTE = (
    "bytes and FLOPs are ESTIMATES from each kernel's launching op (recorded Input Dims/types/strides), not "
    "hardware counters; every kernel's cost_basis says what its figure rests on; null = unknown"
)
DRAM_NOTE = (
    "bytes_per_call is LOGICAL (every tensor read and written once, as if none stayed in cache); "
    "dram_bytes_per_call is PREDICTED DRAM traffic in sequence (analyzer.dram: reuse of earlier kernels' tensors "
    "against the GPU's L2 size in launch order, GEMM operand panels re-read by their tile walk, outputs written "
    "back by their kernel), on per_step.dram_step; "
    "dram_basis says what it rests on"
)
_MEMOP_KINDS = ("memcpy", "memset")
# Loader warnings that put a run's figures in doubt (the file was cut, damaged, or held values of the wrong type).
DOUBTFUL_LOAD = ("truncated", "corrupt", "unexpected types", "implausible", "checksum mismatch")


@dataclass
class Summary:
    trace: Trace
    steps_used: list[int]  # steady-state steps the medians are taken over
    # medians over steps_used of the step table's columns: {'kernels', 'memops', 'launches', 'gpu_time_us',
    #  'gpu_busy_us', 'span_us', 'idle_us', 'launch_latency_us', 'bytes', 'ops_without_bytes',
    #  'ops_without_duration', 'spread': {time: [low, high]}, 'spread_rule',
    #  'by_category': {category: {'count', 'time_us', 'bytes', 'ops_without_bytes'}}}
    per_step: dict
    kernels: pd.DataFrame  # KERNEL_SUMMARY contract
    steps: pd.DataFrame = field(default_factory=lambda: schema.empty("step_table"))  # STEP_TABLE: every step
    warnings: list[str] = field(default_factory=list)  # summary-level remarks (steps dropped, unknown bytes …)

    @property
    def doubts(self) -> list[str]:
        """Why this run's headline figures cannot be trusted, one short reason each (empty when nothing is known
        to be wrong): shown beside the figures wherever they appear, not only in a collapsed loader note."""
        out = []
        ps = self.per_step or {}
        n = ps.get("ops_without_duration")
        if isinstance(n, (int, float)) and math.isfinite(n) and n > 0:
            out.append(f"{n:g} GPU op(s) per step have no usable duration, so GPU time per step is unknown")
        if not self.steps_used:
            out.append("no profiler step holds a GPU op")
        for w in self.trace.meta.warnings or []:
            low = w.lower()
            if any(k in low for k in DOUBTFUL_LOAD):
                out.append(w)
        return out

    @property
    def meta(self):
        return self.trace.meta

    def to_json(self) -> dict:
        """What `python -m analyzer summary --json` prints. NaN never appears: unknown numbers are None."""
        meta = self.trace.meta
        gpu = self.trace.gpu
        kernels = [
            {
                "name": r.name,
                "category": r.category,
                "library": r.library,
                "ops": [o for o in str(r.ops).split("+") if o],
                "op_name": r.op_name,
                "shapes": r.shapes,
                "dtypes": r.dtypes,
                "count_per_step": r.count_per_step,
                "time_us_per_step": r.time_us_per_step,
                "dur_us_median": r.dur_us_median,
                "bytes_per_call": r.bytes_per_call,
                "dram_bytes_per_call": r.dram_bytes_per_call,
                "flops_per_call": r.flops_per_call,
                "achieved_gbps": r.achieved_gbps,
                "achieved_tflops": r.achieved_tflops,
                "pct_peak_bw": r.pct_peak_bw,
                "pct_peak_flops": r.pct_peak_flops,
                "cost_basis": r.cost_basis,
                "flags": list(r.flags),
                "dram_basis": r.dram_basis,
            }
            for r in self.kernels.itertuples(index=False)
        ]
        out = {
            "source": meta.source,
            "schema": meta.schema,
            "gpu": meta.gpu_name or None,
            "gpu_peaks": None
            if gpu is None
            else {
                "matched": gpu.name,
                "hbm_gbps": gpu.hbm_gbps,
                "tflops": dict(gpu.tflops),
                "l2_bytes": gpu.l2_bytes,
                "source": gpu.source,
                "matched_on": gpu.matched_on,
            },
            "steps": int(len(self.trace.steps)),
            "steps_used": [int(s) for s in self.steps_used],
            "step_policy": STEP_POLICY,
            "per_step": self.per_step,
            "step_table": self.steps.to_dict("records"),
            "kernels": kernels,
            "estimates": ESTIMATES_NOTE,
            "dram_model": DRAM_NOTE,
            "warnings": list(meta.warnings) + list(self.warnings),
        }
        return clean_json(out)


def steady_steps(steps: pd.DataFrame, truncated: bool = False) -> tuple[list[int], list[str]]:
    """(steps to take medians over, remarks). See the module doc for the rule. `truncated`: the file was cut
    mid-event, so its last step with GPU work may hold only the kernels recorded before the cut (a compile step
    of 4 kernels read 2.5 per step from a file cut at 15%): that step is dropped too while another one remains."""
    if len(steps) == 0:
        return [], ["no profiler step holds a GPU op"]
    ordered = steps.sort_values("start_us", kind="stable")
    with_work = ordered[ordered["kernels"] > 0]
    remarks = []
    if len(with_work) < len(ordered):
        empty = sorted(set(ordered["step"]) - set(with_work["step"]))
        remarks.append(f"steps {empty} have no GPU op and are skipped")
    if len(with_work) == 0:
        return [], remarks + ["no profiler step holds a GPU op"]
    used = with_work["step"].astype(int).tolist()
    if len(ordered) >= 3 and len(used) >= 2 and used[0] == int(ordered["step"].iloc[0]):
        remarks.append(f"step {used[0]} (the first) dropped as warm-up")
        used = used[1:]
    if truncated and len(used) >= 2:
        remarks.append(f"step {used[-1]} (the last before the file's cut) dropped: it may be partial")
        used = used[:-1]
    return used, remarks


def _median(values) -> float:
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0 or np.isnan(arr).any():
        return float("nan")
    return float(np.median(arr))


def _whole(x: float):
    """A median of counts: an int when it is one (a median of 2 steps can be x.5)."""
    return int(x) if math.isfinite(x) and float(x).is_integer() else x


def step_table(trace: Trace, used: list[int]) -> pd.DataFrame:
    """STEP_TABLE: every profiler step's own figures (the warm-up step included, `steady` marks the steps the
    medians are taken over), in step order. The one place per-step times are computed: the Summary's medians and
    spreads, `summary --json`'s step_table, the diff and every page read them from here."""
    steps = trace.steps.sort_values("start_us", kind="stable").set_index("step")
    g = trace.gpu_ops[(trace.gpu_ops["step"] >= 0).to_numpy()]
    order = steps.index
    is_kernel = (g["kind"] == "kernel").to_numpy()
    per = pd.DataFrame(index=pd.Index(order, name="step"))
    per["steady"] = per.index.isin(used)
    per["kernels"] = pd.Series(is_kernel, index=g.index).groupby(g["step"]).sum()
    per["memops"] = pd.Series(~is_kernel, index=g.index).groupby(g["step"]).sum()
    corr = g.loc[is_kernel & (g["correlation"] >= 0).to_numpy(), ["step", "correlation"]]
    per["launches"] = corr.drop_duplicates().groupby("step").size()  # a graph replay is one launch, many kernels
    # A step holding a GPU op of unknown duration (a value of the wrong type in the file, an implausible one set
    # to unknown by the trace builder) has an unknown GPU time: summing the rest would headline "1.6 µs, -99.3%".
    no_dur = g["dur_us"].isna()
    per["gpu_time_us"] = g["dur_us"].groupby(g["step"]).sum().where(~no_dur.groupby(g["step"]).any())
    per["ops_without_duration"] = no_dur.groupby(g["step"]).sum()
    unknown = g["bytes"].isna()
    per["bytes"] = g["bytes"].groupby(g["step"]).sum().where(~unknown.groupby(g["step"]).any())
    per["ops_without_bytes"] = unknown.groupby(g["step"]).sum()
    per = per.fillna({"kernels": 0, "memops": 0, "launches": 0, "ops_without_bytes": 0, "ops_without_duration": 0})
    per.loc[per["kernels"] + per["memops"] == 0, "gpu_time_us"] = 0.0  # no op in the step: 0 µs is a fact
    for ours, theirs in (
        ("gpu_busy_us", "gpu_busy_us"),
        ("span_us", "gpu_span_us"),
        ("idle_us", "gpu_idle_us"),
        ("launch_latency_us", "launch_latency_us"),
    ):
        per[ours] = steps[theirs].to_numpy(dtype=float)
    return schema.conform(per.reset_index(), "step_table")


# the per-step times whose spread over steady steps is shown beside their median
SPREAD_KEYS = ("gpu_time_us", "gpu_busy_us", "span_us", "idle_us")
_COUNTS = ("kernels", "memops", "launches", "ops_without_bytes", "ops_without_duration")


def _per_step(table: pd.DataFrame, g: pd.DataFrame, used: list[int]) -> dict:
    """Medians over the steady rows of the step table, their spreads, and the per-category medians."""
    steady = table[table["steady"].to_numpy(dtype=bool)]
    cols = [c for c in table.columns if c not in ("step", "steady")]
    out = {c: _median(steady[c]) for c in cols}
    for c in _COUNTS:
        out[c] = _whole(out[c])
    out["spread"] = {c: _range(steady[c]) for c in SPREAD_KEYS}
    out["spread_rule"] = spread_rule(len(steady))
    out["by_category"] = _by_category(g, used)
    return out


def _range(values) -> list[float] | None:
    lo, hi = spread_range(values)
    return None if not (math.isfinite(lo) and math.isfinite(hi)) else [lo, hi]


def _by_category(g: pd.DataFrame, used: list[int]) -> dict:
    """{category: {count, time_us, bytes, ops_without_bytes}}: medians over steps (absent in a step = 0;
    bytes is NaN for a step where any op of the category has unknown bytes)."""
    if g.empty:
        return {}
    unknown = g["bytes"].isna()
    agg = (
        g.assign(_unknown=unknown)
        .groupby(["category", "step"])
        .agg(count=("dur_us", "size"), time_us=("dur_us", "sum"), bytes=("bytes", "sum"), unk=("_unknown", "sum"))
    )
    agg["bytes"] = agg["bytes"].where(agg["unk"] == 0)
    out = {}
    order = [c for c in schema.CATEGORIES if c in agg.index.get_level_values(0)]
    for cat in order:
        part = agg.loc[cat].reindex(used)
        absent = part["count"].isna()
        part = part.fillna({"count": 0, "time_us": 0.0, "unk": 0})
        part.loc[absent, "bytes"] = 0.0  # no op of this category in that step: 0 bytes is a fact, not a guess
        out[cat] = {
            "count": _whole(_median(part["count"])),
            "time_us": _median(part["time_us"]),
            "bytes": _median(part["bytes"]),
            "ops_without_bytes": _whole(_median(part["unk"])),
        }
    return out


def _group_codes(g: pd.DataFrame) -> np.ndarray:
    """One code per distinct (kernel name, launching op, op input dims), from integer codes (no MultiIndex)."""
    key = np.zeros(len(g), dtype=np.int64)
    for values in (g["name"].to_numpy(dtype=object), g["op_name"].to_numpy(dtype=object)):
        codes, uniques = factorize(values)
        key = pd.factorize(key * len(uniques) + codes)[0].astype(np.int64)
    codes, first = object_codes(g["input_dims"].to_numpy(dtype=object))  # no object per row (analyzer/codes.py)
    return pd.factorize(key * len(first) + codes)[0]


def shapes_text(value) -> str:
    """A kernel's op input dims as the kernel table's `shapes` text ('' unknown)."""
    return "" if value is None else orjson.dumps(value).decode()


def _kernel_table(trace: Trace, g: pd.DataFrame, used: list[int], dram: pd.DataFrame | None = None) -> pd.DataFrame:
    if g.empty or not used:
        return schema.empty("kernel_summary")
    k = pd.Series(_group_codes(g), index=g.index, name="_k")
    per = (
        pd.DataFrame({"_k": k, "step": g["step"], "dur": g["dur_us"]})
        .groupby(["_k", "step"])["dur"]
        .agg(["size", "sum"])
    )
    n = per["size"].unstack("step").reindex(columns=used).fillna(0)
    t = per["sum"].unstack("step").reindex(columns=used).fillna(0.0)
    by = g.groupby(k, sort=True)
    first_pos = pd.Series(np.arange(len(g)), index=g.index).groupby(k, sort=True).first().to_numpy()
    head = g.iloc[first_pos]
    text = {c: head[c].to_numpy(dtype=object) for c in ("name", "category", "library", "ops", "op_name", "cost_basis")}
    tab = pd.DataFrame(
        {
            **{c: text[c] for c in ("name", "category", "library", "ops", "op_name")},
            "shapes": [shapes_text(v) for v in head["input_dims"].to_numpy(dtype=object)],
            "dtypes": [shapes_text(v) for v in head["input_types"].to_numpy(dtype=object)],
            "count_per_step": n.median(axis=1).to_numpy(),
            "time_us_per_step": t.median(axis=1).to_numpy(),
            "dur_us_median": by["dur_us"].median().to_numpy(),
            "bytes_per_call": by["bytes"].median().to_numpy(),  # NaN-skipping: calls of one key share an estimate
            "flops_per_call": by["flops"].median().to_numpy(),
        }
    )
    dur = tab["dur_us_median"].where(tab["dur_us_median"] > 0)
    tab["achieved_gbps"] = tab["bytes_per_call"] / dur / 1e3
    tab["achieved_tflops"] = (tab["flops_per_call"] / dur / 1e6).where(tab["flops_per_call"] > 0)
    # % of peak only where the per-call rows had one (HtoD copies and non-matrix FLOPs have none); the peak
    # itself is recovered from a row: achieved / pct * 100
    bw_peak = (g["achieved_gbps"] / g["pct_peak_bw"] * 100.0).where(g["pct_peak_bw"] > 0)
    fl_peak = (g["achieved_tflops"] / g["pct_peak_flops"] * 100.0).where(g["pct_peak_flops"] > 0)
    tab["pct_peak_bw"] = tab["achieved_gbps"] / bw_peak.groupby(k, sort=True).first().to_numpy() * 100.0
    tab["pct_peak_flops"] = tab["achieved_tflops"] / fl_peak.groupby(k, sort=True).first().to_numpy() * 100.0
    unknown_calls = g["bytes"].isna().groupby(k, sort=True).sum().to_numpy()
    mixed = (unknown_calls > 0) & tab["bytes_per_call"].notna().to_numpy()
    tab["cost_basis"] = [
        f"{b} [{u} calls without an estimate]" if m else b
        for b, u, m in zip(text["cost_basis"], unknown_calls, mixed, strict=True)
    ]
    # predicted DRAM bytes: the model runs on one steady step (analyzer.dram), so calls of a key outside that step
    # have none; a key's calls in it can differ (what the cache holds depends on the neighbours): their median
    dram_per_call = np.full(len(tab), np.nan)
    dram_basis = np.full(len(tab), "unknown: not in the step the DRAM model ran on", dtype=object)
    if dram is not None and len(dram):
        at = g.index.get_indexer(dram.index)  # the model's step is a subset of g
        codes = k.to_numpy()[at]
        per = pd.Series(dram["dram_bytes"].to_numpy(dtype=float)).groupby(codes).median()
        dram_per_call[per.index.to_numpy()] = per.to_numpy()
        first = pd.Series(np.arange(len(at))).groupby(codes).first()
        dram_basis[first.index.to_numpy()] = dram["dram_basis"].to_numpy(dtype=object)[first.to_numpy()]
    tab["dram_bytes_per_call"] = dram_per_call
    tab["dram_basis"] = pd.Series(dram_basis, dtype=object)
    # a rate above the HBM peak is flagged where the rate is HBM traffic (pct_peak_bw is NaN for host copies)
    gpu = trace.gpu
    tab["flags"] = hbm_flags(tab["achieved_gbps"], gpu.hbm_gbps if gpu else None, tab["pct_peak_bw"].notna())
    tab = tab.sort_values(["time_us_per_step", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return schema.conform(tab, "kernel_summary")


def summarize(trace: Trace) -> Summary:
    truncated = any(str(w).startswith("file is truncated") for w in trace.meta.warnings or [])
    used, remarks = steady_steps(trace.steps, truncated=truncated)
    gpu_ops = trace.gpu_ops
    g = gpu_ops[gpu_ops["step"].isin(used).to_numpy()] if used else gpu_ops.iloc[0:0]
    table = step_table(trace, used)
    per_step = _per_step(table, g, used)
    dram = predict_steady(trace, g, used)
    per_step.update(dram.totals())
    unknown = per_step.get("ops_without_bytes")
    no_dur = per_step.get("ops_without_duration")
    if isinstance(no_dur, (int, float)) and no_dur and math.isfinite(no_dur):
        remarks.append(f"{no_dur:g} GPU ops per step have no usable duration: GPU time per step is unknown (null)")
    if isinstance(unknown, (int, float)) and unknown and math.isfinite(unknown):
        remarks.append(
            f"{unknown:g} GPU ops per step have no byte estimate (see their cost_basis): per-step byte totals "
            "that include them are null"
        )
    return Summary(
        trace=trace,
        steps_used=used,
        per_step=per_step,
        kernels=_kernel_table(trace, g, used, dram.ops),
        steps=table,
        warnings=remarks,
    )
