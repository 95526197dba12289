"""The bench's shape sweep: the MLP forwards users bring, FuseLens beside its peers at each one.

    python -m kernels.bench --shapes llm          (the LLM rows)   --shapes llm-dtypes   (the other dtypes)

Per row: eager, compile, liger (gated MLPs) and fuselens (whatever path its first-call measurement chose,
kernels.models.dispatch), each timed like the rest of the bench (kernels.ops.timing: CUDA events, L2 flushed by a
read before every call, launches queued ahead, so GPU time) in two interleaved passes, the second in reverse order; a row's µs is the mean of
the two passes' medians and their difference is its noise. Reported: µs, × compile, × the fastest peer, × the
compute floor (FLOPs over this GPU's matmul rate for the dtype, measured in the row's own passes at the row's duty
cycle: duty_matched) and × the burst floor (the same over the rate of short bursts), the relative error against the same
module (same rounded weights and input) computed in float32 (float64 for fp32 rows), the path fuselens ran, and a
three-way verdict against the fastest peer: WIN (faster by more than the pass-to-pass spread), TIE (within it),
LOSS. Rows of <= 512 tokens are launch-bound on
most hosts, so they also carry each variant's CUDA-graph replay time and its launch-bound time.

Bounded for one <= 9-minute GPU command: huge forwards get fewer timed calls (n_iter_for), torch.compile's caches
are reset between rows (every row is a new module; without a reset Dynamo's cache limit would silently run
eager after 8 rows).
"""

from __future__ import annotations

import copy
import gc
import sys
import time

import torch

from kernels.models import dispatch
from kernels.models.variants import VariantUnavailable, build
from kernels.models.workloads import DTYPES, build_model, make_input, mlp_flops
from kernels.ops.timing import QUEUE_CHUNK, graphed, median_us, pass_orders

# (id, what, workload, dtype, tokens, d_model, hidden)
LLM_ROWS = [
    ("hf-geglu-bf16", "HF GEGLU", "geglu", "bf16", 8192, 768, 3072),
    ("llama2-7b-bf16", "SwiGLU, Llama-2-7B MLP", "swiglu", "bf16", 4096, 4096, 11008),
    ("llama3-8b-bf16", "SwiGLU, Llama-3-8B MLP", "swiglu", "bf16", 8192, 4096, 14336),
    ("tinyllama-fp16", "SwiGLU, TinyLlama MLP", "swiglu", "fp16", 2048, 2048, 5632),
    ("bert-large-bf16", "plain, BERT-large MLP", "plain", "bf16", 4096, 1024, 4096),
    ("odd-aligned-bf16", "GEGLU, odd but aligned", "geglu", "bf16", 333, 1000, 2816),
    ("unaligned-bf16", "GEGLU, unaligned rows", "geglu", "bf16", 77, 1001, 3000),
    ("decode-bf16", "SwiGLU, decode", "swiglu", "bf16", 16, 4096, 14336),
]
DTYPE_ROWS = [
    ("hf-geglu-fp16", "HF GEGLU", "geglu", "fp16", 8192, 768, 3072),
    ("hf-swiglu-fp32", "HF SwiGLU", "swiglu", "fp32", 8192, 768, 3072),
    ("llama2-7b-fp16", "SwiGLU, Llama-2-7B MLP", "swiglu", "fp16", 4096, 4096, 11008),
    ("tinyllama-bf16", "SwiGLU, TinyLlama MLP", "swiglu", "bf16", 2048, 2048, 5632),
    ("bert-large-fp16", "plain, BERT-large MLP", "plain", "fp16", 4096, 1024, 4096),
    ("odd-aligned-fp16", "GEGLU, odd but aligned", "geglu", "fp16", 333, 1000, 2816),
    ("unaligned-fp32", "GEGLU, unaligned rows", "geglu", "fp32", 77, 1001, 3000),
    ("decode-fp16", "SwiGLU, decode", "swiglu", "fp16", 16, 4096, 14336),
]
# The plain Hugging Face MLP (GPT-2 / BERT-base: 768 -> 3072, and a wide 768 -> 8192) at the runner's default
# 64 x 128 tokens and at one token: the problems a fusion plan quotes GEMM+act's measured saving at.
HF_PLAIN_ROWS = [
    ("hf-plain-bf16", "plain, HF MLP", "plain", "bf16", 8192, 768, 3072),
    ("hf-plain-h8192-bf16", "plain, HF MLP, hidden 8192", "plain", "bf16", 8192, 768, 8192),
    ("hf-plain-1tok-bf16", "plain, HF MLP, one token", "plain", "bf16", 1, 768, 3072),
]
# The MLP shapes teammates measured FuseLens at (the models' own MLP widths at common token counts), the Llama-2-13B
# fp16 row at 1000 tokens being the one that sat at the edge (1.07 / 1.10 / 0.99 x the fastest peer in three runs).
USER_ROWS = [
    ("qwen25-05b-bf16", "SwiGLU, Qwen2.5-0.5B MLP", "swiglu", "bf16", 4096, 896, 4864),
    ("gemma-2b-bf16", "GEGLU, Gemma-2B MLP", "geglu", "bf16", 4096, 2048, 16384),
    ("phi3-mini-bf16", "SwiGLU, Phi-3-mini MLP", "swiglu", "bf16", 4096, 3072, 8192),
    ("qwen25-7b-bf16", "SwiGLU, Qwen2.5-7B MLP", "swiglu", "bf16", 2048, 3584, 18944),
    ("decode-1tok-bf16", "SwiGLU, one-token decode", "swiglu", "bf16", 1, 4096, 11008),
    ("prefill-512-bf16", "SwiGLU, 512-token prefill", "swiglu", "bf16", 512, 4096, 14336),
    ("llama2-13b-m1000-fp16", "SwiGLU, Llama-2-13B MLP, 1000 tokens", "swiglu", "fp16", 1000, 5120, 13824),
    ("hf-geglu-fp32", "HF GEGLU", "geglu", "fp32", 8192, 768, 3072),
]
SHAPE_SETS = {
    "users": USER_ROWS,
    "llm": LLM_ROWS,
    "llm-dtypes": DTYPE_ROWS,
    "llm-all": LLM_ROWS + DTYPE_ROWS,
    "hf-plain": HF_PLAIN_ROWS,
    "all": LLM_ROWS + DTYPE_ROWS + HF_PLAIN_ROWS + USER_ROWS,
}
PEERS = ("eager", "compile", "liger")
CEILING = "ceiling"  # the dtype's ceiling matmul, timed in the row's passes at the row's duty cycle (duty_matched)
LAUNCH_BOUND_TOKENS = 512


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def n_iter_for(est_us: float) -> int:
    """Timed calls per pass: ~0.2 s of GPU time, between 20 and 200 calls."""
    return int(min(200, max(20, 2e5 / max(est_us, 1.0))))


_CEILING_OPERANDS: dict = {}


def ceiling_matmul(dname: str):
    """(call, flop): one n³ torch.matmul for the dtype's ceiling, 8192 for 16-bit, 4096 for fp32 (which runs without
    TF32, as the fp32 rows do); operands made once per dtype."""
    n = 4096 if dname == "fp32" else 8192
    if dname not in _CEILING_OPERANDS:
        _CEILING_OPERANDS[dname] = [torch.randn(n, n, device="cuda", dtype=DTYPES[dname]) for _ in range(2)]
    a, b = _CEILING_OPERANDS[dname]
    return (lambda: torch.matmul(a, b)), 2 * n**3


def matmul_ceiling_tflops(dname: str) -> float:
    """This GPU's burst matmul rate for the dtype: the fastest of three passes of 30 ceiling_matmul calls (~40 ms of
    work each at 8192³, so the card runs at its highest clock)."""
    call, flop = ceiling_matmul(dname)
    us = min(median_us(call, n_iter=30, warmup=10 if i else 30)["median_us"] for i in range(3))
    return flop / (us * 1e-6) / 1e12


def duty_matched(row_us: float, row_calls: int, ceiling_us: float) -> tuple[int, int]:
    """(calls, calls between rests) for timing the ceiling matmul at a row's duty cycle: as long back to back as one
    of the row's queue-ahead chunks (QUEUE_CHUNK calls), for as long in all as the row's pass. Why: a Llama-3-8B
    forward (3.9 ms) runs ~100 ms at a time, and held that long the H100's GEMMs run at the 700 W limit, SM 1485-1665
    MHz, against 1770-1980 MHz in the 40 ms bursts of matmul_ceiling_tflops (bench/results/sweep_floor_*.md); a floor
    from the burst rate is one the row could not reach at any efficiency."""
    chunk = max(1, round(QUEUE_CHUNK * row_us / ceiling_us))
    return max(chunk, round(row_calls * row_us / ceiling_us), 5), chunk


def _rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    y = y.double()
    if not torch.isfinite(y).all():
        return float("nan")
    return float((y - ref).norm() / ref.norm())


def verdict(ours: dict, peer: dict) -> str:
    """WIN / TIE / LOSS of ours against one peer: a lead within the larger pass-to-pass spread is a tie."""
    spread = max(ours["spread_us"], peer["spread_us"])
    lead = peer["us"] - ours["us"]
    return "WIN" if lead > spread else "TIE" if lead >= -spread else "LOSS"


def bench_row(row: tuple, ceilings: dict) -> dict:
    rid, what, workload, dname, tokens, d, h = row
    dt = DTYPES[dname]
    torch._dynamo.reset()
    model = build_model(workload, d, h, dt, "cuda")
    x = make_input(1, tokens, d, dt, "cuda")
    ref_dt = torch.float64 if dname == "fp32" else torch.float32
    with torch.no_grad():  # the same (rounded) weights, computed in the wider type
        ref = copy.deepcopy(model).to(ref_dt)(x.to(ref_dt)).double()
    if dname not in ceilings:
        ceilings[dname] = matmul_ceiling_tflops(dname)
    flop = mlp_flops(workload, tokens, d, h)
    out = {"id": rid, "what": what, "workload": workload, "dtype": dname, "tokens": tokens, "d_model": d}
    out.update(hidden=h, floor_burst_us=flop / (ceilings[dname] * 1e12) * 1e6, variants={})
    fns = {}
    for name in (*PEERS, "fuselens"):
        v = out["variants"][name] = {}
        try:
            t0 = time.perf_counter()
            fn = build(name, model)
            with torch.no_grad():
                for _ in range(3):
                    y = fn(x)
                torch.cuda.synchronize()
            v["warmup_s"] = round(time.perf_counter() - t0, 2)
            v["rel_err"] = _rel_err(y, ref)
            fns[name] = fn
            if name == "fuselens":
                v.update(dispatch.decision_for(model, x) or {})
        except VariantUnavailable as exc:
            v["skipped"] = str(exc)
        except Exception as exc:  # one variant failing (out of memory, a compile error) must not lose the row
            v["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            log(f"shapes {rid} {name} FAILED: {v['error']}")
    with torch.no_grad():
        est = min(median_us(lambda fn=fn: fn(x), n_iter=5, warmup=1)["median_us"] for fn in fns.values())
        n = n_iter_for(est)
        ceiling_call, ceiling_flop = ceiling_matmul(dname)
        ceiling_calls, ceiling_chunk = duty_matched(est, n, ceiling_flop / ceilings[dname] / 1e6)
        passes = {name: [] for name in (*fns, CEILING)}
        for order in pass_orders(passes):
            for name in order:
                if name == CEILING:
                    t = median_us(ceiling_call, n_iter=ceiling_calls, warmup=2, queue_chunk=ceiling_chunk)
                else:
                    t = median_us(lambda fn=fns[name]: fn(x), n_iter=n, warmup=2, flush_l2=True)
                passes[name].append(t["median_us"])
        ps = passes.pop(CEILING)
        rate = ceiling_flop / (sum(ps) / 2) / 1e6  # TFLOP/s
        out["ceiling_duty"] = {"tflops": rate, "us_passes": ps, "n_iter": ceiling_calls, "queue_chunk": ceiling_chunk}
        out["floor_us"] = flop / (rate * 1e12) * 1e6
        for name, ps in passes.items():
            out["variants"][name].update(us=sum(ps) / 2, us_passes=ps, spread_us=abs(ps[0] - ps[1]), n_iter=n)
        if tokens <= LAUNCH_BOUND_TOKENS:
            for name, fn in fns.items():
                v = out["variants"][name]
                v["launch_bound_us"] = median_us(lambda fn=fn: fn(x), n_iter=n, flush_l2=True, queue_ahead=False)[
                    "median_us"
                ]
                try:
                    v["graph_us"] = median_us(graphed(fn, x), n_iter=n, flush_l2=True)["median_us"]
                except Exception as exc:  # torch.compile's own graphs or a capture-unsafe path
                    v["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    judge(out)
    log(
        f"shapes {rid}: "
        + ", ".join(f"{k} {v.get('us', float('nan')):.1f}" for k, v in out["variants"].items())
        + f" | fuselens path {out['variants']['fuselens'].get('path')} {out.get('verdict')}"
    )
    return out


def judge(row: dict) -> None:
    """Ratios and the verdict of fuselens against the fastest peer, from the row's own timings (re-run by
    to_markdown-time callers on committed JSON, so nothing here is stored that cannot be recomputed)."""
    vs = row["variants"]
    ours = vs.get("fuselens", {})
    peers = {k: v for k, v in vs.items() if k in PEERS and "us" in v}
    if "us" not in ours or not peers:
        row["verdict"] = "n/a"
        return
    best = min(peers, key=lambda k: peers[k]["us"])
    row["fastest_peer"] = best
    row["x_fastest_peer"] = ours["us"] / peers[best]["us"]
    row["x_compile"] = ours["us"] / vs["compile"]["us"] if "us" in vs.get("compile", {}) else None
    row["x_floor"] = ours["us"] / row["floor_us"] if row.get("floor_us") else None
    row["x_floor_burst"] = ours["us"] / row["floor_burst_us"] if row.get("floor_burst_us") else None
    row["verdict"] = verdict(ours, peers[best])


def _f(v, spec=".1f") -> str:
    return "–" if v is None else format(v, spec)


def _rate_tflops(row: dict, floor_key: str) -> float | None:
    """The matmul rate (TFLOP/s) a row's floor was computed from: its FLOPs over the floor, one truth per row."""
    if not row.get(floor_key):
        return None
    return mlp_flops(row["workload"], row["tokens"], row["d_model"], row["hidden"]) / row[floor_key] / 1e6


def _row_ceilings(rows: list[dict]) -> dict[str, str]:
    """dtype -> the burst matmul rates (TFLOP/s) behind the rows' burst floors."""
    seen: dict[str, set] = {}
    for r in rows:
        if (rate := _rate_tflops(r, "floor_burst_us")) is not None:
            seen.setdefault(r["dtype"], set()).add(round(rate))
    return {k: " / ".join(str(v) for v in sorted(s)) for k, s in seen.items()}


def to_markdown(rows: list[dict], ceilings: dict) -> list[str]:
    if not rows:
        return []
    out = [
        "",
        "## Shape sweep: FuseLens beside its peers at the shapes users bring",
        "",
        "GPU µs per forward (CUDA events, L2 flushed by a read, launches queued ahead; mean of two passes, whose"
        " difference is the spread). fuselens runs the path its first-call measurement chose (`path`). Verdict:"
        " fuselens vs the fastest peer (eager / compile / liger): WIN beyond the spread, TIE within it, LOSS.",
        "× floor: fuselens over the row's FLOPs at the dtype's matmul rate measured at the row's duty cycle (an n³"
        " cuBLAS matmul timed in the row's own passes, back to back as long as the row's forwards are, so held at the"
        " same power limit; `duty` TFLOP/s). × burst floor: the same at the rate of 40 ms bursts at the card's highest"
        " clock (`burst`; each row's own run, a file merged from several runs can list two: "
        + ", ".join(f"{k} {v} TFLOP/s" for k, v in sorted(_row_ceilings(rows).items()))
        + ").",
        "",
        "| row | tokens × d → h | dtype | eager | compile | liger | **fuselens** | path | × compile | × fastest peer"
        " | × floor | × burst floor | ceiling TFLOP/s duty / burst | rel err fuselens / eager | verdict |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        vs = r["variants"]

        def us(name, vs=vs):
            v = vs.get(name, {})
            return _f(v.get("us")) if "us" in v else ("skip" if "skipped" in v else "err" if "error" in v else "–")

        fl = vs.get("fuselens", {})
        out.append(
            f"| {r['what']} | {r['tokens']} × {r['d_model']} → {r['hidden']} | {r['dtype']} | {us('eager')}"
            f" | {us('compile')} | {us('liger')} | **{us('fuselens')}** | {fl.get('path', '–')}"
            f" | {_f(r.get('x_compile'), '.2f')} | {_f(r.get('x_fastest_peer'), '.2f')} ({r.get('fastest_peer', '–')})"
            f" | {_f(r.get('x_floor'), '.2f')} | {_f(r.get('x_floor_burst'), '.2f')}"
            f" | {_f(_rate_tflops(r, 'floor_us'), '.0f')} / {_f(_rate_tflops(r, 'floor_burst_us'), '.0f')}"
            f" | {_f(fl.get('rel_err'), '.1e')} / {_f(vs.get('eager', {}).get('rel_err'), '.1e')}"
            f" | {r.get('verdict', 'n/a')} |"
        )
    small = [r for r in rows if any("graph_us" in v or "launch_bound_us" in v for v in r["variants"].values())]
    if small:
        out += [
            "",
            f"Rows of <= {LAUNCH_BOUND_TOKENS} tokens, launch-bound µs (one forward at a time from the host, as"
            " triton.testing.do_bench issues them) / CUDA-graph replay µs:",
            "",
            "| row | dtype | eager | compile | liger | fuselens |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for r in small:
            cells = []
            for name in (*PEERS, "fuselens"):
                v = r["variants"].get(name, {})
                cells.append(f"{_f(v.get('launch_bound_us'))} / {_f(v.get('graph_us'))}")
            out.append(f"| {r['what']} | {r['dtype']} | " + " | ".join(cells) + " |")
    return out


def run(shape_set: str, ceilings: dict, only: set | None = None, after_row=None) -> list[dict]:
    """Bench the set's rows (only those whose id is in `only`, when given); after_row(rows) runs after each one."""
    rows = []
    for row in SHAPE_SETS[shape_set]:
        if only and row[0] not in only:
            continue
        if rows and after_row is not None:
            after_row(rows)
        try:
            rows.append(bench_row(row, ceilings))
            gc.collect()  # the row's models, compiled graphs and references are garbage now
            torch.cuda.empty_cache()
        except torch.cuda.OutOfMemoryError:
            rid, what, workload, dname, tokens, d, h = row
            rows.append(
                {"id": rid, "what": what, "workload": workload, "dtype": dname, "tokens": tokens, "d_model": d}
                | {
                    "hidden": h,
                    "floor_us": None,
                    "floor_burst_us": None,
                    "variants": {},
                    "verdict": "n/a",
                    "error": "CUDA out of memory",
                }
            )
            torch.cuda.empty_cache()
    return rows
