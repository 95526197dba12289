"""The LLM MLP shapes against their compute floor: every candidate for each of the forward's GEMMs, timed in turns,
with the SM clock and power read while each one ran.

    python -m kernels.lab.sweep --cases floor [--out FILE.md]

Why: the bench's shape sweep gives one number per forward, and at Llama-3-8B sizes the card's SM clock moves with
how long it has been under load (1485-1980 MHz in bench/results/sweep_floor_h100_80gb_hbm3.md), so configs timed one
after another would be ranked partly by when they ran. Here, per shape:
  - the down projection [M, h] @ [h, d]: cuBLAS (F.linear) beside our single-GEMM TMA kernel with the identity
    epilogue (kernels.ops.hopper_gemm.persistent_gemm), one row per tile config;
  - the gate/up projection: cuBLAS computing [gate; up] as one GEMM beside the dual GEMM, one row per config;
  - whole forwards (dual GEMM + each down candidate), timed with the bench's call counts (kernels.lab.shapes
    n_iter_for: 56 calls of a 3.9 ms forward, i.e. ~100 ms of GEMMs between queue-ahead pauses) AND with the
    dispatch probe's 10, so the effect of a long stretch of full-power work on the clock shows;
  - the dtype's matmul ceiling (the bench's 8192^3 cuBLAS matmul, fastest of three passes) in the same process.
Candidates of one table take turns (PASSES passes over all of them, every other pass reversed), so slow drift of
clock or temperature hits all alike; a row's us is the mean of its passes and `spread` their difference. Each row carries the SM clock and
power that NVML read during its timed calls (kernels.runner.conditions.Sampler: the clock is instantaneous, power an
average over ~1 s) and its relative error against the same GEMM in float32.
"""

from __future__ import annotations

import time
import traceback
from functools import partial

import torch
import torch.nn.functional as F

from kernels.ops import hopper_gemm, ws_gemm
from kernels.ops.activations import TORCH_ACTS, act_id, epilogue_act_id
from kernels.ops.gemm_common import m_bucket
from kernels.ops.launch import config_text, forced
from kernels.ops.timing import median_us, pass_orders
from kernels.runner.conditions import Sampler, gpu_limits

PASSES = 2
# (name, tokens, d_model, hidden, dtype): the LLM rows (kernels.lab.shapes) whose x floor is above 1.05, then Llama-2-7B (met: 0.97)
FLOOR_CASES = [
    ("TinyLlama", 2048, 2048, 5632, torch.float16),
    ("TinyLlama", 2048, 2048, 5632, torch.bfloat16),
    ("Llama-3-8B", 8192, 4096, 14336, torch.bfloat16),
    ("Llama-2-7B", 4096, 4096, 11008, torch.bfloat16),
]
# Down projection candidates: the single-GEMM configs within 2% of cuBLAS at every LLM shape on the H100
# (bench/results/sweep_floor_h100_80gb_hbm3.md); 256 x 128 and 128 x 128 tiles were 5-40% slower there.
DOWN_CONFIGS = [
    hopper_gemm.single_config(128, 256, 64, 3, 8, subtile=True),
    hopper_gemm.single_config(128, 256, 64, 3, 8),
    hopper_gemm.single_config(128, 256, 64, 4, 8, group_m=4, subtile=True),
    hopper_gemm.single_config(128, 256, 64, 4, 8, group_m=16, subtile=True),
]
# Gate/up candidates: the best single-launch configs on the H100 at each LLM shape (128 x 128 s3 GROUP_M 8 at
# Llama-3-8B, s3 GROUP_M 16 at Llama-2-7B, 128 x 64 s5 at TinyLlama; the autotuner's s4 GROUP_M 16), then the same
# 128 x 128 tiles with the split-K wave tail (TAIL). TinyLlama's 2048 x 5632 output in 128x128 tiles is 704 tiles =
# 5.33 waves on 132 SMs (the last wave a third full, ~11% of the kernel idle).
GATED_CANDIDATES = [
    hopper_gemm.gated_config(128, 128, 64, 3, 8),
    hopper_gemm.gated_config(128, 128, 64, 3, 8, group_m=16),
    hopper_gemm.gated_config(128, 128, 64, 4, 8, group_m=16),
    hopper_gemm.gated_config(128, 64, 64, 5, 8),
    hopper_gemm.gated_config(128, 128, 64, 3, 8, tail=True),
    hopper_gemm.gated_config(128, 128, 64, 3, 8, group_m=16, tail=True),
    hopper_gemm.gated_config(128, 128, 64, 4, 8, group_m=16, tail=True),
]
DEVICE = "cuda"  # a module constant so a CPU dry run under TRITON_INTERPRET=1 can swap it
PROBE_CALLS = 10  # kernels.models.dispatch._time_us: calls per pass for a forward over 2 ms


def unique_configs(configs: list) -> list:
    """Configs in order, each tile/stages/warps/group text once (the shipped lists can repeat one)."""
    seen, out = set(), []
    for c in configs:
        if config_text(c) not in seen:
            seen.add(config_text(c))
            out.append(c)
    return out


def bench_calls(est_us: float) -> int:
    from kernels.lab.shapes import n_iter_for

    return n_iter_for(est_us)


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def timed_in_turns(cands: dict, n_iter: int, sampler: Sampler, passes: int = PASSES) -> dict:
    """{name: {'us', 'passes', 'spread_us', 'sm_mhz', 'power_w'}} for {name: (forces, fn)} (forces: the (tuner,
    config) pairs fn runs under): every candidate timed once per pass, the passes in alternating order
    (pass_orders); the sampler is told when each ran (phase 't'). A candidate that fails gets 'error'."""
    out = {name: {"passes": []} for name in cands}
    for order in pass_orders(cands, passes):
        for name in order:
            forces, fn = cands[name]
            if "error" in out[name]:
                continue
            try:
                t0 = time.monotonic()
                us = forced(forces, lambda fn=fn: median_us(fn, n_iter=n_iter, warmup=3, flush_l2=True))
                sampler.mark(name, "t", t0, time.monotonic())
                out[name]["passes"].append(us["median_us"])
            except Exception as exc:  # out of resources (shared memory, registers): not a candidate
                out[name]["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"
    conds = sampler.per_variant("t")
    for name, r in out.items():
        if r["passes"]:
            r["us"] = sum(r["passes"]) / len(r["passes"])
            r["spread_us"] = max(r["passes"]) - min(r["passes"])
        c = conds.get(name, {})
        r["sm_mhz"] = (c.get("sm_clock_mhz") or {}).get("median")
        r["power_w"] = (c.get("power_w") or {}).get("median")
    return out


def table(title: str, rows: dict, flop: float, floor_us: float | None = None, errs: dict | None = None) -> list[str]:
    """Markdown rows: µs, spread, TFLOP/s, (× floor), SM MHz, W, rel err; fastest first."""
    head = "| candidate | µs | spread | TFLOP/s |" + (" × floor |" if floor_us else "") + " SM MHz | W | rel err |"
    lines = [f"\n#### {title}\n", head, "|---|---:|---:|---:|" + ("---:|" if floor_us else "") + "---:|---:|---:|"]
    ok = sorted((n for n in rows if "us" in rows[n]), key=lambda n: rows[n]["us"])
    for n in ok:
        r = rows[n]
        fl = f" {r['us'] / floor_us:.3f} |" if floor_us else ""
        err = (errs or {}).get(n)
        lines.append(
            f"| {n} | {r['us']:.1f} | {r['spread_us']:.1f} | {flop / r['us'] / 1e6:.0f} |{fl}"
            f" {_opt(r['sm_mhz'])} | {_opt(r['power_w'])} | {'–' if err is None else f'{err:.1e}'} |"
        )
    for n in rows:
        if "us" not in rows[n]:
            lines.append(f"| {n} | did not run: {rows[n].get('error', '?')} |")
    return lines


def _opt(v) -> str:
    return "–" if v is None else f"{v:.0f}"


def ceiling(dt: torch.dtype, sampler: Sampler) -> tuple[float, dict]:
    """The bench's matmul ceiling (kernels.lab.shapes.matmul_ceiling_tflops: fastest of three passes of an 8192^3
    torch.matmul, 30 calls each), with the clock it ran at."""
    n = 8192
    a = torch.randn(n, n, device=DEVICE, dtype=dt)
    b = torch.randn(n, n, device=DEVICE, dtype=dt)
    passes = []
    t0 = time.monotonic()
    for i in range(3):
        passes.append(median_us(lambda: torch.matmul(a, b), n_iter=30, warmup=10 if i else 30)["median_us"])
    sampler.mark(f"ceiling {dt}", "t", t0, time.monotonic())
    c = sampler.per_variant("t").get(f"ceiling {dt}", {})
    return 2 * n**3 / (min(passes) * 1e-6) / 1e12, {
        "passes_us": passes,
        "sm_mhz": (c.get("sm_clock_mhz") or {}).get("median"),
        "power_w": (c.get("power_w") or {}).get("median"),
    }


def sweep_case(name, M, d, h, dt, act: str, tflops: float, sampler: Sampler, log) -> list[str]:
    g = torch.Generator(device=DEVICE).manual_seed(5)
    x = torch.randn(M, d, device=DEVICE, dtype=dt, generator=g)
    wg = torch.randn(h, d, device=DEVICE, dtype=dt, generator=g) * d**-0.5
    wu = torch.randn(h, d, device=DEVICE, dtype=dt, generator=g) * d**-0.5
    wd = torch.randn(d, h, device=DEVICE, dtype=dt, generator=g) * h**-0.5
    hin = torch.randn(M, h, device=DEVICE, dtype=dt, generator=g)
    down_flop = 2 * M * h * d
    gu_flop = 2 * down_flop
    floor_us = 3 * down_flop / (tflops * 1e12) * 1e6
    dname = str(dt).removeprefix("torch.")
    lines = [f"\n### {name} {dname}: {M} tokens × {d} → {h} SwiGLU (floor {floor_us:.1f} µs at {tflops:.0f} TFLOP/s)"]

    # down projection
    ref = hin.float() @ wd.float().T
    single = hopper_gemm._single_tuned
    ident = act_id("identity")
    down = {"cuBLAS F.linear": ((), partial(F.linear, hin, wd))}
    errs = {"cuBLAS F.linear": _rel(F.linear(hin, wd), ref)}
    for cfg in unique_configs(DOWN_CONFIGS):
        fn = partial(hopper_gemm.persistent_gemm, hin, wd, None, ident)
        key = f"ours {config_text(cfg)}"
        try:
            errs[key] = _rel(forced(((single, cfg),), fn), ref)
        except Exception as exc:  # recorded again (as the row's error) by timed_in_turns
            log(f"{name} down {key}: {type(exc).__name__}")
        down[key] = (((single, cfg),), fn)
    del ref
    rows = timed_in_turns(down, 20 if down_flop > 2e11 else 100, sampler)
    lines += table(f"down_proj [{M}, {h}] @ [{h}, {d}]", rows, down_flop, errs=errs)
    log("\n".join(lines[-len(rows) - 1 :]))
    best_down = min((n for n in rows if "us" in rows[n] and n != "cuBLAS F.linear"), key=lambda n: rows[n]["us"])
    best_down_cfg = down[best_down][0][0][1]
    del hin

    # gate/up projection
    xf = x.float()
    ref = TORCH_ACTS[act](xf @ wg.float().T) * (xf @ wu.float().T)
    del xf
    gated = hopper_gemm._gated_tuned
    aid = epilogue_act_id(act, dt)
    wgu = torch.cat([wg, wu])
    gu = {f"cuBLAS one GEMM to [gate; up] (N = {2 * h}), no activation": ((), partial(F.linear, x, wgu))}
    errs = {}
    for cfg in unique_configs(GATED_CANDIDATES):
        fn = partial(hopper_gemm.persistent_gated, x, wg, wu, aid, ws=False)
        key = f"dual {config_text(cfg)}"
        try:
            errs[key] = _rel(forced(((gated, cfg),), fn), ref)
        except Exception as exc:
            log(f"{name} gate/up {key}: {type(exc).__name__}")
        gu[key] = (((gated, cfg),), fn)
    if ws_gemm.applies(x):  # the warp-specialised Gluon kernel (one config), where persistent_gated may choose it
        key = "warp-specialised dual (kernels.ops.ws_gemm)"
        fn = partial(ws_gemm.ws_gated, x, hopper_gemm.cached_interleaved(wg, wu), aid, torch.empty_like(ref, dtype=dt))
        try:
            errs[key] = _rel(fn(), ref)
        except Exception as exc:  # a Triton whose Gluon API differs: recorded again as the row's error
            log(f"{name} gate/up {key}: {type(exc).__name__}")
        gu[key] = ((), fn)
    del ref
    rows = timed_in_turns(gu, 20 if gu_flop > 4e11 else 100, sampler)
    del wgu
    lines += table(f"gate/up act(x Wg^T) * (x Wu^T), [{M}, {d}] -> [{M}, {h}]", rows, gu_flop, errs=errs)
    log("\n".join(lines[-len(rows) - 1 :]))
    best_gu = min((n for n in rows if "us" in rows[n] and n.startswith("dual ")), key=lambda n: rows[n]["us"])
    best_gu_cfg = gu[best_gu][0][0][1]

    # whole forwards: the shipped tuning (the autotuner's own pick) and the best configs found above
    def fwd(gcfg, dcfg):
        """(forces, forward): the Triton dual GEMM with gcfg (None: as shipped, the first-call choice between the
        autotuned Triton kernel and the Gluon one), then our down GEMM with dcfg or (None) cuBLAS's."""

        def run():
            hh = hopper_gemm.persistent_gated(x, wg, wu, aid, ws=gcfg is None)
            if dcfg is None:
                return torch.matmul(hh, wd.t())
            return hopper_gemm.persistent_gemm(hh, wd, None, ident)

        forces = ((gated, gcfg),) if gcfg is not None else ()
        return forces + (((single, dcfg),) if dcfg is not None else ()), run

    gated.cache.clear()
    hopper_gemm.persistent_gated(x, wg, wu, aid, ws=False)  # the autotuner's own pick at this shape (Tuned._choose)
    pick = gated.cache[(x.get_device(), dt, aid, hopper_gemm.GATE_UP_ROWS, m_bucket(M), h, d)]
    shipped = f"dual {config_text(pick)} (autotuner's pick) + cuBLAS down"
    ours_down = f"ours {config_text(best_down_cfg)}"
    fwds = {
        "as shipped (first-call choice: Triton or Gluon dual GEMM) + cuBLAS down": fwd(None, None),
        shipped: fwd(pick, None),
        f"dual {config_text(pick)} (autotuner's pick) + {ours_down}": fwd(pick, best_down_cfg),
    }
    if config_text(best_gu_cfg) != config_text(pick):
        fwds[f"{best_gu} + cuBLAS down"] = fwd(best_gu_cfg, None)
        fwds[f"{best_gu} + {ours_down}"] = fwd(best_gu_cfg, best_down_cfg)
    est = forced(fwds[shipped][0], lambda: median_us(fwds[shipped][1], n_iter=3, warmup=1))["median_us"]
    for label, n in ((f"bench's call count ({bench_calls(est)})", bench_calls(est)), ("probe's", PROBE_CALLS)):
        rows = timed_in_turns(fwds, n, sampler)
        lines += table(f"forward, {label} calls per pass", rows, 3 * down_flop, floor_us=floor_us)
        log("\n".join(lines[-len(rows) - 1 :]))
    return lines


def run(log) -> list[str]:
    sampler = Sampler().start()
    lines = ["", "## Compute floor sweep (kernels/lab/sweep_floor.py)", ""]
    lines.append(f"Clock/power sampler: {sampler.describe()}; limits: {gpu_limits()}")
    ceilings: dict = {}
    try:
        for name, M, d, h, dt in FLOOR_CASES:
            if dt not in ceilings:
                tf, info = ceiling(dt, sampler)
                ceilings[dt] = tf
                lines.append(
                    f"\nCeiling {dt}: {tf:.0f} TFLOP/s (8192³ matmul passes "
                    f"{', '.join(f'{u:.0f}' for u in info['passes_us'])} µs; SM {_opt(info['sm_mhz'])} MHz,"
                    f" {_opt(info['power_w'])} W)"
                )
                log(lines[-1])
            try:
                lines += sweep_case(name, M, d, h, dt, "silu", ceilings[dt], sampler, log)
            except Exception as exc:  # one case failing (out of memory, a bug) must not lose the others
                lines.append(f"\n### {name} {dt}: failed: {type(exc).__name__}: {str(exc)[:300]}")
                log(traceback.format_exc())
            torch.cuda.empty_cache()
    finally:
        sampler.stop()
    return lines


# `python -m kernels.lab.sweep_floor --ncu CASE` (run under `ncu --profile-from-start off`): one dual GEMM launch of
# the case with its tuned config (tuning and warm-up outside the profiled range), then one with the split-K tail config
# if the case has a partial last wave: what Nsight Compute's SpeedOfLight / memory / warp-state sections say limits it.
NCU_CASES = {
    "tinyllama-fp16": (2048, 2048, 5632, torch.float16),
    "tinyllama-bf16": (2048, 2048, 5632, torch.bfloat16),
    "llama2-bf16": (4096, 4096, 11008, torch.bfloat16),
}


def ncu_case(name: str) -> None:
    M, d, h, dt = NCU_CASES[name]
    g = torch.Generator(device=DEVICE).manual_seed(6)
    x = torch.randn(M, d, device=DEVICE, dtype=dt, generator=g)
    wg = torch.randn(h, d, device=DEVICE, dtype=dt, generator=g) * d**-0.5
    wu = torch.randn(h, d, device=DEVICE, dtype=dt, generator=g) * d**-0.5
    aid = epilogue_act_id("silu", dt)
    gated = hopper_gemm._gated_tuned
    runs = {"tuned": ()}
    tail_cfg = hopper_gemm.gated_config(128, 128, 64, 4, 8, group_m=16, tail=True)
    runs["128x128 s4 GROUP_M=16 TAIL"] = ((gated, tail_cfg),)
    runs["128x128 s4 GROUP_M=16"] = ((gated, hopper_gemm.gated_config(128, 128, 64, 4, 8, group_m=16)),)
    for label, forces in runs.items():

        def call():
            return hopper_gemm.persistent_gated(x, wg, wu, aid)

        def profiled(call=call, label=label):
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            if label == "tuned":
                print(f"{name} tuned config: {[config_text(c) for c in gated.cache.values()]}", flush=True)
            torch.cuda.profiler.start()
            call()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()

        print(f"== {name} {label}", flush=True)
        forced(forces, profiled)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m kernels.lab.sweep_floor")
    ap.add_argument("--ncu", choices=sorted(NCU_CASES), required=True)
    ncu_case(ap.parse_args().ncu)
