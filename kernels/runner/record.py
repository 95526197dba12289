"""The recording itself: build and warm up each variant, time its steps with CUDA events while the variants take
turns, profile them in one torch.profiler session split into one trace per variant (kernels.runner.interleave),
with the control probe (kernels.runner.control) before every turn. torch is imported inside the functions: the
dashboard imports kernels.runner.options, never this module, and its tests import it without a GPU."""

from __future__ import annotations

import gzip
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernels.ops.timing import median_us
from kernels.runner import control
from kernels.runner.interleave import round_orders, split_trace
from kernels.runner.options import LAYER_WORKLOADS, MODEL_WORKLOADS, N_TIMED


def step_fn(fn, x, model, train: bool, name: str = ""):
    import torch

    if train and getattr(model, "is_whole_model", False):
        from kernels.models.whole_model import train_step

        return train_step(fn, x, compiled=name.startswith("compile"))
    if train:
        # a decoder-layer variant runs its own copy of the weights (kernels.models.layer.variant_copy)
        params = list(fn.parameters()) if hasattr(fn, "parameters") else list(model.parameters())
        params += [x] if x.requires_grad else []  # --input-grad: dX computed, then cleared like the weights' grads

        def step():
            y = fn(x)
            loss = y.float().square().mean()
            loss.backward()
            for p in params:
                p.grad = None

        return step

    def fwd():
        with torch.no_grad():
            fn(x)

    return fwd


def gzip_json(doc: dict, path: Path) -> None:
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as fh:
        json.dump(doc, fh)


@dataclass
class Live:
    """A variant that built and warmed up: its step function and what the rounds collect."""

    name: str
    step: object
    warm_s: float
    times_us: list = field(default_factory=list)  # CUDA-event time of every timed step, pooled over the rounds
    launch_us: list = field(default_factory=list)  # the same steps issued back to back from the host
    error: str | None = None  # set when a round failed: the variant leaves the rotation
    path: dict = field(default_factory=dict)  # which FuseLens path its warm-up chose (fuselens_path)


def warm(name, model, x, ns) -> Live:
    import torch

    from kernels.models.variants import build

    step = step_fn(build(name, model, train=ns.train), x, model, ns.train, name)
    t0 = time.perf_counter()
    for _ in range(3):  # compile / autotune / cuBLAS heuristics happen here, outside timing and tracing
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    return Live(name, step, warm_s, path=fuselens_path(name, model, x, ns.train))


def fail(lv: Live, exc: BaseException) -> None:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        lv.error = f"CUDA out of memory while recording {lv.name}"
    else:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        lv.error = f"{type(exc).__name__}: {first}"[:500]
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _split(n: int, parts: int) -> list[int]:
    """n as `parts` near-equal whole numbers (100 over 8 rounds: 13, 13, 13, 13, 12, 12, 12, 12)."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def time_rounds(live: list[Live], rounds: int, sampler, progress) -> None:
    """CUDA-event timing, the variants taking turns: each round times N_TIMED/rounds steps of every variant."""
    for r, (order, n) in enumerate(zip(round_orders(live, rounds), _split(N_TIMED, rounds), strict=True)):
        for lv in order:
            if lv.error or n == 0:
                continue
            try:
                t0 = time.monotonic()
                lv.times_us += median_us(lv.step, n_iter=n, warmup=1, flush_l2=False)["times_us"]
                lv.launch_us += median_us(lv.step, n_iter=n, warmup=0, flush_l2=False, queue_ahead=False)["times_us"]
                sampler.mark(lv.name, "timed", t0, time.monotonic())
            except Exception as exc:  # one broken variant must not lose the others
                fail(lv, exc)
        progress(f"CUDA-event timing, round {r + 1}/{rounds}")


def profile_rounds(live: list[Live], ns, out_dir: Path, sampler, progress, probe=None) -> dict[str, dict]:
    """One torch.profiler session in which the variants take turns (ns.steps_per_turn steps each per round, over
    ns.rounds rounds), split into one Chrome trace per variant (kernels.runner.interleave). Returns {variant: doc}.
    probe (kernels.runner.control.Probe): run in a profiler step of its own before every turn; those steps come back
    as control.OWNER_PREFIX + variant, never inside the variant's trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    owner: dict[int, str] = {}
    combined = out_dir / ".interleaved.trace.json"
    cuda = torch.cuda.is_available()  # always on the runner's path; without a GPU only the tests get here
    with profile(
        activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []),
        record_shapes=True,
        # the first turn of every variant warms the profiler up (not recorded); every later step is recorded and
        # the session is written when it closes
        schedule=schedule(wait=0, warmup=len(live), active=1_000_000),
        on_trace_ready=lambda p: p.export_chrome_trace(str(combined)),
    ) as prof:
        for lv in live:
            lv.step()
            prof.step()
        for r, order in enumerate(round_orders(live, ns.rounds)):
            progress(f"profiling, round {r + 1}/{ns.rounds}")
            for lv in order:
                if lv.error:
                    continue
                if probe is not None and probe.error is None:  # the control: same sequence, same context
                    owner[prof.step_num] = control.OWNER_PREFIX + lv.name
                    try:
                        probe()
                    except Exception as exc:  # the recording goes on without it; the diff uses the traces
                        probe.error = f"{type(exc).__name__}: {str(exc)[:200]}"
                    prof.step()
                t0 = time.monotonic()
                try:
                    for k in range(ns.steps_per_turn):
                        owner[prof.step_num] = lv.name
                        lv.step()
                        if cuda and k == ns.steps_per_turn - 1:  # the turn's GPU work ends inside its last step
                            torch.cuda.synchronize()
                        prof.step()
                except Exception as exc:
                    fail(lv, exc)
                    prof.step()
                sampler.mark(lv.name, "profiled", t0, time.monotonic())
    try:
        doc = json.loads(combined.read_text(encoding="utf-8"))
    finally:
        combined.unlink(missing_ok=True)
    return split_trace(doc, owner)


def control_probe(manifest: dict):
    """The control probe (kernels.runner.control), warmed up, and its spec in the manifest; None (and the reason in the
    manifest) when it cannot run: the recording goes on without it, and the diff falls back to the traces."""
    import torch

    try:
        probe = control.Probe()
        probe()  # cuBLAS picks its GEMM kernel here, outside the profiler
        probe()
    except Exception as exc:  # e.g. out of memory beside a big workload
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        manifest["control_probe"] = {**control.spec(), "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        return None
    torch.cuda.synchronize()
    manifest["control_probe"] = control.spec()
    return probe


def fuselens_path(name: str, model, x, train: bool = False) -> dict:
    """Which FuseLens path ran (kernels.models.dispatch): {} for the other variants. fuselens_fused is False when
    the measurement chose cuBLAS + gating or ATen: at this size fusion did not pay."""
    if name == "fuselens-gating":
        return {"fuselens_path": "gating", "fuselens_fused": False}
    if name not in ("fuselens", "fuselens-graph") or getattr(model, "is_decoder_layer", False):
        return {}  # a decoder layer's fuselens variant calls the dual-GEMM op directly (kernels.models.layer)
    from kernels.models.dispatch import decision_for

    d = decision_for(model, x, train)
    if d is None:  # no decision recorded (it cannot happen after the warm-up); say so rather than guess
        return {"fuselens_path": "unknown", "fuselens_fused": None}
    return {"fuselens_path": d["path"], "fuselens_fused": d["fused"], "fuselens_probe_us": d["probe_us"]}


_ATTENTION_OP = re.compile(
    rb'"name": ?"aten::_(?:scaled_dot_product_)?(flash|efficient|cudnn)_attention(?:_forward)?(_for_cpu)?"'
)
_ATTENTION_MATH = re.compile(rb'"name": ?"aten::_scaled_dot_product_attention_math"')
_ATTENTION_KERNEL = re.compile(rb'"cat": ?"kernel", ?"name": ?"([^"]*(?:flash|fmha|sdpa|FlashAttn|attention)[^"]*)"')


def attention_facts(trace_path: Path) -> dict:
    """Which SDPA backend ran, from the trace just written: the aten op PyTorch dispatched to
    (_scaled_dot_product_flash_attention / _efficient_ / _cudnn_ / _math) and the attention kernels' names.
    'none' for eager attention (matmul + softmax: no SDPA op)."""
    with gzip.open(trace_path, "rb") as f:
        text = f.read()
    found = sorted({(m.group(1) + (m.group(2) or b"")).decode() for m in _ATTENTION_OP.finditer(text)})
    if _ATTENTION_MATH.search(text):
        found.append("math")
    names = {m.group(1).decode(errors="replace")[:160] for m in _ATTENTION_KERNEL.finditer(text)}
    # an Inductor pointwise kernel named after the SDPA op its output feeds (RoPE + layout copy) is not attention
    kernels = sorted(n for n in names if not n.startswith(("triton_poi_", "triton_red_", "triton_per_")))
    return {"attention_backend": "+".join(found) or "none", "attention_kernels": kernels[:4]}


def make_workload(ns, device: str = "cuda"):
    """(module, input) for ns.workload: an MLP (kernels.models.workloads) or a decoder layer (kernels.models.layer)."""
    from kernels.models.workloads import DTYPES, build_model, make_input

    dtype = DTYPES[ns.dtype]
    if ns.workload in MODEL_WORKLOADS:
        from kernels.models.whole_model import ModelShape, build_whole_model, make_tokens

        shape = ModelShape(ns.d_model, ns.hidden, ns.heads, ns.kv_heads, ns.head_dim, ns.layers, ns.vocab)
        model = build_whole_model(ns.workload, dtype, device, batch=ns.batch, seq=ns.seq, shape=shape)
        return model, make_tokens(ns.batch, ns.seq, ns.vocab, device)
    if ns.workload in LAYER_WORKLOADS:
        from kernels.models.layer import LayerShape, build_layer

        shape = LayerShape(ns.d_model, ns.hidden, ns.heads, ns.kv_heads, ns.head_dim)
        model = build_layer(ns.workload, dtype, device, batch=ns.batch, seq=ns.seq, shape=shape)
    else:
        model = build_model(ns.workload, ns.d_model, ns.hidden, dtype, device)
    x = make_input(ns.batch, ns.seq, ns.d_model, dtype, device)
    return model, x.requires_grad_(bool(getattr(ns, "input_grad", False)))
