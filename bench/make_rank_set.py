"""Make a synthetic multi-rank set from a REAL one: each rank is the HTA trace_filter rank trace (2 real profiler
steps of a 128-rank NCCL job) replicated step-wise until it reaches the target size — every copy shifted in time,
with fresh External ids / correlation ids / flow ids and renumbered ProfilerSteps, so the result links and steps
like a long real trace.

    python bench/make_rank_set.py --ranks 16 --mb 250 --out /tmp/fuselens_ranks16

Cross-rank variety, so the spread has something to find: rank r's compute kernels run (1 + 0.01·(r mod 4)) times
longer, and one straggler rank (default 5) runs its compute 15% longer, while its NCCL kernels take 30% less time
(the others wait for it inside the collective — the real signature of a straggler).
Written under /tmp (never in the repo). Plain .json by default (--gzip for .json.gz).
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    ROOT / "tests/data/ranks/hta_trace_filter/sampled_rank-0.json.gz",
    ROOT / "tests/data/ranks/hta_trace_filter/sampled_rank-1.json.gz",
]
ID_KEYS = ("External id", "correlation")


def _load(path: Path) -> dict:
    return orjson.loads(gzip.decompress(path.read_bytes()))


def make_rank(src: dict, rank: int, world: int, target_bytes: int, straggler: int) -> bytes:
    events = src["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in xs)
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - t0 + 1000.0  # 1 ms gap between copies
    max_id = 1 + max(
        max(
            (
                int(e["args"].get(k, 0))
                for e in events
                if isinstance(e.get("args"), dict)
                for k in ID_KEYS
                if isinstance(e["args"].get(k), int)
            ),
            default=0,
        ),
        max((int(e["id"]) for e in events if isinstance(e.get("id"), int)), default=0),
    )
    one = len(orjson.dumps(events))
    copies = max(1, round(target_bytes / one))
    compute_scale = 1.0 + 0.01 * (rank % 4) + (0.15 if rank == straggler else 0.0)
    comm_scale = 0.7 if rank == straggler else 1.0
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    steps_per_copy = sum(1 for e in body if str(e.get("name", "")).startswith("ProfilerStep#"))
    out = list(meta)
    for c in range(copies):
        dt, did = c * span, c * max_id
        for e in body:
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = e["ts"] + dt
            if isinstance(e.get("id"), int):
                e["id"] = e["id"] + did
            name = e.get("name", "")
            if isinstance(name, str) and name.startswith("ProfilerStep#"):
                e["name"] = f"ProfilerStep#{int(name[13:]) + c * steps_per_copy}"
            args = e.get("args")
            if isinstance(args, dict):
                args = dict(args)
                for k in ID_KEYS:
                    if isinstance(args.get(k), int) and args[k] >= 0:
                        args[k] += did
                e["args"] = args
            if e.get("cat") == "kernel" and isinstance(e.get("dur"), (int, float)):
                e["dur"] = e["dur"] * (comm_scale if "nccl" in name.lower() else compute_scale)
            out.append(e)
    doc = {k: v for k, v in src.items() if k != "traceEvents"}
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    doc["traceEvents"] = out
    return orjson.dumps(doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--mb", type=float, default=250.0, help="target JSON size per rank, MB (1e6 bytes)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/fuselens_ranks16"))
    ap.add_argument("--straggler", type=int, default=5)
    ap.add_argument("--gzip", action="store_true", help="write .json.gz (level 1)")
    args = ap.parse_args()
    if ROOT in args.out.resolve().parents or args.out.resolve() == ROOT:
        print("error: write the set outside the repository (e.g. /tmp)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    srcs = [_load(p) for p in SOURCES]
    t = time.time()
    total = 0
    for r in range(args.ranks):
        data = make_rank(srcs[r % 2], r, args.ranks, int(args.mb * 1e6), args.straggler)
        path = args.out / (f"rank-{r}.json.gz" if args.gzip else f"rank-{r}.json")
        path.write_bytes(gzip.compress(data, compresslevel=1) if args.gzip else data)
        total += len(data)
        print(f"{path}: {len(data) / 1e6:.0f} MB of JSON", flush=True)
    print(f"{args.ranks} ranks, {total / 1e9:.2f} GB of JSON in {time.time() - t:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
