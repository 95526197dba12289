"""Multi-rank trace sets: per-rank summaries, cross-rank spread, and the fusion diff across two or more sets.

    report = analyze_ranks("runs/eager_ranks/")                                  # one set
    report = analyze_ranks(["eager/", "compiled.zip"], labels=["eager", "compiled"], diff_rank="slowest")
    report.to_json()   # what `python -m analyzer ranks --json` prints: identical whichever engine ran it

Flow: discover the inputs of each set (ranks_inputs) → one job per file, run by an engine (ranks_local: process
pool; ranks_ray: Ray tasks), each returning a compact dict (ranks_worker) → ranks assigned (distributedInfo.rank,
else the file name's 'rankN', else natural order) → spread per set (ranks_spread) → with several sets, per-rank
GPU-time comparison for every rank (from the summaries already made) and the full fusion diff (diff_runs) on the
chosen rank(s), which reloads those ranks' traces in one worker each.

Why the full diff on ONE rank by default: data-parallel ranks run the same kernels, so the fusion diff of one rank
is the diff of all of them; 'slowest' picks the base set's straggler (the rank with the most compute), the one that
gates every step. `diff_rank="all"` diffs every rank (N extra loads) to check that claim on a real job.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pandas as pd

from analyzer.errors import TraceError
from analyzer.fmt import unique_labels
from analyzer.ranks.inputs import RankInput, discover
from analyzer.ranks.local import LocalEngine
from analyzer.ranks.ray_engine import RayEngine
from analyzer.ranks.spread import compare, spread
from analyzer.ranks.worker import DiffJob, SummaryJob, cached_rank

FORMAT = "fuselens-ranks/1"
# Peak RSS of one worker ≈ BASE + RSS_PER_JSON_BYTE x JSON bytes of its trace. BASE: python + numpy + pandas + the
# analyzer imported (~180 MB measured). Factor: a 254 MB rank peaked at 1,164 MB in a pool worker (bench/results/
# ranks.md: 3.9x the JSON on top of BASE), so 4.5x leaves headroom. Used only to cap the number of workers (and as Ray's per-task memory request).
WORKER_BASE_BYTES = 200 << 20
RSS_PER_JSON_BYTE = 4.5
MEMORY_USE_FRACTION = 0.8
SMALL_SET_JSON_BYTES = 16 << 20  # of MemAvailable at start: leave the rest to the OS, page cache and the parent


@dataclass
class RankReport:
    sets: list[dict]  # per set: label, ranks (entries), failed, notes, world_size, spread
    compare: dict | None = None
    diffs: list[dict] = field(default_factory=list)
    engine: str = "local"  # not part of to_json(): the JSON must not depend on how it was computed
    workers: int = 1

    def to_json(self) -> dict:
        return {"format": FORMAT, "sets": self.sets, "compare": self.compare, "diffs": self.diffs}

    def failed(self) -> list[dict]:
        return [f for s in self.sets for f in s["failed"]]

    def per_rank_frame(self):
        """One row per (set, rank): median step GPU time and its split — for tables and figures."""
        rows = []
        for s in self.sets:
            for e in s["ranks"]:
                split = e.get("split_us") or {}
                rows.append({"set": s["label"], "rank": e["rank"], "file": e["file"], **split})
        return pd.DataFrame(rows)

    def category_frame(self):
        """Long table (set, rank, category, time_us): median per-step GPU time by category."""
        rows = []
        for s in self.sets:
            for e in s["ranks"]:
                by = (e.get("per_step") or {}).get("by_category") or {}
                rows += [
                    {"set": s["label"], "rank": e["rank"], "category": c, "time_us": (v or {}).get("time_us")}
                    for c, v in sorted(by.items())
                ]
        return pd.DataFrame(rows, columns=["set", "rank", "category", "time_us"])


def analyze_ranks(
    sources,
    labels: list[str] | None = None,
    *,
    engine: str = "local",
    address: str | None = None,
    workers: int = 0,
    diff_rank: int | str | None = "slowest",
    ship: str = "paths",
    on_progress: Callable[[int, int], None] | None = None,
) -> RankReport:
    """sources: one set or a list of sets (folder, .zip path, zip bytes, or [(name, bytes)] uploads); the first is the
    base of the comparison. diff_rank: 'slowest' (default), 'all', a rank number, or None for no full diff."""
    if not isinstance(sources, (list, tuple)) or (sources and isinstance(sources[0], tuple)):
        sources = [sources]
    sets_inputs, set_labels = _discover_sets(sources, labels)
    jobs = [SummaryJob(inp) for inputs in sets_inputs for inp in inputs]
    biggest = max(i.est_json_bytes for i in (j.input for j in jobs))
    # Diff jobs hold base + candidates at once: size the pool for that when a comparison will run.
    per_task = _task_bytes(biggest * (len(sources) if len(sources) > 1 and diff_rank is not None else 1))
    n_workers = _worker_count(engine, address, workers, jobs, per_task)

    # Ranks already in the columnar cache are answered here, without a worker (local engine: the parent sees the
    # same files; a cluster's paths may not exist on the driver).
    results = [None] * len(jobs)
    if engine == "local":
        results = [None if (hit := cached_rank(j.input)) is None else {"ok": True, **hit} for j in jobs]
    todo = [i for i, r in enumerate(results) if r is None]
    with _engine(engine, n_workers, address, ship, per_task, biggest * len(sources)) as eng:
        for i, res in zip(todo, eng.map([jobs[i] for i in todo], on_progress) if todo else [], strict=True):
            results[i] = res
        sets, k = [], 0
        for inputs, label in zip(sets_inputs, set_labels, strict=True):
            sets.append(_build_set(label, inputs, results[k : k + len(inputs)]))
            k += len(inputs)
        report = RankReport(sets=sets, engine=eng.name, workers=n_workers)
        if len(sets) > 1:
            report.compare = compare([s["ranks"] for s in sets], set_labels)
            report.diffs = _rank_diffs(eng, sets, sets_inputs, set_labels, diff_rank)
    return report


def _discover_sets(sources: list, labels: list[str] | None) -> tuple[list[list[RankInput]], list[str]]:
    """(each set's inputs, the sets' labels made unique)."""
    if labels is not None and len(labels) != len(sources):
        raise TraceError("--labels", f"{len(labels)} labels for {len(sources)} rank sets")
    sets_inputs = [discover(src, None if labels is None else labels[i]) for i, src in enumerate(sources)]
    set_labels = unique_labels([inputs[0].set_label for inputs in sets_inputs])
    sets_inputs = [[_relabel(i, lab) for i in inputs] for inputs, lab in zip(sets_inputs, set_labels, strict=True)]
    return sets_inputs, set_labels


def _worker_count(engine: str, address: str | None, workers: int, jobs: list, per_task: int) -> int:
    # On a cluster Ray's scheduler sizes the parallelism (CPUs and the memory hint per task); --workers only caps
    # the tasks in flight. On this machine we size it ourselves, from cores and free memory.
    if engine == "ray" and bool(address):
        return max(0, workers or 0)
    total = sum(j.input.est_json_bytes for j in jobs) if engine == "local" else None
    return plan_workers(workers, len(jobs), per_task, total)


def _rank_diffs(eng, sets: list[dict], sets_inputs: list, set_labels: list[str], diff_rank) -> list[dict]:
    """The full fusion diff of the chosen rank(s) across the sets, one worker job per rank."""
    targets = _diff_targets(sets, diff_rank)
    by_rank = []
    for s, inputs in zip(sets, sets_inputs, strict=True):
        by_name = {i.name: i for i in inputs}
        by_rank.append({e["rank"]: by_name[e["file"]] for e in s["ranks"]})
    djobs = [DiffJob(r, tuple(b[r] for b in by_rank), tuple(set_labels)) for r in targets]
    diffs = []
    for job, res in zip(djobs, eng.map(djobs), strict=True):
        entry = {"rank": job.rank, "labels": list(set_labels)}
        entry.update({"result": res["diff"]} if res["ok"] else {"error": res["error"]})
        diffs.append(entry)
    return diffs


def _build_set(label: str, inputs: list[RankInput], results: list[dict]) -> dict:
    ranks, rank_from, notes = assign_ranks(label, inputs, results)
    entries, failed = [], []
    for inp, res, r, src in zip(inputs, results, ranks, rank_from, strict=True):
        if not res["ok"]:
            failed.append({"file": inp.name, "rank": r, "error": res["error"], "internal": bool(res.get("internal"))})
            continue
        body = {k: v for k, v in res.items() if k != "ok"}
        entries.append({"rank": r, "rank_from": src, "file": inp.name, **body})
    entries.sort(key=lambda e: e["rank"])
    failed.sort(key=lambda f: (f["rank"], f["file"]))
    if not entries:
        first = failed[0]["error"] if failed else "no traces"
        raise TraceError(label, f"no rank could be analysed ({len(failed)} failed; first: {first})")
    sizes = sorted(
        {e["distributed"].get("world_size") for e in entries if isinstance(e["distributed"].get("world_size"), int)}
    )
    world = sizes[-1] if sizes else None
    if len(sizes) > 1:
        notes.append(f"ranks disagree on world_size: {sizes}")
    if world is not None and world != len(inputs):
        notes.append(f"{len(inputs)} of {world} ranks present (world_size {world})")
    notes += _not_one_job(entries)
    return {
        "label": label,
        "world_size": world,
        "ranks": entries,
        "failed": failed,
        "notes": notes,
        "spread": spread(entries),
    }


def _not_one_job(entries: list[dict]) -> list[str]:
    """What says these traces may not be one job's ranks: GPUs of different models, and numbers that came from the
    file order alone (Kineto's tb_plugin folder: two ResNet-50 runs and two GPU-metrics fixtures, numbered 0-3)."""
    notes = []
    gpus = sorted({e["gpu_name"] for e in entries if e.get("gpu_name")})
    if len(gpus) > 1:
        notes.append(f"the traces ran on different GPUs ({', '.join(gpus)}): not one job's ranks?")
    by_order = [e["file"] for e in entries if e.get("rank_from") in ("", "order", None)]
    if len(entries) > 1 and len(by_order) == len(entries):
        notes.append(
            "no trace records its rank (distributedInfo or a rank in its file name): the ranks are numbered in file "
            "order, and nothing shows these files are one job's ranks"
        )
    return notes


def assign_ranks(label: str, inputs: list[RankInput], results: list[dict]) -> tuple[list[int], list[str], list[str]]:
    """Rank of each input: distributedInfo.rank, else the file name's rank, else the lowest free number in natural
    file-name order. If distributedInfo ranks collide (e.g. every file says rank 0) but the file names are distinct,
    the file names win, with a note; a collision neither can settle is an error naming both files."""
    notes: list[str] = []
    dist = [_dist_rank(res) for res in results]
    names = [inp.name_rank for inp in inputs]
    chosen = [d if d is not None else n for d, n in zip(dist, names, strict=True)]
    source = [
        "distributedInfo" if d is not None else ("file name" if n is not None else "")
        for d, n in zip(dist, names, strict=True)
    ]
    clash = _first_clash(chosen)
    if clash is not None and None not in names and _first_clash(names) is None:
        notes.append(f"distributedInfo ranks collide (rank {clash} twice); ranks taken from the file names")
        chosen, source = list(names), ["file name"] * len(names)
        clash = None
    if clash is not None:
        a, b = [inputs[i].name for i, r in enumerate(chosen) if r == clash][:2]
        raise TraceError(label, f"rank {clash} appears twice: {a} and {b} (one run per set, please)")
    for i, (d, n) in enumerate(zip(dist, names, strict=True)):
        if d is not None and n is not None and d != n:
            notes.append(f"{inputs[i].name}: file name says rank {n}, distributedInfo says {d}; using {d}")
    used = {r for r in chosen if r is not None}
    free = (r for r in range(len(inputs) + len(used) + 1) if r not in used)
    for i in sorted(range(len(inputs)), key=lambda i: _natural(inputs[i].name)):
        if chosen[i] is None:
            chosen[i], source[i] = next(free), "order"
    return chosen, source, notes


def _dist_rank(res: dict) -> int | None:
    r = (res.get("distributed") or {}).get("rank") if res.get("ok") else None
    return r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else None


def _first_clash(ranks: list[int | None]) -> int | None:
    seen = set()
    for r in ranks:
        if r is not None and r in seen:
            return r
        seen.add(r)
    return None


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _diff_targets(sets: list[dict], diff_rank) -> list[int]:
    if diff_rank is None or diff_rank == "none":
        return []
    common = sorted(set.intersection(*({e["rank"] for e in s["ranks"]} for s in sets)))
    if diff_rank == "all":
        return common
    if diff_rank == "slowest":
        sp = sets[0]["spread"]
        pick = (sp.get("straggler_rank") or sp.get("slowest_rank") or {}).get("rank")
        if pick in common:
            return [pick]
        return common[:1]
    try:
        r = int(diff_rank)
    except (TypeError, ValueError):
        raise TraceError("--diff-rank", f"{diff_rank!r} is not 'slowest', 'all', 'none' or a rank number") from None
    if r not in common:
        raise TraceError("--diff-rank", f"rank {r} is not analysed in every set (common ranks: {_short(common)})")
    return [r]


def _short(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (" …" if len(ranks) > 8 else "") if ranks else "none"


def _relabel(inp: RankInput, label: str) -> RankInput:
    return inp if inp.set_label == label else replace(inp, set_label=label)


def _task_bytes(json_bytes: int) -> int:
    return int(WORKER_BASE_BYTES + RSS_PER_JSON_BYTE * json_bytes)


def available_bytes() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def plan_workers(requested: int, n_jobs: int, task_bytes: int, total_json_bytes: int | None = None) -> int:
    """Workers = requested (0: one per core), at most one per job, and no more than fit in memory at once.

    Auto (0) on a small set (< SMALL_SET_JSON_BYTES in all) is 1, i.e. in-process: starting a pool costs ~1.5 s
    here, about what analysing 30 MB of JSON takes."""
    if not requested and total_json_bytes is not None and total_json_bytes < SMALL_SET_JSON_BYTES:
        return 1
    n = requested if requested and requested > 0 else cpu_count()
    fit = max(1, int(available_bytes() * MEMORY_USE_FRACTION // max(task_bytes, 1)))
    return max(1, min(n, n_jobs, fit))


def _engine(engine: str, workers: int, address: str | None, ship: str, task_bytes: int, max_json_bytes: int):
    if engine == "local":
        if address:
            raise TraceError("--address", "only meaningful with --engine ray")
        return LocalEngine(workers, max_json_bytes=max_json_bytes)
    if engine == "ray":
        return RayEngine(workers, address=address, ship=ship, task_memory_bytes=task_bytes)
    raise TraceError("--engine", f"unknown engine {engine!r} (local or ray)")
