"""The training bench: one forward + backward step of each MLP variant -> bench/results/kernels_train_<gpu>.{md,json}.

    python -m kernels.bench --train [--rows hf-geglu-bf16,...] [--out-dir bench/results] [--budget-s 420] [--no-input-grad]

Per row: eager, compile, liger (gated MLPs) and fuselens (the path its first training call measured faster:
kernels.models.dispatch.choose_train), each step = forward, then backward of a fixed random dY (y.backward(dy)),
the weights' and x's .grad cleared after it. x needs its gradient, as every MLP's input in a model but the first
layer's does, so the step runs all 3 x the forward's GEMMs (the dX GEMMs are 2/9 of a gated step's FLOPs);
--no-input-grad times the first layer's step instead (as the runner's single-MLP --train step). Timed like the forward
bench (kernels.ops.timing: CUDA events, L2 flushed by a read before every call, launches queued ahead) in two
passes, the second in reverse order; µs = the mean of the two medians, spread = their difference.
Columns: µs, × the fastest peer, × the floor: the step's matmul FLOPs (workloads.train_step_flops) over the rate of
cuBLAS's 8192³ matmul timed in the row's own passes at the steps' duty cycle (shapes.duty_matched), and over its
burst rate (the fastest of three 30-call bursts at the start of the run, shapes.matmul_ceiling_tflops); peak memory
of the step above what was allocated before it (the saved activations, the backward's temporaries and the weight
and input gradients, which every variant allocates alike), and the worst relative error of the weight and input
gradients against the same module's gradients in float32 (same rounded weights, input and dY). Verdict against the fastest peer as the shape sweep's:
WIN (faster by more than the spread), TIE, LOSS.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import torch

from kernels.lab.shapes import ceiling_matmul, duty_matched, matmul_ceiling_tflops
from kernels.models import dispatch
from kernels.models.variants import VariantUnavailable, build
from kernels.models.workloads import DTYPES, build_model, make_input, train_step_flops
from kernels.ops.timing import median_us, pass_orders
from kernels.ops.triton_util import CudaContextLost, reraise_if_fatal
from kernels.runner import envinfo

# (id, what, workload, dtype, tokens, d_model, hidden)
TRAIN_ROWS = [
    ("hf-geglu-bf16", "HF GEGLU", "geglu", "bf16", 8192, 768, 3072),
    ("hf-geglu-fp16", "HF GEGLU", "geglu", "fp16", 8192, 768, 3072),
    ("llama2-7b-bf16", "SwiGLU, Llama-2-7B MLP", "swiglu", "bf16", 4096, 4096, 11008),
    ("llama2-7b-fp16", "SwiGLU, Llama-2-7B MLP", "swiglu", "fp16", 4096, 4096, 11008),
    ("qwen05b-bf16", "SwiGLU, Qwen2.5-0.5B MLP", "swiglu", "bf16", 4096, 896, 4864),
    ("qwen05b-fp16", "SwiGLU, Qwen2.5-0.5B MLP", "swiglu", "fp16", 4096, 896, 4864),
    ("bert-large-bf16", "plain, BERT-large MLP", "plain", "bf16", 4096, 1024, 4096),
    ("llama3-8b-bf16", "SwiGLU, Llama-3-8B MLP", "swiglu", "bf16", 8192, 4096, 14336),
    ("tinyllama-fp16", "SwiGLU, TinyLlama MLP", "swiglu", "fp16", 2048, 2048, 5632),
]
PEERS = ("eager", "compile", "liger")
CEILING = "ceiling"  # the cuBLAS matmul timed in each pass at the row's duty cycle (shapes.duty_matched)
VARIANTS = (*PEERS, "fuselens")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _grads(model) -> list[torch.Tensor]:
    return [p.grad for p in model.parameters()]


def _rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    a = a.float()
    if not torch.isfinite(a).all():
        return float("nan")
    return float((a - ref).norm() / ref.norm())


def bench_row(row, tf: dict, n_iter: int, input_grad: bool = True) -> dict:
    rid, what, workload, dname, tokens, d, h = row
    dt = DTYPES[dname]
    model = build_model(workload, d, h, dt, "cuda").train()
    x = make_input(1, tokens, d, dt, "cuda").requires_grad_(input_grad)
    gen = torch.Generator(device="cpu").manual_seed(2)
    dy = torch.randn(1, tokens, d, generator=gen).to(device="cuda", dtype=dt) * d**-0.5
    ref_model = build_model(workload, d, h, torch.float32, "cuda").train()
    ref_model.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    x_ref = x.detach().float().requires_grad_(input_grad)
    ref_model(x_ref).backward(dy.float())
    ref = [g.detach() for g in _grads(ref_model)] + ([x_ref.grad] if input_grad else [])
    del ref_model, x_ref
    flops = train_step_flops(workload, tokens, d, h, input_grad)
    out = {"id": rid, "what": what, "workload": workload, "dtype": dname, "tokens": tokens, "d_model": d, "hidden": h}
    out["input_grad"] = input_grad
    out["step_tflop"] = flops / 1e12
    out["floor_burst_us"] = flops / (tf[dname] * 1e12) * 1e6
    steps, res = {}, {}
    for name in VARIANTS:
        try:
            fn = build(name, model, train=True)
        except VariantUnavailable as exc:
            res[name] = {"skipped": str(exc)}
            continue

        def step(fn=fn, params=(*model.parameters(), x)):
            fn(x).backward(dy)
            for p in params:
                p.grad = None

        try:
            t0 = time.time()
            fn(x).backward(dy)  # warm-up: compiles / tunes / measures the dispatch choice
            got = _grads(model) + ([x.grad] if input_grad else [])
            res[name] = {"grad_rel_err": max(_rel(g, r) for g, r in zip(got, ref, strict=True))}
            for p in (*model.parameters(), x):
                p.grad = None
            step()
            step()
            torch.cuda.synchronize()
            gc.collect()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            res[name]["peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
            res[name]["warm_s"] = round(time.time() - t0, 1)
            steps[name] = step
        except Exception as exc:  # a variant that fails here is reported, not fatal to the row
            reraise_if_fatal(exc, f"{rid} {name}'s warm-up")  # unless the CUDA context is dead: then nothing runs
            res[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            log(f"{rid} {name}: {res[name]['error']}")
    times: dict[str, list[float]] = {n: [] for n in steps}
    if steps:
        # the floor's matmul runs in the same passes, as long back to back and in all as a step's pass, so it sees
        # the clocks the steps do (held Llama-size GEMMs run at the 700 W limit: shapes.duty_matched)
        est_us = min(median_us(s, n_iter=3, warmup=1)["median_us"] for s in steps.values())
        ceiling_call, ceiling_flop = ceiling_matmul(dname)
        ceiling_calls, chunk = duty_matched(est_us, n_iter, ceiling_flop / (tf[dname] * 1e6))
        times[CEILING] = []
        for order in pass_orders(times):
            for name in order:
                if name == CEILING:
                    t = median_us(ceiling_call, n_iter=ceiling_calls, warmup=2, queue_chunk=chunk)
                else:
                    t = median_us(steps[name], n_iter=n_iter, warmup=3)
                times[name].append(t["median_us"])
        ps = times.pop(CEILING)
        rate = ceiling_flop / (sum(ps) / len(ps)) / 1e6  # TFLOP/s
        out["ceiling_duty"] = {"tflops": rate, "us_passes": ps, "n_iter": ceiling_calls, "queue_chunk": chunk}
        out["floor_us"] = flops / (rate * 1e12) * 1e6
    for name, ts in times.items():
        res[name]["us"] = sum(ts) / len(ts)
        res[name]["spread_us"] = abs(ts[0] - ts[-1])
    dec = dispatch.decision_for(model, x, train=True)
    out["fuselens_path"] = dec["path"] if dec else None
    out["fuselens_probe_us"] = dec["probe_us"] if dec else None
    from kernels.models import train_ops

    out["fuselens_epilogue"] = train_ops.EPILOGUE_RAN.get(
        (model.activation, dt, tokens, h)
    )  # "ws": the Gluon dH kernel ran, "tma": the Triton one, "torch": the fallback
    if workload != "plain":  # where the gated op keeps g and u (train_ops.layout_apart: by the step's peak memory)
        apart = train_ops.layout_apart(x.reshape(-1, d), model.gate_proj.weight, model.up_proj.weight)
        out["fuselens_saved"] = "g, u apart" if apart else "[g | u]"
    from kernels.ops import mlp_backward

    # the first-call measurements behind those choices ({"triton": us, "(rows, stages, group_m)": us, ...})
    def this_row(k) -> bool:  # keys (device, dtype, act, row bucket, h, d[, the dH key's saved row stride])
        return k[1] == dt and k[4] == h and k[5] == d

    out["dh_kernel_us"] = {str(k[3:]): v for k, v in mlp_backward.WS_TIMINGS.items() if this_row(k)}
    out["save_kernel_us"] = {str(k[3:]): v for k, v in mlp_backward.SAVE_WS_TIMINGS.items() if this_row(k)}
    # Gluon configs that could not compile or launch at this row, and why (they were left out of the measurement)
    out["ws_failed"] = {str(k[1]): why for k, why in mlp_backward.WS_FAILED.items() if this_row(k[0])}
    out["variants"] = res
    peers = {n: res[n]["us"] for n in PEERS if "us" in res.get(n, {})}
    fl = res.get("fuselens", {})
    if peers and "us" in fl:
        best = min(peers, key=peers.get)
        out["best_peer"] = best
        out["x_best"] = fl["us"] / peers[best]
        out["x_floor"] = fl["us"] / out["floor_us"]
        out["x_floor_burst"] = fl["us"] / out["floor_burst_us"]
        noise = max(fl["spread_us"], res[best]["spread_us"])
        out["verdict"] = (
            "WIN" if fl["us"] < peers[best] - noise else ("LOSS" if fl["us"] > peers[best] + noise else "TIE")
        )
        mem_peers = {n: res[n]["peak_mib"] for n in ("liger",) if "peak_mib" in res.get(n, {})}
        if mem_peers:
            out["x_liger_peak_mem"] = fl["peak_mib"] / mem_peers["liger"]
    steps.clear()
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()
    return out


def _floors(r: dict) -> str:
    """'duty / burst' × floor cells; rows from before the duty floor hold the burst one as x_floor."""
    if "x_floor_burst" in r:
        return f"{r['x_floor']:.3f} / {r['x_floor_burst']:.3f}"
    return f"– / {r['x_floor']:.3f}" if "x_floor" in r else "–"


def floor_over_best_peer(r: dict) -> str:
    """The '× best peer' a step run exactly at the row's floor would show (duty floor; the burst one for rows from
    before it): roughly how much any kernel could still win over the fastest peer there."""
    best = r.get("best_peer")
    if not best or "floor_us" not in r or "us" not in r["variants"].get(best, {}):
        return "–"
    return f"{r['floor_us'] / r['variants'][best]['us']:.3f}"


def to_markdown(res: dict) -> str:
    env = res["env"]
    lines = [
        f"# FuseLens training step (forward + backward) on {env['gpu']['name']}",
        "",
        f"Written by `{res['command']}` at {res['created_utc']} (commit {env.get('git_commit')}); torch {env.get('torch')}, triton {env.get('triton')},"
        f" liger-kernel {env.get('liger_kernel')}.",
        "",
        "Method: " + res["method"],
        "Floors: the step's matmul FLOPs (3 x the forward's, less the dX GEMMs where x needs no gradient) at cuBLAS's"
        " 8192³ matmul rate timed in the row's passes at the steps' duty cycle (duty), and at its burst rate measured"
        " here (burst: "
        + ", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in res["matmul_tflops"].items())
        + "); a row written before the duty floor existed shows the burst one only. Floor ÷ best peer: the '× best"
        " peer' a step run at that floor would show (the floor is cuBLAS's 8192³ rate, a reference rather than a"
        " bound: a peer whose GEMMs run faster than it comes out above 1).",
        "Peak MiB: memory allocated during one step above what was allocated before it (saved activations, backward"
        " temporaries and the weight and input gradients, the last two alike for every variant).",
        "",
        "| row | dtype | tokens × d → h | dX | eager µs | compile µs | liger µs | fuselens µs | × best peer | × floor duty / burst |"
        " floor ÷ best peer | verdict | peak MiB eager / compile / liger / fuselens | fuselens ÷ liger peak |"
        " grad rel err (fuselens) | fuselens path |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---|",
    ]
    for r in res["rows"]:
        v = r["variants"]

        def us(n, v=v):
            e = v.get(n, {})
            return f"{e['us']:.1f}" if "us" in e else ("n/a" if "skipped" in e else "error")

        def mem(n, v=v):
            e = v.get(n, {})
            return f"{e['peak_mib']:.0f}" if "peak_mib" in e else "–"

        fl = v.get("fuselens", {})
        err = fl.get("grad_rel_err")
        cells = [
            r["what"],
            r["dtype"],
            f"{r['tokens']} × {r['d_model']} → {r['hidden']}",
            "yes" if r.get("input_grad", False) else "no",
            *(us(n) for n in VARIANTS),
            f"{r['x_best']:.3f}" if "x_best" in r else "–",
            _floors(r),
            floor_over_best_peer(r),
            r.get("verdict", "–"),
            " / ".join(mem(n) for n in VARIANTS),
            f"{r['x_liger_peak_mem']:.2f}" if "x_liger_peak_mem" in r else "–",
            f"{err:.2e}" if err is not None else "–",
            f"{r.get('fuselens_path')} (dH epilogue: {r.get('fuselens_epilogue')}"
            + (f"; saved {r['fuselens_saved']})" if r.get("fuselens_saved") else ")"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if res.get("not_run"):
        lines += ["", f"Not run (time budget): {', '.join(res['not_run'])}."]
    if res.get("notes"):  # a file assembled from several runs says which row came from where, and the repeats
        lines += ["", *(f"- {n}" for n in res["notes"])]
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels.bench --train", description=__doc__.split("\n\n")[0])
    p.add_argument("--train", action="store_true")
    p.add_argument("--out-dir", default="bench/results")
    p.add_argument("--rows", help="only these row ids (comma-separated)")
    p.add_argument("--n-iter", type=int, default=30, help="timed steps per pass (default 30)")
    p.add_argument("--budget-s", type=float, default=0, help="stop starting new rows after this many seconds")
    p.add_argument(
        "--no-input-grad",
        dest="input_grad",
        action="store_false",
        help="x takes no gradient (a first layer's step: no dX GEMMs); default: x needs one, as in a model",
    )
    p.add_argument("--render", metavar="JSON", help="only re-render the .md beside a results .json (no GPU needed)")
    ns = p.parse_args(argv)
    if ns.render:
        src = Path(ns.render)
        try:
            src.with_suffix(".md").write_text(to_markdown(json.loads(src.read_text())))
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: cannot render {src}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        return 0
    if not torch.cuda.is_available():
        print("error: no CUDA GPU; the bench needs one", file=sys.stderr)
        return 3
    known = {r[0]: r for r in TRAIN_ROWS}
    ids = ns.rows.split(",") if ns.rows else list(known)
    bad = [i for i in ids if i not in known]
    if bad:
        print(f"error: unknown row id(s) {', '.join(bad)}; expected from {', '.join(known)}", file=sys.stderr)
        return 2
    t0 = time.time()
    res = {
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python -m kernels.bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "method": f"CUDA events, median of {ns.n_iter} steps per pass, two passes (A B, B A), L2 flushed before every"
        " step by reading a 256 MB buffer (untimed); step = forward + y.backward(dY), weight grads cleared"
        + ("; x needs its gradient (dX computed)" if ns.input_grad else "; x needs no gradient (no dX)"),
        "env": envinfo.environment(),
    }
    dnames = sorted({known[i][3] for i in ids})
    res["matmul_tflops"] = {dn: matmul_ceiling_tflops(dn) for dn in dnames}
    log(f"matmul rates: {res['matmul_tflops']}")
    res["rows"] = []
    out_dir = Path(ns.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = envinfo.gpu_slug(res["env"]["gpu"]["name"])
    path = out_dir / f"kernels_train_{slug}.json"
    for i in ids:
        if ns.budget_s and time.time() - t0 > ns.budget_s:
            log(f"budget: {i} and later rows not run")
            res.setdefault("not_run", []).append(i)
            continue
        try:
            row = bench_row(known[i], res["matmul_tflops"], ns.n_iter, ns.input_grad)
        except CudaContextLost as exc:
            from kernels.ops import mlp_backward

            log(f"probes {dispatch._PROBES}; Gluon failures {mlp_backward.WS_FAILED}")
            print(f"error: {exc}; the rows measured before it are in {path}", file=sys.stderr)
            return 1
        log(json.dumps({k: v for k, v in row.items() if k != "variants"}))
        res["rows"].append(row)
        path.write_text(json.dumps(res, indent=1))  # after every row: a cut-off run keeps what it measured
        path.with_suffix(".md").write_text(to_markdown(res))
    print(to_markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
