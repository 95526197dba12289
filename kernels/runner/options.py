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
lands on all of them alike (kernels.runner.interleave). SM clock, power and temperature are sampled meanwhile
(kernels.runner.conditions) and written per variant. Before every turn a fixed control probe runs (a settle write,
a bf16 GEMM, a copy: kernels.runner.control) in a profiler step of its own that is cut from the traces; its kernel
times go in the manifest, the diff's context-identical control group.

Writes into DIR (created if missing; nothing is written anywhere else):
  <variant>.json.gz     torch.profiler Chrome trace (CPU + CUDA activities, record_shapes=True): the variant's
                        rounds × steps-per-turn ProfilerStep#N windows (16 by default), cut from one session in
                        which the variants took turns
  <variant>.ncu.json    with --measure-bytes: per-kernel DRAM bytes read/written by Nsight Compute (kernels.runner.ncu)
  manifest.json         GPU, driver, torch, CUDA, triton, liger versions, git commit, shapes, dtype, and per variant:
                        status (done/skipped/failed), message, trace file, median forward (or train step) time in us
                        from CUDA events (100 iterations after warm-up, L2 not flushed, launches queued ahead so it is
                        GPU time) and median_launch_bound_us (issued back to back: includes host launch overhead),
                        ncu file; for fuselens / fuselens-graph / fuselens-gating: fuselens_path (dual_gemm, gemm_act,
                        gating or aten: kernels.models.dispatch), fuselens_fused (False where fusion measured slower
                        and the variant fell back) and fuselens_probe_us; conditions {profiled, timed}: SM clock
                        (MHz), power (W), temperature (°C) median/min/max while its steps ran; top level "conditions": the sampler, the GPU's
                        clock/power limits, --lock-clocks; control_probe (top level: its spec; per variant:
                        the probe's kernel times before each of its turns, kernels.runner.control). Rewritten after every variant, so an interrupted run
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

This module is the command line (choices, limits, parsing, validation) and imports no torch, so the dashboard
imports its choice lists; kernels.runner.run records (validate -> warm -> rounds -> ncu -> manifest).
"""

from __future__ import annotations

import argparse
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
        "--input-grad",
        action="store_true",
        help="with --train, for an MLP or a layer: the input needs its gradient, so the backward runs dX as in any"
        " layer of a model but the first (default: a first layer's step, no dX)",
    )
    p.add_argument(
        "--measure-roofs",
        action="store_true",
        help="also measure this GPU's copy bandwidth and bf16 matmul ceiling (kernels.runner.roofs, ~10 s) into the "
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


def _in_range(pairs) -> None:
    """BadArgs for the first (flag, value, upper bound) whose value is outside 1..bound."""
    for name, value, hi in pairs:
        if not 1 <= value <= hi:
            raise BadArgs(f"{name} must be between 1 and {hi}, got {value}")


def _variants(ns: argparse.Namespace) -> list[str]:
    """The --variants list, checked against the workload's registry (its defaults when left out)."""
    from kernels.models.variants import DEFAULT_LAYER_VARIANTS, DEFAULT_VARIANTS, LAYER_VARIANTS, VARIANTS

    layer = ns.workload in DECODER_WORKLOADS
    if ns.variants is None:
        ns.variants = ",".join(DEFAULT_LAYER_VARIANTS if layer else DEFAULT_VARIANTS)
    registry = LAYER_VARIANTS if layer else VARIANTS
    variants = [v.strip() for v in ns.variants.split(",") if v.strip()]
    if not variants:
        raise BadArgs("no variants given")
    unknown = [v for v in variants if v not in registry]
    if unknown:
        raise BadArgs(f"unknown variant(s) {', '.join(map(repr, unknown))}; choose from {', '.join(registry)}")
    if len(set(variants)) != len(variants):
        raise BadArgs("a variant is listed twice")
    return variants


def _check_sizes(ns: argparse.Namespace) -> None:
    _in_range((("--batch", ns.batch, MAX_BATCH), ("--seq", ns.seq, MAX_SEQ), ("--d-model", ns.d_model, MAX_DIM),
               ("--hidden", ns.hidden, MAX_DIM)))  # fmt: skip
    _in_range((("--rounds", ns.rounds, MAX_ROUNDS), ("--steps-per-turn", ns.steps_per_turn, 20)))
    if ns.lock_clocks is not None and not 0 <= ns.lock_clocks <= 5000:
        raise BadArgs(f"--lock-clocks must be a clock in MHz up to 5000, got {ns.lock_clocks}")
    if ns.workload in DECODER_WORKLOADS:
        _in_range((("--heads", ns.heads, MAX_HEADS), ("--kv-heads", ns.kv_heads, MAX_HEADS),
                   ("--head-dim", ns.head_dim, MAX_HEAD_DIM)))  # fmt: skip
        if ns.heads % ns.kv_heads:
            raise BadArgs(f"--heads {ns.heads} is not a multiple of --kv-heads {ns.kv_heads}")
        if ns.head_dim % 2:
            raise BadArgs(f"--head-dim must be even (rotary embeddings rotate pairs), got {ns.head_dim}")
    if ns.workload in MODEL_WORKLOADS:
        _in_range((("--layers", ns.layers, MAX_LAYERS), ("--vocab", ns.vocab, MAX_VOCAB)))
    elif ns.layers is not None or ns.vocab is not None:
        raise BadArgs(f"--layers and --vocab apply to the whole-model workloads ({', '.join(MODEL_WORKLOADS)}) only")


def _check_memory(ns: argparse.Namespace) -> None:
    tokens = ns.batch * ns.seq
    if tokens > MAX_TOKENS:
        raise BadArgs(f"batch x seq = {tokens} tokens exceeds the limit of {MAX_TOKENS}")
    est = estimate_bytes(ns.workload, tokens, ns.d_model, ns.hidden, ns.dtype, ns.train, ns)
    if est > MAX_EST_BYTES:
        raise BadArgs(
            f"estimated GPU memory {est / 2**30:.1f} GiB exceeds the limit of {MAX_EST_BYTES / 2**30:.0f} GiB"
        )


def validate(ns: argparse.Namespace) -> list[str]:
    """Check every argument; return the variant list. Raises BadArgs with a one-line reason."""
    if ns.workload not in WORKLOADS + DECODER_WORKLOADS:
        raise BadArgs(f"unknown workload {ns.workload!r}; choose one of {', '.join(WORKLOADS + DECODER_WORKLOADS)}")
    if ns.dtype not in DTYPE_BYTES:
        raise BadArgs(f"unknown dtype {ns.dtype!r}; choose one of {', '.join(DTYPE_BYTES)}")
    _fill_defaults(ns)
    if getattr(ns, "input_grad", False) and not ns.train:
        raise BadArgs("--input-grad applies to a training step: add --train")
    if getattr(ns, "input_grad", False) and ns.workload in MODEL_WORKLOADS:
        raise BadArgs("--input-grad applies to an MLP or a decoder layer; a whole model's input is token ids")
    variants = _variants(ns)
    _check_sizes(ns)
    if ns.measure_bytes not in (None, "all"):
        wanted = [v.strip() for v in ns.measure_bytes.split(",") if v.strip()]
        stray = [v for v in wanted if v not in variants]
        if not wanted or stray:
            raise BadArgs(f"--measure-bytes names variant(s) not recorded in this run: {', '.join(map(repr, stray))}")
    _check_memory(ns)
    if ns.ncu_child is None:
        if not ns.out:
            raise BadArgs("--out DIR is required")
        out = Path(ns.out)
        if out.exists() and not out.is_dir():
            raise BadArgs(f"--out {ns.out!r} exists and is not a folder")
    return variants
