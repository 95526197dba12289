"""Build a big Kineto trace by replicating a real one: each copy shifted in time and given fresh ids.

    python bench/make_big_trace.py --size-mb 1024 --out /tmp/big_1g.json
    python bench/make_big_trace.py --size-mb 2048 --out /tmp/big_2g.json

Source (default): tests/data/hta/trace_diff/control/control.json.gz — a real A100 training trace (HTA, MIT):
34.8 MB of JSON, 109,123 events, 6 ProfilerSteps, 8,568 kernels, cpu_ops with Input Dims. Copy k (k = 0, 1, …)
adds k × (trace span + 1 ms) to every ts, k × (max id + 1) to External id / correlation / flow ids, and
renumbers ProfilerStep#N by k × 6, so the result is one long, self-consistent run: links and steps stay valid.
Events are written one per line (orjson, compact): ~1 GB ≈ 30 copies ≈ 3.2 M events. The output is streamed:
memory stays ~ one copy. Files go where --out says (/tmp, not the repo).
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT / "tests" / "data" / "hta" / "trace_diff" / "control" / "control.json.gz"
ID_ARGS = ("External id", "external id", "correlation", "Sequence number")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load(path: Path) -> dict:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return orjson.loads(raw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--size-mb", type=float, default=1024, help="target uncompressed size, MiB (default 1024)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    doc = load(args.source)
    events = doc.pop("traceEvents")
    x = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t_min = min(e["ts"] for e in x)
    t_max = max(e["ts"] + e.get("dur", 0) for e in x)
    shift_ts = (t_max - t_min) + 1000.0
    max_id = 0
    max_step = 0
    for e in events:
        a = e.get("args") or {}
        for k in ID_ARGS:
            if isinstance(a.get(k), int):
                max_id = max(max_id, a[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
        m = STEP.match(e.get("name", ""))
        if m:
            max_step = max(max_step, int(m.group(1)))
    shift_id = max_id + 1
    one_copy = len(b",\n".join(orjson.dumps(e) for e in events))
    copies = max(1, round(args.size_mb * 2**20 / one_copy))

    t = time.perf_counter()
    with open(args.out, "wb") as f:
        f.write(orjson.dumps(doc)[:-1] + b',"traceEvents":[\n')
        first = True
        for c in range(copies):
            lines = []
            for e in events:
                if c and e.get("ph") == "M":
                    continue  # process/thread names once
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)) and e.get("ph") != "M":
                    e2["ts"] = e2["ts"] + c * shift_ts
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + c * shift_id
                a = e2.get("args")
                if a:
                    a = dict(a)
                    for k in ID_ARGS:
                        if isinstance(a.get(k), int) and a[k] >= 0:
                            a[k] = a[k] + c * shift_id
                    e2["args"] = a
                m = STEP.match(e2.get("name", ""))
                if m:
                    e2["name"] = f"ProfilerStep#{int(m.group(1)) + c * (max_step + 1)}"
                lines.append(orjson.dumps(e2))
            f.write((b"" if first else b",\n") + b",\n".join(lines))
            first = False
        f.write(b"\n]}\n")
    size = args.out.stat().st_size
    print(
        f"wrote {args.out}: {size / 2**20:,.0f} MiB, {copies} copies of {args.source.name}"
        f" ({len(events):,} events each), {time.perf_counter() - t:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
