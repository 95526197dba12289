"""The training step's two fused kernels, each timed alone beside its candidates and the plain cuBLAS GEMM it
contains, at the training bench's shapes (kernels.lab.train_bench.TRAIN_ROWS):

    python -m kernels.lab.train_kernels [--out FILE.json] [--dtypes bf16,fp16]
    python -m kernels.lab.train_kernels --dh-configs [--out FILE.json]   # every Gluon dH config, bf16 (+ TinyLlama fp16)
    ncu --profile-from-start off ... python -m kernels.lab.train_kernels --ncu-row hf-geglu-bf16   # see --ncu-row

- dH: dY W_down with the activation backward in the epilogue: the Triton kernel (mlp_backward.fused_dh_grad, tuned),
  the warp-specialised Gluon kernel (ws_dh.ws_dh_grad: 64-row tiles, and "ws128" its first 128-row config,
  ws_dh.WIDE_CONFIGS), and cuBLAS's dY @ W_down alone (no epilogue: what the fused kernel would cost if its
  epilogue were free);
- save: the training forward's dual GEMM that also keeps g and u: Triton (mlp_backward._launch_save) and Gluon
  (ws_gemm.ws_gated_save), and cuBLAS's x @ [Wg; Wu]^T alone.
--dh-configs times each config the first-call measurement may try at the row's K (mlp_backward.dh_configs) beside the
Triton kernel and cuBLAS, and gives each config's relative difference from the Triton kernel's output (0.0: the same
bits). CUDA events, L2 flushed before every call, two passes in opposite orders (triton_util.timed_both_ways: the timing
the first-call measurement itself uses). Needs an sm_90 GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from kernels.lab.train_bench import TRAIN_ROWS
from kernels.ops import hopper_gemm, mlp_backward, ws_dh, ws_gemm
from kernels.ops.activations import epilogue_act_id
from kernels.ops.triton_util import timed_both_ways

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
ACTS = {"geglu": "gelu_tanh", "swiglu": "silu", "plain": "gelu"}  # a training row's workload -> its activation


def _time(calls: dict) -> dict:
    return {k: round(v, 1) for k, v in timed_both_ways(calls, n_iter=60).items()}


def _dh_operands(m: int, d: int, h: int, activation: str, dt) -> tuple:
    """(dY, W_down, saved, grad id, gated): random dH operands, saved = [g | u] (gated) or pre."""
    gated = activation in mlp_backward.GATED_GRADS
    dy = torch.randn(m, d, device="cuda", dtype=dt)
    w_down = torch.randn(d, h, device="cuda", dtype=dt) * d**-0.5
    saved = torch.randn(m, 2 * h if gated else h, device="cuda", dtype=dt)
    return dy, w_down, saved, mlp_backward.GRAD_IDS[activation], gated


def _dh_candidates(dy, w_down, saved, activation: str, configs) -> dict:
    """{name: call} over `saved` in place: cuBLAS's bare GEMM, the tuned Triton dH kernel and each Gluon config."""
    gid, gated = mlp_backward.GRAD_IDS[activation], activation in mlp_backward.GATED_GRADS
    halves = mlp_backward._halves(saved, w_down, activation)
    calls = {
        "cublas_mm": lambda: dy @ w_down,
        "triton": lambda: mlp_backward.fused_dh_grad(dy, w_down, saved, activation, scratch=True),
    }
    for cfg in configs:
        calls[str(cfg)] = lambda cfg=cfg: ws_dh.ws_dh_grad(dy, w_down, *halves, gid, gated, *cfg)
    return calls


def _dh_calls(m: int, d: int, h: int, activation: str, dt) -> dict:
    dy, w_down, saved, _gid, _gated = _dh_operands(m, d, h, activation, dt)
    mlp_backward.fused_dh_grad(dy, w_down, saved.clone(), activation, scratch=True)  # tuned before timing
    ws, ws128 = (ws_dh.BM, ws_dh.STAGES, ws_dh.GROUP_M), ws_dh.WIDE_CONFIGS[0]  # the defaults; the first 128-row
    calls = _dh_candidates(dy, w_down, saved, activation, [ws, ws128])
    return {
        "cublas_mm": calls["cublas_mm"],
        "triton": calls["triton"],
        "ws": calls[str(ws)],
        "ws128": calls[str(ws128)],
    }


def _save_calls(m: int, d: int, h: int, activation: str, dt) -> dict:
    x = torch.randn(m, d, device="cuda", dtype=dt)
    wg, wu = (torch.randn(h, d, device="cuda", dtype=dt) * d**-0.5 for _ in range(2))
    wgu = hopper_gemm.interleave_gate_up(wg, wu, hopper_gemm.GATE_UP_ROWS)
    w_cat = torch.cat([wg, wu])
    out, gu = torch.empty(m, h, device="cuda", dtype=dt), torch.empty(m, 2 * h, device="cuda", dtype=dt)
    act = epilogue_act_id(activation, dt)
    consts = mlp_backward.save_consts(x, act, hopper_gemm.GATE_UP_ROWS)
    g, u = gu[:, :h], gu[:, h:]
    return {
        "cublas_mm": lambda: x @ w_cat.T,
        "triton": lambda: mlp_backward._launch_save(x, wgu, out, g, u, consts),
        "ws": lambda: ws_gemm.ws_gated_save(x, wgu, act, out, g, u),
    }


def dh_configs_rows(n_iter: int = 40, only: set[str] | None = None) -> list[dict]:
    """Every Gluon dH config at each training row's dH shape (bf16 rows and TinyLlama's fp16 one; `only`: these row
    ids)."""
    rows = []
    for rid, label, workload, dname, m, d, h in TRAIN_ROWS:
        if (dname != "bf16" and rid != "tinyllama-fp16") or (only and rid not in only):
            continue
        act = ACTS[workload]
        dy, w_down, saved, gid, gated = _dh_operands(m, d, h, act, DTYPES[dname])
        ref = saved.clone()
        mlp_backward.fused_dh_grad(dy, w_down, ref, act)
        diff: dict = {}
        ran = []
        for cfg in mlp_backward.dh_configs(d):
            out = saved.clone()
            try:
                ws_dh.ws_dh_grad(dy, w_down, *mlp_backward._halves(out, w_down, act), gid, gated, *cfg)
            except Exception as exc:  # a config that cannot compile or launch here is reported, not timed
                diff[str(cfg)] = f"{type(exc).__name__}: {str(exc)[:160]}"
                continue
            diff[str(cfg)] = float((out.float() - ref.float()).norm() / ref.float().norm())
            ran.append(cfg)
        calls = _dh_candidates(dy, w_down, saved, act, ran)
        us = {k: round(v, 1) for k, v in timed_both_ways(calls, n_iter=n_iter).items()}
        rows.append({"row": label, "dtype": dname, "m": m, "d": d, "h": h, "us": us, "rel_vs_triton": diff})
        print(json.dumps(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    return rows


def ncu_row(rid: str) -> int:
    """For Nsight Compute: each dH candidate at one training row (cuBLAS's bare GEMM, the tuned Triton kernel, every
    Gluon config of mlp_backward.dh_configs) warmed up (compiled, tuned) outside the profiled range, then launched
    once each between cudaProfilerStart and Stop, so `ncu --profile-from-start off` sees exactly these kernels, in
    the order printed."""
    row = next((r for r in TRAIN_ROWS if r[0] == rid), None)
    if row is None:
        print(f"error: unknown row {rid!r}; expected one of {', '.join(r[0] for r in TRAIN_ROWS)}", file=sys.stderr)
        return 2
    _rid, _label, workload, dname, m, d, h = row
    act = ACTS[workload]
    dy, w_down, saved, _gid, _gated = _dh_operands(m, d, h, act, DTYPES[dname])
    calls = _dh_candidates(dy, w_down, saved, act, mlp_backward.dh_configs(d))
    for fn in calls.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name, fn in calls.items():
        fn()
        torch.cuda.synchronize()
        print(f"profiled: {name}", flush=True)
    torch.cuda.profiler.stop()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the figures as JSON here")
    p.add_argument("--dtypes", default="bf16,fp16")
    p.add_argument("--dh-configs", action="store_true", help="time every Gluon dH config at each row instead")
    p.add_argument("--rows", help="with --dh-configs: only these row ids (comma-separated)")
    p.add_argument("--ncu-row", metavar="ROW_ID", help="launch each dH candidate at this row once, for ncu")
    a = p.parse_args(argv)
    if a.ncu_row:
        return ncu_row(a.ncu_row)
    if a.dh_configs:
        rows = dh_configs_rows(only=set(a.rows.split(",")) if a.rows else None)
        if a.out:
            with open(a.out, "w") as f:
                json.dump({"gpu": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)
        return 0
    results = []
    print(f"# {torch.cuda.get_device_name(0)}: µs per call, L2 flushed, mean of two passes' medians of 60 calls")
    print("| row | dtype | kernel | cuBLAS GEMM alone | Triton | Gluon ws | ws ÷ Triton | ws ÷ cuBLAS | Gluon ws128 |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for _rid, label, workload, dname, m, d, h in TRAIN_ROWS:
        if dname not in a.dtypes.split(","):
            continue
        act = ACTS[workload]
        dt = DTYPES[dname]
        for kind, make in [("dH", _dh_calls)] + ([("save", _save_calls)] if act != "gelu" else []):
            try:
                us = _time(make(m, d, h, act, dt))
            except Exception as exc:  # one failing kernel must not lose the other rows
                print(f"| {label} | {dname} | {kind} | error: {type(exc).__name__}: {str(exc)[:120]} |")
                continue
            results.append({"row": label, "dtype": dname, "kernel": kind, "m": m, "d": d, "h": h, **us})
            print(
                f"| {label} | {dname} | {kind} | {us['cublas_mm']} | {us['triton']} | {us['ws']} | "
                f"{us['ws'] / us['triton']:.3f} | {us['ws'] / us['cublas_mm']:.3f} | {us.get('ws128', '–')} |"
            )
            torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "rows": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
