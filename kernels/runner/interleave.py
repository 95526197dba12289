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


def split_trace(doc: dict, owner: dict[int, str]) -> dict[str, dict]:
    """One Chrome trace per variant from a trace whose ProfilerStep#N ranges belong to the variants in `owner`
    (step number -> variant). Steps not in `owner` are dropped with everything inside them."""
    events = doc.get("traceEvents") or []
    windows: list[tuple[float, float, str]] = []  # CPU step windows (start, end, variant), sorted by start
    gpu_windows: list[tuple[float, float, str]] = []
    for e in events:
        if e.get("ph") != "X":
            continue
        k = step_number(e.get("name"))
        if k is None or k not in owner:
            continue
        ts, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
        (gpu_windows if e.get("cat") in GPU_CATS else windows).append((ts, ts + dur, owner[k]))
    windows.sort()
    gpu_windows.sort()
    starts = [w[0] for w in windows]
    gstarts = [w[0] for w in gpu_windows]

    def inside(ws: list, ss: list, ts: float) -> str | None:
        i = bisect.bisect_right(ss, ts) - 1
        if i >= 0 and ts <= ws[i][1]:
            return ws[i][2]
        return None

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
            ts = float(e.get("ts"))
        except (TypeError, ValueError):
            continue
        v = inside(windows, starts, ts)
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
        ph = e.get("ph")
        args = e.get("args") or {}
        v = None
        if ph in ("s", "f", "t"):
            v = corr.get(e.get("id"))
        elif e.get("cat") == "gpu_user_annotation":
            k = step_number(e.get("name"))
            v = owner.get(k) if k is not None else ext_any.get(args.get("External id"))
        else:
            c = args.get("correlation")
            v = corr.get(c) if isinstance(c, int) else None
            if v is None:  # a GPU op whose launch was not recorded: by its own time against the GPU step windows
                try:
                    v = inside(gpu_windows, gstarts, float(e.get("ts")))
                except (TypeError, ValueError):
                    v = None
        if v is not None:
            kept[v].append(e)
    out = {}
    top = {k: val for k, val in doc.items() if k != "traceEvents"}
    for v in variants:
        out[v] = {**top, "traceEvents": meta + sorted(kept[v], key=_ts)}
    return out


def _ts(e) -> float:
    try:
        return float(e.get("ts", 0.0))
    except (TypeError, ValueError):
        return 0.0
