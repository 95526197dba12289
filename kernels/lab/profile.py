"""Profiling runner behind the dashboard's "Profile on this GPU": one trace per variant + manifest.json.

    python -m kernels.profile --workload geglu --variants eager,compile,liger,fuselens \
        --batch 64 --seq 128 --d-model 768 --hidden 3072 --dtype bf16 --out DIR [--measure-bytes] [--train]
    python -m kernels.profile --workload gemma-layer --variants eager,sdpa,compile,compile-fuselens \
        --out DIR [--measure-bytes eager,sdpa]      (a whole HF decoder layer: kernels.models.layer)
    python -m kernels.profile --workload llama-model --layers 4 --variants eager,sdpa,compile [--train] --out DIR
                                                   (a whole HF causal LM: kernels.models.whole_model)

Sizes default per workload: MLPs batch 64, seq 128, d-model 768, hidden 3072; decoder layers (LAYER_DEFAULTS)
batch 1, seq 2048, d-model = the layer's hidden size, hidden = its MLP intermediate size, --heads / --kv-heads /
--head-dim; whole models (MODEL_DEFAULTS) batch 4, seq 1024, the layer sizes plus --layers (4) and --vocab (32000);
with --train a whole model's step is loss + backward + AdamW. --measure-bytes alone measures every variant; with a list, those variants only.

The variants take turns (--rounds, default 8): every variant is built and warmed up first, then each round times
and profiles a few steps of every variant in a rotating order, so GPU clock/power/temperature drift over the session
lands on all of them alike (kernels.lab.interleave). SM clock, power and temperature are sampled meanwhile
(kernels.lab.conditions) and written per variant. Before every turn a fixed control probe runs (a settle write,
a bf16 GEMM, a copy: kernels.lab.control) in a profiler step of its own that is cut from the traces; its kernel
times go in the manifest, the diff's context-identical control group.

Writes into DIR (created if missing; nothing is written anywhere else):
  <variant>.json.gz     torch.profiler Chrome trace (CPU + CUDA activities, record_shapes=True): the variant's
                        rounds × steps-per-turn ProfilerStep#N windows (16 by default), cut from one session in
                        which the variants took turns
  <variant>.ncu.json    with --measure-bytes: per-kernel DRAM bytes read/written by Nsight Compute (kernels.lab.ncu)
  manifest.json         GPU, driver, torch, CUDA, triton, liger versions, git commit, shapes, dtype, and per variant:
                        status (done/skipped/failed), message, trace file, median forward (or train step) time in us
                        from CUDA events (100 iterations after warm-up, L2 not flushed, launches queued ahead so it is
                        GPU time) and median_launch_bound_us (issued back to back: includes host launch overhead),
                        ncu file; for fuselens / fuselens-graph / fuselens-gating: fuselens_path (dual_gemm, gemm_act,
                        gating or aten: kernels.models.dispatch), fuselens_fused (False where fusion measured slower
                        and the variant fell back) and fuselens_probe_us; conditions {profiled, timed}: SM clock
                        (MHz), power (W), temperature (°C) median/min/max while its steps ran; top level "conditions": the sampler, the GPU's
                        clock/power limits, --lock-clocks; control_probe (top level: its spec; per variant:
                        the probe's kernel times before each of its turns, kernels.lab.control). Rewritten after every variant, so an interrupted run
                        still leaves a valid manifest of what finished.

Progress: stdout carries ONLY progress lines, one JSON object per line, flushed at once:
  {"event": "start" | "variant_start" | "round" | "variant_done" | "variant_skipped" | "variant_failed" | "done",
   "variant": str | null, "done": int, "total": int, "message": str}
`done` counts finished variants (done + skipped + failed) out of `total`; "round" reports the rounds between the
warm-ups (variant_start) and the results (variant_done, all at the end). variant_done also carries
"median_us" (float) and "trace" (file name). The last line is always a "done" event, also on the error exits
below (its message is the error); human-readable diagnostics go to stderr.

Exit codes: 0 all requested variants recorded or skipped (skipped = unavailable here, e.g. liger not installed,
or fuselens-gating / fuselens-graph with --train); 2 bad arguments (unknown workload/variant/dtype, sizes out of bounds, estimated memory
too large for the GPU); 3 no CUDA GPU (or no torch); 4 some variants failed (e.g. CUDA out of memory: the others
are still recorded). Argument values never reach a shell: subprocesses (ncu, nvidia-smi, git) get argument lists.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

EXIT_OK, EXIT_BAD_ARGS, EXIT_NO_GPU, EXIT_VARIANT_FAILED = 0, 2, 3, 4
MAX_TOKENS = 65536
MAX_DIM = 32768
MAX_BATCH = 65536
MAX_SEQ = 65536
# Largest run we accept before looking at the GPU: 64 GiB estimated (an 80 GB H100 holds it; a 16-layer Llama
# training step at 4 x 1024 tokens with eager attention estimates 25.5 GiB). The run then checks the GPU's own size.
MAX_EST_BYTES = 64 * 2**30
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
WORKLOADS = ("geglu", "swiglu", "plain")  # kept equal to kernels.models.workloads.WORKLOADS (checked in tests)
MLP_DEFAULTS = {"batch": 64, "seq": 128, "d_model": 768, "hidden": 3072}
# Decoder layers (kernels.models.layer, which needs torch: these copies let arguments be checked without it; a test
# keeps them equal to layer.DEFAULT_SHAPES). d_model = hidden size, hidden = MLP intermediate size.
LAYER_DEFAULTS = {
    "gemma-layer": {"batch": 1, "seq": 2048, "d_model": 2048, "hidden": 16384, "heads": 8, "kv_heads": 1, "head_dim": 256},
    "llama-layer": {"batch": 1, "seq": 2048, "d_model": 2048, "hidden": 8192, "heads": 16, "kv_heads": 4, "head_dim": 128},
}  # fmt: skip
LAYER_WORKLOADS = tuple(LAYER_DEFAULTS)
# Whole causal LMs (kernels.models.whole_model; a test keeps these equal to whole_model.DEFAULT_SHAPES): the layer
# sizes plus --layers and --vocab; input is token ids [batch, seq].
MODEL_DEFAULTS = {
    "llama-model": {"batch": 4, "seq": 1024, "d_model": 2048, "hidden": 5632, "heads": 16, "kv_heads": 4, "head_dim": 128,
                    "layers": 4, "vocab": 32000},
    "gemma-model": {"batch": 4, "seq": 1024, "d_model": 2048, "hidden": 16384, "heads": 8, "kv_heads": 1, "head_dim": 256,
                    "layers": 4, "vocab": 32000},
}  # fmt: skip
MODEL_WORKLOADS = tuple(MODEL_DEFAULTS)
DECODER_WORKLOADS = LAYER_WORKLOADS + MODEL_WORKLOADS  # the variants of kernels.models.variants.LAYER_VARIANTS
MAX_LAYERS, MAX_VOCAB = 128, 262144
MAX_HEADS, MAX_HEAD_DIM = 256, 512
N_TIMED = 100
# Variants take turns: ROUNDS rounds of STEPS_PER_TURN profiled steps each, so every variant's trace holds 16 steps
# spread over the whole session (15 steady after the analyzer drops the first). Why 16: the median of 15 steps moves
# by about 1.25·σ/√15 ≈ 0.32·σ, so a step time that varies by σ = 3% step to step (a shared H100 under drift) still
# gives a median stable to ~1%; the H100 runs so far varied 0.1-0.7%. 8 rounds also spread each variant's 100
# CUDA-event steps over the session (12-13 per turn).
ROUNDS = 8
STEPS_PER_TURN = 2
MAX_ROUNDS = 50


class BadArgs(Exception):
    pass


def emit(event: str, variant: str | None, done: int, total: int, message: str, **extra) -> None:
    line = {"event": event, "variant": variant, "done": done, "total": total, "message": message, **extra}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse's default prints the usage block)
        raise BadArgs(message)


def build_parser() -> argparse.ArgumentParser:
    from kernels.models.variants import DEFAULT_VARIANTS

    p = _Parser(prog="python -m kernels.profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="geglu", help=f"one of {', '.join(WORKLOADS + DECODER_WORKLOADS)}")
    p.add_argument(
        "--variants", default=None, help=f"comma-separated variant names (MLP: {','.join(DEFAULT_VARIANTS)})"
    )
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--seq", type=int, default=None)
    p.add_argument("--d-model", type=int, default=None, help="model width (a layer's hidden size)")
    p.add_argument("--hidden", type=int, default=None, help="MLP hidden (a layer's intermediate size)")
    p.add_argument("--heads", type=int, default=None, help="decoder layers: query heads")
    p.add_argument("--kv-heads", type=int, default=None, help="decoder layers: key/value heads (GQA / MQA)")
    p.add_argument("--head-dim", type=int, default=None, help="decoder layers: head dim")
    p.add_argument("--layers", type=int, default=None, help="whole models: decoder layers")
    p.add_argument("--vocab", type=int, default=None, help="whole models: vocabulary size (LM head and loss width)")
    p.add_argument("--dtype", default="bf16", help="bf16, fp16 or fp32")
    p.add_argument("--out", required=False, help="output folder (created)")
    p.add_argument(
        "--measure-bytes",
        nargs="?",
        const="all",
        default=None,
        metavar="VARIANTS",
        help="DRAM bytes per kernel with Nsight Compute (all variants, or a comma-separated list)",
    )
    p.add_argument("--train", action="store_true", help="record a forward+backward training step")
    p.add_argument(
        "--measure-roofs",
        action="store_true",
        help="also measure this GPU's copy bandwidth and bf16 matmul ceiling (kernels.lab.bench, ~10 s) into the "
        "manifest's 'ceilings': the dashboard's Roofline draws them beside the datasheet roofs",
    )
    p.add_argument(
        "--rounds", type=int, default=ROUNDS, help=f"rounds in which every variant takes a turn (default {ROUNDS})"
    )
    p.add_argument(
        "--steps-per-turn",
        type=int,
        default=STEPS_PER_TURN,
        help=f"profiled steps of a variant per turn (default {STEPS_PER_TURN})",
    )
    p.add_argument(
        "--lock-clocks",
        type=int,
        nargs="?",
        const=0,
        default=None,
        metavar="MHZ",
        help="pin the SM clock with nvidia-smi -lgc for the run (default: the GPU's default application clock) and "
        "restore it after; needs root, never on shared GPUs",
    )
    p.add_argument("--ncu-child", metavar="VARIANT", help=argparse.SUPPRESS)  # internal: steps under ncu
    p.add_argument("--ncu-steps", type=int, default=1, help=argparse.SUPPRESS)  # internal: steps profiled in a row
    return p


def _fill_defaults(ns: argparse.Namespace) -> None:
    """Sizes left out take the workload's defaults (MLP_DEFAULTS or LAYER_DEFAULTS)."""
    defaults = {**LAYER_DEFAULTS, **MODEL_DEFAULTS}.get(ns.workload, MLP_DEFAULTS)
    for key in ("batch", "seq", "d_model", "hidden", "heads", "kv_heads", "head_dim", "layers", "vocab"):
        if getattr(ns, key, None) is None:
            setattr(ns, key, defaults.get(key))


def estimate_bytes(workload: str, tokens: int, d_model: int, hidden: int, dtype: str, train: bool, ns=None) -> int:
    """Rough peak GPU memory: weights + x, gate/up/h and y activations (x2 for grads and saved tensors when
    training), plus 512 MB for the CUDA context's workspace, cuBLAS and the L2 flush buffer. A decoder layer adds
    its q/k/v/o weights and eager attention's [B, H, S, S] scores (bf16 scores ×3, fp32 softmax, bf16 probs)."""
    elt = DTYPE_BYTES[dtype]
    if workload in DECODER_WORKLOADS:
        qkv = (2 * ns.heads + 2 * ns.kv_heads) * ns.head_dim
        weights = d_model * qkv + 3 * d_model * hidden
        acts = tokens * (6 * d_model + 3 * hidden + 3 * qkv)
        scores = ns.batch * ns.heads * ns.seq * ns.seq * (4 * elt + 4) + ns.seq * ns.seq * elt
        if workload in LAYER_WORKLOADS:
            return (elt * (weights + acts) + scores) * (3 if train else 1) + 512 * 2**20
        # a whole model: every layer's weights; training keeps every layer's activations and scores for backward,
        # weights x4 (grads, AdamW's two moments); embedding + LM head; logits in the dtype and in fp32 for the loss
        head = 2 * ns.vocab * d_model * elt * (4 if train else 1)
        logits = tokens * ns.vocab * (elt + 4 + (4 if train else 0))
        per_layer = (
            elt * weights * (4 if train else 1) + (elt * acts + scores) * (ns.layers if train else 1) / ns.layers
        )
        return int(ns.layers * per_layer + head + logits) + 512 * 2**20
    n_mats = 2 if workload == "plain" else 3
    weights = n_mats * d_model * hidden
    acts = tokens * (2 * d_model + (1 if workload == "plain" else 3) * hidden)
    factor = 3 if train else 1
    return elt * (weights + acts) * factor + 512 * 2**20


def validate(ns: argparse.Namespace) -> list[str]:
    """Check every argument; return the variant list. Raises BadArgs with a one-line reason."""
    from kernels.models.variants import DEFAULT_LAYER_VARIANTS, DEFAULT_VARIANTS, LAYER_VARIANTS, VARIANTS

    if ns.workload not in WORKLOADS + DECODER_WORKLOADS:
        raise BadArgs(f"unknown workload {ns.workload!r}; choose one of {', '.join(WORKLOADS + DECODER_WORKLOADS)}")
    if ns.dtype not in DTYPE_BYTES:
        raise BadArgs(f"unknown dtype {ns.dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
    layer = ns.workload in DECODER_WORKLOADS
    _fill_defaults(ns)
    if ns.variants is None:
        ns.variants = ",".join(DEFAULT_LAYER_VARIANTS if layer else DEFAULT_VARIANTS)
    if layer:
        VARIANTS = LAYER_VARIANTS  # noqa: N806 (the registry for this workload)
    variants = [v.strip() for v in ns.variants.split(",") if v.strip()]
    if not variants:
        raise BadArgs("no variants given")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise BadArgs(f"unknown variant(s) {', '.join(map(repr, unknown))}; choose from {', '.join(VARIANTS)}")
    if len(set(variants)) != len(variants):
        raise BadArgs("a variant is listed twice")
    for name, value, hi in (
        ("--batch", ns.batch, MAX_BATCH),
        ("--seq", ns.seq, MAX_SEQ),
        ("--d-model", ns.d_model, MAX_DIM),
        ("--hidden", ns.hidden, MAX_DIM),
    ):
        if not 1 <= value <= hi:
            raise BadArgs(f"{name} must be between 1 and {hi}, got {value}")
    for name, value, hi in (("--rounds", ns.rounds, MAX_ROUNDS), ("--steps-per-turn", ns.steps_per_turn, 20)):
        if not 1 <= value <= hi:
            raise BadArgs(f"{name} must be between 1 and {hi}, got {value}")
    if ns.lock_clocks is not None and not 0 <= ns.lock_clocks <= 5000:
        raise BadArgs(f"--lock-clocks must be a clock in MHz up to 5000, got {ns.lock_clocks}")
    if layer:
        for name, value, hi in (("--heads", ns.heads, MAX_HEADS), ("--kv-heads", ns.kv_heads, MAX_HEADS),
                                ("--head-dim", ns.head_dim, MAX_HEAD_DIM)):  # fmt: skip
            if not 1 <= value <= hi:
                raise BadArgs(f"{name} must be between 1 and {hi}, got {value}")
        if ns.heads % ns.kv_heads:
            raise BadArgs(f"--heads {ns.heads} is not a multiple of --kv-heads {ns.kv_heads}")
        if ns.head_dim % 2:
            raise BadArgs(f"--head-dim must be even (rotary embeddings rotate pairs), got {ns.head_dim}")
    if ns.workload in MODEL_WORKLOADS:
        for name, value, hi in (("--layers", ns.layers, MAX_LAYERS), ("--vocab", ns.vocab, MAX_VOCAB)):
            if not 1 <= value <= hi:
                raise BadArgs(f"{name} must be between 1 and {hi}, got {value}")
    elif ns.layers is not None or ns.vocab is not None:
        raise BadArgs(f"--layers and --vocab apply to the whole-model workloads ({', '.join(MODEL_WORKLOADS)}) only")
    if ns.measure_bytes not in (None, "all"):
        wanted = [v.strip() for v in ns.measure_bytes.split(",") if v.strip()]
        stray = [v for v in wanted if v not in variants]
        if not wanted or stray:
            raise BadArgs(f"--measure-bytes names variant(s) not recorded in this run: {', '.join(map(repr, stray))}")
    tokens = ns.batch * ns.seq
    if tokens > MAX_TOKENS:
        raise BadArgs(f"batch x seq = {tokens} tokens exceeds the limit of {MAX_TOKENS}")
    est = estimate_bytes(ns.workload, tokens, ns.d_model, ns.hidden, ns.dtype, ns.train, ns)
    if est > MAX_EST_BYTES:
        raise BadArgs(
            f"estimated GPU memory {est / 2**30:.1f} GiB exceeds the limit of {MAX_EST_BYTES / 2**30:.0f} GiB"
        )
    if ns.ncu_child is None:
        if not ns.out:
            raise BadArgs("--out DIR is required")
        out = Path(ns.out)
        if out.exists() and not out.is_dir():
            raise BadArgs(f"--out {ns.out!r} exists and is not a folder")
    return variants


def _step_fn(fn, x, model, train: bool, name: str = ""):
    import torch

    if train and getattr(model, "is_whole_model", False):
        from kernels.models.whole_model import train_step

        return train_step(fn, x, compiled=name.startswith("compile"))
    if train:
        # a decoder-layer variant runs its own copy of the weights (kernels.models.layer.variant_copy)
        params = list(fn.parameters()) if hasattr(fn, "parameters") else list(model.parameters())

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


def _gzip_json(doc: dict, path: Path) -> None:
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as fh:
        json.dump(doc, fh)


@dataclass
class _Live:
    """A variant that built and warmed up: its step function and what the rounds collect."""

    name: str
    step: object
    warm_s: float
    times_us: list = field(default_factory=list)  # CUDA-event time of every timed step, pooled over the rounds
    launch_us: list = field(default_factory=list)  # the same steps issued back to back from the host
    error: str | None = None  # set when a round failed: the variant leaves the rotation
    path: dict = field(default_factory=dict)  # which FuseLens path its warm-up chose (_fuselens_path)


def _warm(name, model, x, ns) -> _Live:
    import torch

    from kernels.models.variants import build

    step = _step_fn(build(name, model, train=ns.train), x, model, ns.train, name)
    t0 = time.perf_counter()
    for _ in range(3):  # compile / autotune / cuBLAS heuristics happen here, outside timing and tracing
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    return _Live(name, step, warm_s, path=_fuselens_path(name, model, x, ns.train))


def _fail(lv: _Live, exc: BaseException) -> None:
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


def _time_rounds(live: list[_Live], rounds: int, sampler, progress) -> None:
    """CUDA-event timing, the variants taking turns: each round times N_TIMED/rounds steps of every variant."""
    from kernels.lab.interleave import round_orders
    from kernels.lab.timing import median_us

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
                _fail(lv, exc)
        progress(f"CUDA-event timing, round {r + 1}/{rounds}")


def _profile_rounds(live: list[_Live], ns, out_dir: Path, sampler, progress, probe=None) -> dict[str, dict]:
    """One torch.profiler session in which the variants take turns (ns.steps_per_turn steps each per round, over
    ns.rounds rounds), split into one Chrome trace per variant (kernels.lab.interleave). Returns {variant: doc}.
    probe (kernels.lab.control.Probe): run in a profiler step of its own before every turn; those steps come back
    as control.OWNER_PREFIX + variant, never inside the variant's trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from kernels.lab.control import OWNER_PREFIX
    from kernels.lab.interleave import round_orders, split_trace

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
                    owner[prof.step_num] = OWNER_PREFIX + lv.name
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
                    _fail(lv, exc)
                    prof.step()
                sampler.mark(lv.name, "profiled", t0, time.monotonic())
    try:
        doc = json.loads(combined.read_text(encoding="utf-8"))
    finally:
        combined.unlink(missing_ok=True)
    return split_trace(doc, owner)


def _control_probe(manifest: dict):
    """The control probe (kernels.lab.control), warmed up, and its spec in the manifest; None (and the reason in the
    manifest) when it cannot run: the recording goes on without it, and the diff falls back to the traces."""
    import torch

    from kernels.lab import control

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


def _pooled(times: list) -> dict:
    t = sorted(times)
    q = statistics.quantiles(t, n=10) if len(t) >= 10 else [t[0]] * 9
    return {"median_us": statistics.median(t), "p10_us": q[0], "p90_us": q[-1], "n_iter": len(t)}


def _fuselens_path(name: str, model, x, train: bool = False) -> dict:
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
    return model, make_input(ns.batch, ns.seq, ns.d_model, dtype, device)


def _ncu_child(ns) -> int:
    """Internal: warm up the variant, then --ncu-steps steps in a row inside cudaProfilerStart/Stop for ncu."""
    import torch

    from kernels.models.variants import build

    model, x = make_workload(ns)
    step = _step_fn(build(ns.ncu_child, model, train=ns.train), x, model, ns.train, ns.ncu_child)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(max(1, min(ns.ncu_steps, 10))):
        step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return EXIT_OK


def _child_argv(ns, variant: str, steps: int = 1) -> list[str]:
    argv = ["--ncu-child", variant, "--ncu-steps", str(steps), "--workload", ns.workload]
    argv += ["--batch", str(ns.batch), "--seq", str(ns.seq)]
    argv += ["--d-model", str(ns.d_model), "--hidden", str(ns.hidden), "--dtype", ns.dtype]
    if ns.workload in DECODER_WORKLOADS:
        argv += ["--heads", str(ns.heads), "--kv-heads", str(ns.kv_heads), "--head-dim", str(ns.head_dim)]
    if ns.workload in MODEL_WORKLOADS:
        argv += ["--layers", str(ns.layers), "--vocab", str(ns.vocab)]
    return argv + (["--train"] if ns.train else [])


def _measure_bytes(ns, variant: str, out_dir: Path) -> dict:
    from kernels.lab import ncu

    exe = ncu.find_ncu()
    if exe is None:
        return {"ncu_error": "ncu (Nsight Compute) not found on PATH"}
    csv_path = out_dir / f"{variant}.ncu.csv"
    try:
        kernels = ncu.measure(exe, _child_argv(ns, variant), csv_path)
    except Exception as exc:  # ncu missing permissions, timeout, parse failure: the trace still stands
        return {"ncu_error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    doc = {"metrics": list(ncu.METRICS), "ncu_version": ncu.ncu_version(exe), "kernels": kernels}
    entry = {
        "ncu": f"{variant}.ncu.json",
        "ncu_csv": csv_path.name,
        "dram_bytes_read": sum(k.get("dram_bytes_read", 0) for k in kernels),
        "dram_bytes_write": sum(k.get("dram_bytes_write", 0) for k in kernels),
    }
    # in sequence: each kernel sees the L2 its predecessors left (kernels.lab.ncu, "warm"); a failure keeps the rest
    warm_csv = out_dir / f"{variant}.ncu-warm.csv"
    try:
        steps = ncu.WARM_STEPS
        warm = ncu.measure(exe, _child_argv(ns, variant, steps), warm_csv, extra=ncu.WARM_FLAGS)
        one, block = ncu.warm_summary(warm, steps)
    except Exception as exc:
        entry["ncu_warm_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    else:
        import torch

        block["l2_cache_bytes"] = block.get("l2_cache_bytes") or torch.cuda.get_device_properties(0).L2_cache_size
        merged = ncu.merge_warm(kernels, one)
        doc["kernels"] = merged
        if merged is kernels:  # the flushed and warm steps launched different kernels: keep both lists
            block["kernels"] = one
        doc["warm"] = block
        entry.update(
            ncu_warm_csv=warm_csv.name,
            warm_dram_bytes_read=block["step_dram_bytes_read"],
            warm_dram_bytes_write=block["step_dram_bytes_write"],
        )
    (out_dir / f"{variant}.ncu.json").write_text(json.dumps(doc, indent=1))
    return entry


def run(argv: list[str] | None = None) -> int:
    total = 0
    try:
        ns = build_parser().parse_args(argv)
        variants = validate(ns)
    except BadArgs as exc:
        print(f"error: {exc}", file=sys.stderr)
        emit("done", None, 0, total, f"bad arguments: {exc}")
        return EXIT_BAD_ARGS
    total = len(variants)
    if ns.ncu_child is None:
        emit("start", None, 0, total, f"{ns.workload} {ns.batch}x{ns.seq} d={ns.d_model} h={ns.hidden} {ns.dtype}")
    try:
        import torch
    except ImportError:
        msg = "PyTorch is not installed; profiling needs torch with CUDA"
        print(f"error: {msg}", file=sys.stderr)
        emit("done", None, 0, total, msg)
        return EXIT_NO_GPU
    if not torch.cuda.is_available():
        msg = "no CUDA GPU available (torch.cuda.is_available() is False); profiling needs an NVIDIA GPU"
        print(f"error: {msg}", file=sys.stderr)
        emit("done", None, 0, total, msg)
        return EXIT_NO_GPU
    if ns.ncu_child is not None:
        return _ncu_child(ns)

    from kernels.lab import conditions, control, envinfo
    from kernels.models.variants import VariantUnavailable

    tokens = ns.batch * ns.seq
    est = estimate_bytes(ns.workload, tokens, ns.d_model, ns.hidden, ns.dtype, ns.train, ns)
    free_b, total_b = torch.cuda.mem_get_info()
    if est > 0.9 * total_b:
        msg = f"estimated GPU memory {est / 2**30:.1f} GiB exceeds 90% of this GPU's {total_b / 2**30:.1f} GiB"
        print(f"error: {msg}", file=sys.stderr)
        emit("done", None, 0, total, f"bad arguments: {msg}")
        return EXIT_BAD_ARGS

    out_dir = Path(ns.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    shapes = {"batch": ns.batch, "seq": ns.seq, "tokens": tokens, "d_model": ns.d_model, "hidden": ns.hidden}
    if ns.workload in DECODER_WORKLOADS:
        shapes.update(heads=ns.heads, kv_heads=ns.kv_heads, head_dim=ns.head_dim, intermediate=ns.hidden)
    if ns.workload in MODEL_WORKLOADS:
        shapes.update(layers=ns.layers, vocab=ns.vocab)
    manifest = {
        "schema": "fuselens.profile/1",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **envinfo.environment(),
        "workload": ns.workload,
        "shapes": shapes,
        "dtype": ns.dtype,
        "train": ns.train,
        "profiler": {
            "activities": ["CPU", "CUDA"],
            "record_shapes": True,
            "interleaved": True,
            "rounds": ns.rounds,
            "steps_per_turn": ns.steps_per_turn,
            "active_steps_per_variant": ns.rounds * ns.steps_per_turn,
            "warmup": "one step of every variant (not recorded)",
        },
        "timing": (
            f"median_us: CUDA events, median of {N_TIMED} steps per variant taken in turns over {ns.rounds} rounds"
            " (the variants interleaved), after warm-up, L2 not flushed, launches queued ahead (GPU time, host launch"
            " overhead hidden; kernels.lab.timing); median_launch_bound_us: the same steps issued back to back from"
            " the host, so a host slower than the GPU shows (decode shapes)"
        ),
        "variants": [],
    }
    if ns.workload in DECODER_WORKLOADS:
        import transformers

        manifest["transformers"] = transformers.__version__
    if ns.workload in MODEL_WORKLOADS:
        manifest["model"] = (
            f"transformers {'LlamaForCausalLM' if ns.workload == 'llama-model' else 'GemmaForCausalLM'}, {ns.layers}"
            " layers, random weights (seed 0), random token ids; RoPE, position ids and (eager) the causal mask built"
            " inside every forward, as model(input_ids) does"
            + (
                "; training step: HF causal-LM loss (cross-entropy over the vocabulary), backward,"
                " AdamW(foreach=True) step (torch.compile'd for compile variants), zero_grad(set_to_none=True)"
                if ns.train
                else "; forward under torch.no_grad, use_cache=False"
            )
        )
    elif ns.workload in LAYER_WORKLOADS:
        manifest["layer"] = (
            f"transformers {ns.workload.split('-')[0].title()}DecoderLayer, random weights (seed 0), RoPE from the"
            " model's rotary embedding and the causal mask built once outside the profiled steps; eager: additive"
            " mask [B,1,S,S]; sdpa/compile: no mask tensor, is_causal"
        )
    model, x = make_workload(ns)
    measure = set(variants) if ns.measure_bytes == "all" else set((ns.measure_bytes or "").split(","))
    entries = {name: {"name": name} for name in variants}
    finished = 0

    def write_manifest() -> None:
        manifest["variants"] = [entries[n] for n in variants if "status" in entries[n]]
        (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))

    def failed(name: str, message: str) -> None:
        nonlocal finished
        finished += 1
        entries[name].update(status="failed", message=message)
        emit("variant_failed", name, finished, total, message)
        write_manifest()

    sampler = conditions.Sampler().start()
    lock = conditions.ClockLock(ns.lock_clocks or None) if ns.lock_clocks is not None else None
    manifest["conditions"] = {"limits": conditions.gpu_limits()}
    try:
        if lock is not None:
            lock.__enter__()
            manifest["conditions"]["lock_clocks"] = lock.describe()
        live: list[_Live] = []
        for i, name in enumerate(variants):  # build + warm up every variant first: compile time stays out of rounds
            emit("variant_start", name, finished, total, f"building and warming up {name} ({i + 1}/{total})")
            try:
                live.append(_warm(name, model, x, ns))
            except VariantUnavailable as exc:
                finished += 1
                entries[name].update(status="skipped", message=str(exc))
                emit("variant_skipped", name, finished, total, str(exc))
                write_manifest()
            except Exception as exc:  # CUDA OOM, a compile error: the others are still recorded
                lv = _Live(name, None, 0.0)
                _fail(lv, exc)
                failed(name, lv.error or "failed")
        traces: dict[str, dict] = {}
        probe_failed = False
        if live:

            def progress(msg: str) -> None:
                emit("round", None, finished, total, msg)

            _time_rounds(live, ns.rounds, sampler, progress)
            ok = [lv for lv in live if not lv.error]
            if ok:
                probe = _control_probe(manifest)
                traces = _profile_rounds(ok, ns, out_dir, sampler, progress, probe=probe)
                if probe is not None and probe.error:
                    probe_failed = True
                    manifest["control_probe"]["error"] = probe.error
        sampler.stop()
        profiled, timed = sampler.per_variant("profiled"), sampler.per_variant("timed")
        manifest["conditions"]["sampler"] = sampler.describe()
        recorded = []
        for lv in live:  # every trace and the manifest first: a run stopped during ncu keeps them all
            if lv.error or lv.name not in traces or not lv.times_us:
                failed(lv.name, lv.error or f"{lv.name}: no profiled step recorded")
                continue
            entry = entries[lv.name]
            trace_name = f"{lv.name}.json.gz"
            _gzip_json(traces.pop(lv.name), out_dir / trace_name)
            if getattr(model, "is_decoder_layer", False):
                entry.update(attention_facts(out_dir / trace_name))
            t, launched = _pooled(lv.times_us), _pooled(lv.launch_us)
            entry.update(
                status="done",
                trace=trace_name,
                median_us=round(t["median_us"], 2),
                p10_us=round(t["p10_us"], 2),
                p90_us=round(t["p90_us"], 2),
                n_iter=t["n_iter"],
                median_launch_bound_us=round(launched["median_us"], 2),
                l2_flushed=False,
                warmup_s=round(lv.warm_s, 2),
                conditions={"profiled": profiled.get(lv.name), "timed": timed.get(lv.name)},
                **lv.path,
            )
            probe_doc = traces.pop(control.OWNER_PREFIX + lv.name, None)
            if probe_doc is not None and not probe_failed:
                entry["control_probe"] = control.probe_times(probe_doc)
            entry["message"] = f"median {entry['median_us']:.1f} us per {'training step' if ns.train else 'forward'}"
            clk = (entry["conditions"]["profiled"] or {}).get("sm_clock_mhz")
            if clk:
                entry["message"] += f"; SM clock {clk['median']:.0f} MHz while profiled"
            if "fuselens_path" in entry:
                entry["message"] += f"; path {entry['fuselens_path']}"
                if entry["fuselens_fused"] is False and lv.name != "fuselens-gating":
                    entry["message"] += " (fusion measured slower at this size: fell back)"
            recorded.append(lv.name)
            write_manifest()
        for name in recorded:
            entry = entries[name]
            if name in measure:
                # the ncu child is a new process: it runs the path this run chose instead of measuring its own
                forced = entry.get("fuselens_path") if name in ("fuselens", "fuselens-graph") else None
                if forced:
                    os.environ["FUSELENS_PATH"] = forced
                try:
                    entry.update(_measure_bytes(ns, name, out_dir))
                finally:
                    os.environ.pop("FUSELENS_PATH", None)
                if "ncu_error" in entry:
                    entry["message"] += f"; bytes not measured: {entry['ncu_error']}"
            finished += 1
            emit(
                "variant_done",
                name,
                finished,
                total,
                entry["message"],
                median_us=entry["median_us"],
                trace=entry["trace"],
            )
            write_manifest()
    finally:
        sampler.stop()
        if lock is not None:
            lock.__exit__(None, None, None)
        torch.cuda.synchronize() if torch.cuda.is_initialized() else None
    if getattr(ns, "measure_roofs", False):
        manifest["ceilings"] = _measure_roofs()
    write_manifest()
    summary = ", ".join(f"{v['name']}: {v['status']}" for v in manifest["variants"])
    emit("done", None, total, total, summary)
    n_failed = sum(1 for v in manifest["variants"] if v["status"] == "failed")
    return EXIT_VARIANT_FAILED if n_failed else EXIT_OK


def _measure_roofs() -> dict:
    """Measured roofs for the Roofline (dashboard): 1 GiB dst.copy_(src) bandwidth (read + write) and the fastest of
    three 8192^3 bf16 matmul passes (kernels.lab.bench.measure_ceilings), or the error that stopped them."""
    try:
        from kernels.lab.bench import measure_ceilings

        c = measure_ceilings(n_iter=40)
        return {
            "copy_gbps": round(float(c["copy_gbps"]), 1),
            "matmul_tflops": round(float(c["matmul_tflops"]), 1),
            "matmul_dtype": "bf16",
            "method": "copy: median of dst.copy_(src) on 1 GiB bf16, L2 flushed, read + write bytes; matmul: fastest "
            "of three medians of an 8192x8192x8192 bf16 torch.matmul (kernels.lab.bench.measure_ceilings)",
        }
    except Exception as exc:  # a roof is a nice-to-have: never fail the recording for it
        return {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(run())


if __name__ == "__main__":
    main()
