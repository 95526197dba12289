"""The per-rank work, identical for the local process pool and for Ray: load ONE rank, summarise it, return a compact
JSON-ready dict. The raw events and tables die with the call; what comes back is ~10-30 KB per rank whatever the
trace's size (top kernels, medians, one row per steady-state step), so the parent holds thousands of ranks in
tens of MB.

Never raises: a TraceError/DiffError becomes {"ok": False, "error": <its one line>} so one broken rank of 1,000 does
not cost the other 999; an unexpected exception (an analyzer bug) is reported the same way, marked internal.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

import numpy as np
import orjson

from analyzer.diff import diff_runs
from analyzer.errors import DiffError, TraceError
from analyzer.fmt import clean_json
from analyzer.pipeline import load_summary
from analyzer.ranks.inputs import RankInput, read_input
from analyzer.readers import cache
from analyzer.readers.limits import default_limits

COMM = ("communication",)
MEMORY = ("memcpy", "memset")
TOP_KERNELS = 5  # per rank: enough to name what dominates; the full table is one `summary` call away


@dataclass(frozen=True)
class SummaryJob:
    input: RankInput


@dataclass(frozen=True)
class DiffJob:
    rank: int
    inputs: tuple[RankInput, ...]  # base first, then each candidate's same rank
    labels: tuple[str, ...]


def run_job(job) -> dict:
    """Entry point of every worker (pool process or Ray task)."""
    try:
        if isinstance(job, SummaryJob):
            return {"ok": True, **summarize_rank(job.input)}
        return {"ok": True, "diff": diff_rank(job)}
    except (TraceError, DiffError) as err:
        return {"ok": False, "error": _one_line(str(err))}
    except MemoryError:
        return {"ok": False, "error": f"{_source(job)}: out of memory while analysing this rank; use fewer --workers"}
    except Exception as err:  # noqa: BLE001 — an analyzer bug: report it for this rank, keep the others
        return {
            "ok": False,
            "internal": True,
            "error": _one_line(f"{_source(job)}: internal error {type(err).__name__}: {err}"),
        }
    finally:
        gc.collect()  # the pool may reuse this process; give the trace's arrays back before the next rank


def cached_rank(inp: RankInput) -> dict | None:
    """The result of summarize_rank for an unchanged plain file, from the columnar cache, or None. Cheap (the path's
    stat memo and one entry's header: no hash, no pandas), so the parent asks before starting any worker: a second
    `ranks` on the same set answers without a pool, and a first one costs the parent a stat per file. Shipped
    bytes and zip members are left to their workers (they would have to be hashed or inflated to be keyed)."""
    if inp.data is not None or inp.member or not inp.path or not (cache.enabled() and default_limits()):
        return None
    key = cache.known_key(inp.path)
    return None if key is None else cache.lookup_json(key, RANK_KIND)


RANK_KIND = "rank"  # the per-rank result's entry in the columnar cache (derived from the trace's content alone)


def summarize_rank(inp: RankInput) -> dict:
    src, name = read_input(inp)
    key = cache.usable_key(src)
    hit = None if key is None else cache.lookup_json(key, RANK_KIND)
    if hit is not None:
        return hit
    summary = load_summary(src, name=name, key=key)  # load_trace + summarize, both through the cache
    out = _rank_result(summary)
    if key is not None:
        cache.store_json(key, RANK_KIND, out)
    return out


def _rank_result(summary) -> dict:
    trace = summary.trace
    meta = trace.meta
    dist = meta.distributed if isinstance(meta.distributed, dict) else {}
    steps_used = [int(s) for s in summary.steps_used]
    series = step_series(trace.gpu_ops, trace.steps, steps_used)
    return {
        "gpu_name": meta.gpu_name or "",
        "distributed": {k: clean_json(dist.get(k)) for k in ("backend", "rank", "world_size") if k in dist},
        "events": int(meta.n_events),
        "warnings": len(meta.warnings),
        "warnings_first": [_one_line(w) for w in meta.warnings[:3]],
        "steps_total": len(trace.steps),
        "steps_used": steps_used,
        "per_step": clean_json(summary.per_step),
        "split_us": _medians(series),
        "series": series,
        "top_kernels": top_kernels(summary.kernels),
    }


def diff_rank(job: DiffJob) -> dict:
    summaries = []
    for inp in job.inputs:
        src, name = read_input(inp)
        summaries.append(load_summary(src, name=name))
    diff = diff_runs(summaries[0], summaries[1:], labels=list(job.labels))
    out = diff.to_json()
    if isinstance(out, (str, bytes)):
        out = orjson.loads(out)
    return clean_json(out)


def step_series(gpu_ops, steps, steps_used: list[int]) -> list[dict]:
    """One row per steady-state step: GPU time split into compute / communication / copies, plus the part of
    communication no compute kernel overlaps (exposed — what the step actually waits for) and the GPU idle time.

    Union lengths are computed per device, so a 2-GPU trace does not count one GPU's compute as hiding the other's
    NCCL time."""
    if not steps_used or gpu_ops is None or len(gpu_ops) == 0:
        return []
    used = np.asarray(steps_used, dtype=np.int64)
    g = gpu_ops[gpu_ops["step"].isin(used)]
    step = g["step"].to_numpy(np.int64)
    dev = g["device"].to_numpy(np.int64)
    ts = g["ts_us"].to_numpy(np.float64)
    dur = g["dur_us"].to_numpy(np.float64)
    cat = g["category"].to_numpy(object)
    ok = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0)
    is_comm = np.isin(cat, COMM)
    is_mem = np.isin(cat, MEMORY)
    idle = {}
    if steps is not None and len(steps):
        idle = dict(
            zip(
                steps["step"].to_numpy(np.int64).tolist(),
                steps["gpu_idle_us"].to_numpy(np.float64).tolist(),
                strict=True,
            )
        )
    rows = []
    for s in used.tolist():
        m = (step == s) & ok
        comm_m, mem_m = m & is_comm, m & is_mem
        comp_m = m & ~is_comm & ~is_mem
        exposed = 0.0
        for d in np.unique(dev[comm_m]).tolist():
            cm, km = comm_m & (dev == d), comp_m & (dev == d)
            both = union_us(np.concatenate([ts[cm], ts[km]]), np.concatenate([ts[cm] + dur[cm], ts[km] + dur[km]]))
            exposed += both - union_us(ts[km], ts[km] + dur[km])
        rows.append(
            {
                "step": s,
                "gpu_time_us": float(dur[m].sum()),
                "compute_us": float(dur[comp_m].sum()),
                "communication_us": float(dur[comm_m].sum()),
                "memory_us": float(dur[mem_m].sum()),
                "exposed_communication_us": exposed,
                "idle_us": clean_json(idle.get(s)),
            }
        )
    return rows


def union_us(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of [start, end) intervals: sort once, merge with a running max — O(n log n), no loop."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    seg_end = np.maximum.reduceat(e, first)  # e is in start order; a segment's end is its running max at its last row
    return float((seg_end - s[first]).sum())


def _medians(series: list[dict]) -> dict:
    keys = ("gpu_time_us", "compute_us", "communication_us", "memory_us", "exposed_communication_us", "idle_us")
    out = {}
    for k in keys:
        vals = [r[k] for r in series if r[k] is not None]
        out[k] = float(np.median(vals)) if vals else None
    return out


def top_kernels(kernels) -> list[dict]:
    if kernels is None or len(kernels) == 0:
        return []
    k = kernels.sort_values(["time_us_per_step", "name"], ascending=[False, True], kind="stable").head(TOP_KERNELS)
    cols = ("name", "category", "op_name", "count_per_step", "time_us_per_step", "dur_us_median")
    return [{c: clean_json(row[c]) for c in cols} for row in k.to_dict("records")]


def _one_line(s: str) -> str:
    return " ".join(str(s).split())


def _source(job) -> str:
    if isinstance(job, SummaryJob):
        return job.input.display
    return f"rank {job.rank} ({', '.join(i.display for i in job.inputs)})"
