"""What the runner writes into manifest.json: the run's header (environment, workload, shapes, how it was profiled
and timed) and one entry per recorded variant. The format is read by analyzer.runmeta (schema
"fuselens.profile/1"); the command's docstring (kernels.runner.options) lists every field."""

from __future__ import annotations

import statistics
import time

from kernels.runner import control, envinfo
from kernels.runner.options import DECODER_WORKLOADS, LAYER_WORKLOADS, MODEL_WORKLOADS, N_TIMED
from kernels.runner.record import Live

SCHEMA = "fuselens.profile/1"


def header(ns) -> dict:
    """Everything known before the first variant runs ("variants" empty)."""
    tokens = ns.batch * ns.seq
    shapes = {"batch": ns.batch, "seq": ns.seq, "tokens": tokens, "d_model": ns.d_model, "hidden": ns.hidden}
    if ns.workload in DECODER_WORKLOADS:
        shapes.update(heads=ns.heads, kv_heads=ns.kv_heads, head_dim=ns.head_dim, intermediate=ns.hidden)
    if ns.workload in MODEL_WORKLOADS:
        shapes.update(layers=ns.layers, vocab=ns.vocab)
    manifest = {
        "schema": SCHEMA,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **envinfo.environment(),
        "workload": ns.workload,
        "shapes": shapes,
        "dtype": ns.dtype,
        "train": ns.train,
        **(
            {
                "train_step": "y = variant(x); loss = y.float().square().mean(); loss.backward(); grads cleared. "
                + (
                    "x needs its gradient (--input-grad: the backward runs dX, as in any layer of a model but the first)"
                    if getattr(ns, "input_grad", False)
                    else "x needs no gradient (a first layer's step: the backward runs no dX GEMM; --input-grad and"
                    " `python -m kernels.bench --train` time the step with dX)"
                )
            }
            if ns.train and ns.workload not in MODEL_WORKLOADS
            else {}
        ),
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
            " overhead hidden; kernels.ops.timing); median_launch_bound_us: the same steps issued back to back from"
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
    return manifest


def pooled(times: list) -> dict:
    t = sorted(times)
    q = statistics.quantiles(t, n=10) if len(t) >= 10 else [t[0]] * 9
    return {"median_us": statistics.median(t), "p10_us": q[0], "p90_us": q[-1], "n_iter": len(t)}


def recorded_entry(lv: Live, trace_name: str, conditions: dict, probe_doc: dict | None, train: bool) -> dict:
    """A recorded variant's fields: its pooled CUDA-event times, conditions, FuseLens path, control probe times (None
    when the probe failed) and the one-line message the progress stream and the dashboard show."""
    t, launched = pooled(lv.times_us), pooled(lv.launch_us)
    entry = dict(
        status="done",
        trace=trace_name,
        median_us=round(t["median_us"], 2),
        p10_us=round(t["p10_us"], 2),
        p90_us=round(t["p90_us"], 2),
        n_iter=t["n_iter"],
        median_launch_bound_us=round(launched["median_us"], 2),
        l2_flushed=False,
        warmup_s=round(lv.warm_s, 2),
        conditions=conditions,
        **lv.path,
    )
    if probe_doc is not None:
        entry["control_probe"] = control.probe_times(probe_doc)
    entry["message"] = f"median {entry['median_us']:.1f} us per {'training step' if train else 'forward'}"
    clk = (conditions["profiled"] or {}).get("sm_clock_mhz")
    if clk:
        entry["message"] += f"; SM clock {clk['median']:.0f} MHz while profiled"
    if "fuselens_path" in entry:
        entry["message"] += f"; path {entry['fuselens_path']}"
        if entry["fuselens_fused"] is False and lv.name != "fuselens-gating":
            entry["message"] += " (fusion measured slower at this size: fell back)"
    return entry
