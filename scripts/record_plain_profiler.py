"""Record a whole Hugging Face model the way a teammate does, without FuseLens's runner: plain `torch.profiler` with
a wait/warmup/active schedule and `export_chrome_trace`, no manifest, no control probe, no interleaving.

    python scripts/record_plain_profiler.py --workload llama-model --layers 4 --variant eager --train --out run.json.gz

These traces are the analyzer's held-out input: what `fuselens diff` must get right with nothing but the trace.
The model is kernels.models.whole_model's (transformers' LlamaForCausalLM / GemmaForCausalLM, random weights).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="llama-model", choices=("llama-model", "gemma-model"))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--variant", default="eager", choices=("eager", "sdpa", "compile"))
    p.add_argument("--train", action="store_true")
    p.add_argument("--active", type=int, default=3, help="profiled steps (schedule active=)")
    p.add_argument("--out", required=True, help="trace path (.json.gz)")
    ns = p.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from kernels.models.variants import build
    from kernels.models.whole_model import DEFAULT_SHAPES, ModelShape, build_whole_model, make_tokens, train_step

    d = DEFAULT_SHAPES[ns.workload]
    shape = ModelShape(d.hidden, d.intermediate, d.heads, d.kv_heads, d.head_dim, ns.layers, d.vocab)
    model = build_whole_model(ns.workload, torch.bfloat16, "cuda", batch=ns.batch, seq=ns.seq, shape=shape)
    ids = make_tokens(ns.batch, ns.seq, d.vocab, "cuda")
    fn = build(ns.variant, model, train=ns.train)
    if ns.train:
        step = train_step(fn, ids, compiled=ns.variant == "compile")
    else:

        def step():
            with torch.no_grad():
                fn(ids)

    for _ in range(3):  # compile happens here, as a user's first iterations
        step()
    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            record_shapes=True,
            schedule=schedule(wait=1, warmup=1, active=ns.active),
            on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw)),
        ) as prof:
            for _ in range(2 + ns.active):
                step()
                prof.step()
        with raw.open("rb") as src, gzip.open(ns.out, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    print(f"wrote {ns.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
