"""Interleaved recording: the order variants take turns in, and one profiler session split into one trace per variant.

Why interleave: a GPU's clock, power and temperature drift over a session (an H100 running big bf16 GEMMs hits its
power limit and clocks down), so variants recorded one after the other are timed under different conditions: the
same cuBLAS GEMMs ran 11% slower in one variant's trace than in the next, and the diff called the faster variant
slower. Taking turns — a few steps of each variant per round, over several rounds — spreads every variant over the
whole session, so drift lands on all of them alike.

torch.profiler allows one session at a time, so the runner records ONE session in which the variants take turns
(each step is one ProfilerStep#N; the runner notes which variant ran each N) and `split_trace` cuts it into one
Chrome trace per variant: the variant's ProfilerStep windows, the CPU events inside them (any thread: a backward pass
runs on the autograd thread), the GPU ops those CPU events launched (by CUPTI correlation id), the matching flow
arrows, and the metadata events. Pure Python (no torch), so it is tested on real traces without a GPU.
"""

from __future__ import annotations

import bisect
import re

GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "Kernel", "Memcpy", "Memset"})
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def round_orders(variants: list[str], rounds: int) -> list[list[str]]:
    """The order of each round: the list rotated by one per round, so no variant always runs first or always
    follows the same neighbour (with 3 variants: abc, bca, cab, abc, …)."""
    n = len(variants)
    if n == 0:
        return [[] for _ in range(rounds)]
    return [variants[r % n :] + variants[: r % n] for r in range(rounds)]


def step_number(name) -> int | None:
    m = _STEP.match(str(name))
    return int(m.group(1)) if m else None


class _Windows:
    """Step windows (start, end, variant) sorted by start; `at(ts)` is the variant whose window holds ts."""

    def __init__(self, windows: list[tuple[float, float, str]]):
        self.windows = sorted(windows)
        self.starts = [w[0] for w in self.windows]

    def at(self, ts: float) -> str | None:
        i = bisect.bisect_right(self.starts, ts) - 1
        return self.windows[i][2] if i >= 0 and ts <= self.windows[i][1] else None


def _step_windows(events: list, owner: dict[int, str]) -> tuple[_Windows, _Windows]:
    """The CPU and the GPU ProfilerStep windows of the steps in `owner`."""
    cpu, gpu = [], []
    for e in events:
        k = step_number(e.get("name")) if e.get("ph") == "X" else None
        if k is None or k not in owner:
            continue
        ts, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
        (gpu if e.get("cat") in GPU_CATS else cpu).append((ts, ts + dur, owner[k]))
    return _Windows(cpu), _Windows(gpu)


def _later_owner(e: dict, owner: dict, corr: dict, ext_any: dict, gpu: _Windows) -> str | None:
    """The variant of a GPU op or flow arrow: a launch arrow follows its launch (correlation id), a GPU step
    annotation its step, a GPU op its launch, else its own time against the GPU step windows (a launch that was
    not recorded)."""
    ph, args = e.get("ph"), e.get("args") or {}
    if ph in ("s", "f", "t"):
        return corr.get(e.get("id"))
    if e.get("cat") == "gpu_user_annotation":
        k = step_number(e.get("name"))
        return owner.get(k) if k is not None else ext_any.get(args.get("External id"))
    c = args.get("correlation")
    v = corr.get(c) if isinstance(c, int) else None
    if v is None:
        try:
            v = gpu.at(float(e.get("ts")))
        except (TypeError, ValueError):
            v = None
    return v


def split_trace(doc: dict, owner: dict[int, str]) -> dict[str, dict]:
    """One Chrome trace per variant from a trace whose ProfilerStep#N ranges belong to the variants in `owner`
    (step number -> variant). Steps not in `owner` are dropped with everything inside them."""
    events = doc.get("traceEvents") or []
    cpu, gpu = _step_windows(events, owner)
    variants = sorted(set(owner.values()))
    kept: dict[str, list] = {v: [] for v in variants}
    corr: dict[int, str] = {}  # CUPTI correlation id -> variant, from the launches (cuda_runtime / cuda_driver)
    ext: dict[tuple, str] = {}  # (pid, External id) of kept CPU events -> variant
    later = []  # GPU ops and flow arrows: assigned once every launch is known
    meta = []
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            meta.append(e)
            continue
        if e.get("cat") in GPU_CATS or (ph in ("s", "f", "t") and e.get("cat") == "ac2g"):
            later.append(e)  # launch -> kernel arrows follow their launch; fwdbwd arrows go by time like CPU events
            continue
        try:
            v = cpu.at(float(e.get("ts")))
        except (TypeError, ValueError):
            continue
        if v is None:
            continue
        kept[v].append(e)
        args = e.get("args") or {}
        c = args.get("correlation")
        if isinstance(c, int) and c > 0:
            corr[c] = v
        x = args.get("External id")
        if x is not None:
            ext[(e.get("pid"), x)] = v
    ext_any = {x: v for (_, x), v in ext.items()}
    for e in later:
        v = _later_owner(e, owner, corr, ext_any, gpu)
        if v is not None:
            kept[v].append(e)
    top = {k: val for k, val in doc.items() if k != "traceEvents"}
    return {v: {**top, "traceEvents": meta + sorted(kept[v], key=_ts)} for v in variants}


def _ts(e) -> float:
    try:
        return float(e.get("ts", 0.0))
    except (TypeError, ValueError):
        return 0.0
