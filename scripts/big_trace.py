"""Big Kineto traces from a real one: copies of it laid end to end, each shifted in time and given fresh ids, so every
copy stays linked (nothing is committed; the file goes where OUT says, /tmp rather than the repo).

    python scripts/big_trace.py OUT.json.gz [--copies 5] [--src TRACE]
    python scripts/big_trace.py OUT.json --size-mb 1024 --keep-steps --src tests/data/hta/trace_diff/control/control.json.gz

Why derived, not synthetic: the events are a real training trace. Default source: HTA's V100 df_index_resolver
(22k GPU ops). Without --keep-steps the ProfilerStep annotations are dropped, so the analyzer sees ONE step holding
every kernel: the timeline's and the diff's worst case (bench/bench_diff.py, scripts/measure_first_paint.py). With
--keep-steps, copy k renumbers ProfilerStep#N by k x (steps in the source), so the result is one long run with valid
steps (the loader's benchmark, bench/bench_load.py: HTA's A100 trace_diff/control, 34.8 MB of JSON, 109,123 events,
6 ProfilerSteps; ~1 GB = 30 copies = 3.2 M events).

Copy k adds k x (trace span + 1 ms) to every ts and k x (largest id + 1) to flow ids, correlation, External id and
Sequence number; process/thread name events are written once. Events are streamed one per line (orjson), so memory
stays about one copy; a name ending in .gz is gzip-compressed (level 5).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SRC = ROOT / "tests" / "data" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"
ID_ARGS = ("External id", "external id", "correlation", "Sequence number")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _load(path: Path) -> dict:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return orjson.loads(raw)


def _timed(e: dict) -> bool:
    return isinstance(e.get("ts"), int | float)


def _shifts(events: list) -> tuple[float, int, int]:
    """(time shift per copy in us, id shift per copy, ProfilerStep numbers per copy)."""
    t_min = min(e["ts"] for e in events if _timed(e))
    t_max = max(e["ts"] + e.get("dur", 0) for e in events if _timed(e))
    max_id = max_step = 0
    for e in events:
        a = e.get("args") or {}
        for k in ID_ARGS:
            if isinstance(a.get(k), int):
                max_id = max(max_id, a[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
        m = STEP.match(str(e.get("name", "")))
        if m:
            max_step = max(max_step, int(m.group(1)))
    return (t_max - t_min) + 1000.0, max_id + 1, max_step + 1


def _copy(e: dict, c: int, dt: float, did: int, dstep: int) -> dict:
    e2 = dict(e)
    if _timed(e2) and e.get("ph") != "M":
        e2["ts"] = e2["ts"] + c * dt
    if isinstance(e2.get("id"), int):
        e2["id"] = e2["id"] + c * did
    a = e2.get("args")
    if a:
        a = dict(a)
        for k in ID_ARGS:
            if isinstance(a.get(k), int) and a[k] >= 0:
                a[k] = a[k] + c * did
        e2["args"] = a
    m = STEP.match(str(e2.get("name", "")))
    if m:
        e2["name"] = f"ProfilerStep#{int(m.group(1)) + c * dstep}"
    return e2


def copies_for(size_mb: float, src: Path = DEFAULT_SRC, keep_steps: bool = False) -> int:
    """How many copies of src make about size_mb MiB of JSON."""
    events = _events(_load(src), keep_steps)
    return max(1, round(size_mb * 2**20 / len(b",\n".join(orjson.dumps(e) for e in events))))


def _events(doc: dict, keep_steps: bool) -> list:
    events = doc.pop("traceEvents")
    return events if keep_steps else [e for e in events if not STEP.match(str(e.get("name", "")))]


def make_big_trace(out: Path, copies: int = 5, src: Path = DEFAULT_SRC, keep_steps: bool = False) -> dict:
    """Write `copies` copies of src to out; {'events', 'kernels', 'bytes'}."""
    doc = _load(src)
    events = _events(doc, keep_steps)
    dt, did, dstep = _shifts(events)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n_events = n_kernels = 0
    with gzip.open(out, "wb", compresslevel=5) if out.name.endswith(".gz") else open(out, "wb") as f:
        f.write(orjson.dumps(doc)[:-1] + (b"," if doc else b"") + b'"traceEvents":[\n')
        for c in range(copies):
            lines = [orjson.dumps(_copy(e, c, dt, did, dstep)) for e in events if not (c and e.get("ph") == "M")]
            n_events += len(lines)
            n_kernels += sum(1 for e in events if str(e.get("cat", "")).lower() == "kernel")
            f.write((b",\n" if c else b"") + b",\n".join(lines))
        f.write(b"\n]}\n")
    return {"events": n_events, "kernels": n_kernels, "bytes": out.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--copies", type=int, default=5, help="copies of the source (default 5)")
    size.add_argument("--size-mb", type=float, help="as many copies as make about this many MiB of JSON")
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC, help="the real trace to replicate")
    ap.add_argument("--keep-steps", action="store_true", help="keep ProfilerStep annotations (renumbered per copy)")
    ns = ap.parse_args(argv)
    copies = copies_for(ns.size_mb, ns.src, ns.keep_steps) if ns.size_mb else ns.copies
    t = time.perf_counter()
    facts = make_big_trace(ns.out, copies, ns.src, ns.keep_steps)
    print(json.dumps({**facts, "copies": copies, "seconds": round(time.perf_counter() - t, 1)}))
    print(f"wrote {ns.out}: {facts['bytes'] / 2**20:,.0f} MiB, {copies} copies of {ns.src.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
