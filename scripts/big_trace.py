"""Build a 100k+-kernel Kineto trace from a real one, for the timeline's speed test (nothing is committed).

    python scripts/big_trace.py OUT.json.gz [--copies 5] [--src tests/data/hta/df_index_resolver/df_index_resolver.json.gz]

Why derived, not synthetic: the events are a real V100 training trace (HTA's df_index_resolver, 22k GPU ops), laid
end to end `copies` times with time, correlation, External id and flow ids shifted so every copy stays linked.
ProfilerStep annotations are dropped, so the analyzer sees ONE step holding every kernel: the worst case for the
timeline (a 100k+-kernel step), which is what "responsive on a real training trace" must survive.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SRC = ROOT / "tests" / "data" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"
ID_STRIDE = 10_000_000  # larger than any id in the source trace


def make_big_trace(out: Path, copies: int = 5, src: Path = DEFAULT_SRC) -> dict:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    ts = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), int | float)]
    t0 = min(e["ts"] for e in events if isinstance(e.get("ts"), int | float))
    span = max(ts) - t0 + 1000
    out_events = []
    for k in range(copies):
        for e in events:
            e2 = dict(e)
            if isinstance(e2.get("ts"), int | float) and e2.get("ph") != "M":
                e2["ts"] = e2["ts"] + k * span
            if "id" in e2 and isinstance(e2["id"], int):
                e2["id"] = e2["id"] + k * ID_STRIDE
            args = e2.get("args")
            if isinstance(args, dict):
                args = dict(args)
                for key in ("correlation", "External id", "external id"):
                    if isinstance(args.get(key), int) and args[key] >= 0:
                        args[key] = args[key] + k * ID_STRIDE
                e2["args"] = args
            out_events.append(e2)
    doc["traceEvents"] = out_events
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=5))
    kernels = sum(1 for e in out_events if str(e.get("cat", "")).lower() == "kernel")
    return {"events": len(out_events), "kernels": kernels, "bytes": out.stat().st_size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ns = ap.parse_args()
    print(json.dumps(make_big_trace(ns.out, ns.copies, ns.src)))


if __name__ == "__main__":
    main()
