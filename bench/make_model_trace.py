"""A whole-model trace from a recorded decoder layer: each profiler step's layer replicated `--layers` times in a row.

    python bench/make_model_trace.py --layers 48 --out /tmp/model        # writes eager/sdpa/compile .json.gz

Source: tests/data/layer_h100 (a Llama-style decoder layer recorded on an H100 by kernels.profile: eager 53, SDPA 46,
torch.compile 18 GPU ops per step). Within every ProfilerStep, the step's events (CPU ops, launches, kernels,
memsets, flows) are laid end to end `layers` times, each copy shifted by the step's own width and given fresh
correlation / External id / flow ids, and the step annotations are stretched over the copies; later steps move
right by what earlier steps grew. So a step holds `layers` × the layer's kernels, still linked launch → kernel → op,
which is the scale a real model's step has (48 layers × 53 = 2,544 GPU ops for eager). Nothing is committed.
"""

from __future__ import annotations

import argparse
import gzip
import re
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "layer_h100"
VARIANTS = ("eager", "sdpa", "compile")
STEP = re.compile(r"^ProfilerStep#\d+$")
ID_STRIDE = 1_000_000  # above any id in the source (its largest is in the thousands)
GAP_US = 2.0  # between two copies of a layer
GPU_CATS = ("kernel", "gpu_memset", "gpu_memcpy", "gpu_user_annotation")


def _shift_ids(e: dict, add: int) -> dict:
    e = dict(e)
    if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
        e["id"] += add
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for k in ("correlation", "External id", "Ev Idx"):
            if isinstance(args.get(k), int) and args[k] > 0:
                args[k] += add
        e["args"] = args
    return e


def replicate(doc: dict, layers: int) -> dict:
    events = doc["traceEvents"]
    steps = sorted(
        (e for e in events if STEP.match(str(e.get("name", ""))) and e.get("cat") == "user_annotation"),
        key=lambda e: e["ts"],
    )
    starts = [s["ts"] for s in steps] + [float("inf")]
    # step of each CPU-side event by time window; GPU-side events follow their launch's correlation id
    corr_step: dict[int, int] = {}
    member: dict[int, list[dict]] = {j: [] for j in range(len(steps))}
    rest = []
    gpu_side = []
    for e in events:
        name = str(e.get("name", ""))
        if STEP.match(name) or e.get("ph") == "M" or "ts" not in e:
            rest.append(e)
            continue
        if e.get("cat") in GPU_CATS or (e.get("ph") == "f"):
            gpu_side.append(e)
            continue
        j = next((i for i in range(len(steps)) if starts[i] <= e["ts"] < starts[i + 1]), None)
        if j is None:
            rest.append(e)
            continue
        member[j].append(e)
        c = (e.get("args") or {}).get("correlation")
        if isinstance(c, int):
            corr_step[c] = j
        if e.get("ph") == "s" and isinstance(e.get("id"), int):
            corr_step.setdefault(e["id"], j)
    for e in gpu_side:
        c = (e.get("args") or {}).get("correlation", e.get("id") if e.get("ph") == "f" else None)
        j = corr_step.get(c) if isinstance(c, int) else None
        (member[j] if j is not None else rest).append(e)

    out, grow = [], 0.0
    stretch: dict[int, tuple[float, float]] = {}  # step index -> (offset, added width)
    for j in range(len(steps)):
        evs = member[j]
        lo = min(e["ts"] for e in evs)
        hi = max(e["ts"] + float(e.get("dur", 0) or 0) for e in evs)
        width = hi - lo + GAP_US
        for k in range(layers):
            add_t = grow + k * width
            add_id = (j * layers + k) * ID_STRIDE if k else 0
            for e in evs:
                e2 = _shift_ids(e, add_id) if add_id else dict(e)
                e2["ts"] = e["ts"] + add_t
                out.append(e2)
        stretch[j] = (grow, (layers - 1) * width)
        grow += (layers - 1) * width
    for e in rest:
        e2 = dict(e)
        name = str(e.get("name", ""))
        if STEP.match(name):
            j = next(i for i, s in enumerate(steps) if s["name"] == name)
            off, add = stretch[j]
            e2["ts"] = e["ts"] + off
            e2["dur"] = float(e.get("dur", 0)) + add
        elif "ts" in e and e.get("ph") != "M" and steps and e["ts"] >= starts[0]:
            e2["ts"] = e["ts"] + grow  # after the last step (e.g. the trace's end marker)
        out.append(e2)
    return {**doc, "traceEvents": out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=48)
    p.add_argument("--out", type=Path, required=True, help="folder for <variant>.json.gz")
    p.add_argument("--prefix", default="model_", help="file name prefix (a run's label)")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for v in VARIANTS:
        doc = orjson.loads(gzip.decompress((SOURCE / f"{v}.json.gz").read_bytes()))
        big = replicate(doc, a.layers)
        path = a.out / f"{a.prefix}{v}.json.gz"
        path.write_bytes(gzip.compress(orjson.dumps(big), 6))
        print(f"{path}: {len(big['traceEvents']):,} events, {path.stat().st_size / 2**20:,.1f} MiB")


if __name__ == "__main__":
    main()
