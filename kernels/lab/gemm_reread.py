"""GEMM operand re-reads on the GPU: DRAM bytes each GEMM kernel reads with the caches flushed, at shapes no sample
set holds (held-out checks for analyzer.dram's operand re-read rule, docs/COST_MODEL.md "DRAM model").

    python -m kernels.lab.gemm_reread --out DIR

For every (M, N, K) of SHAPES, bf16: cuBLAS through `F.linear(x, w)` and `F.linear(x, w, b)` (aten::linear ->
nvjet kernels, the MLP's [M,K]·[N,K] layout) and, where `FUSELENS` lists the shape, the FuseLens GEMM + bias + GELU
(`fuselens::gemm_bias_act`). Two passes over the same launches, each after a warm-up (cuBLAS heuristics, Triton
autotuning) outside the measured range:
* `DIR/gemms.json.gz`: a Kineto trace with shapes (what the analyzer reads: names, grids, shapes);
* `DIR/gemms.ncu.csv` + `DIR/gemms.ncu.json`: ncu's default `--cache-control all` (caches flushed before each
  kernel, so what a kernel reads beyond its operands counted once is its own re-reads), DRAM read/write bytes and
  L2 read sectors per kernel, in launch order (the same order as the trace's kernels). With the flush, the bytes
  written are the output less the dirty tail still in L2 at the kernel's end (the tail a GEMM leaves, per shape).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

# (M, N, K): up projections (K small, N wide), down projections (K large, N narrow), square-ish, LLM shapes
SHAPES = (
    (8192, 16384, 768),
    (8192, 12288, 1536),
    (8192, 4096, 4096),
    (4096, 14336, 4096),
    (4096, 4096, 14336),
    (16384, 768, 4096),
    (8192, 2048, 16384),
    (2048, 16384, 2048),
    (16384, 2048, 2048),
    (2048, 16384, 1024),
    (2048, 16384, 4096),
    (4096, 16384, 2048),
    (32768, 1024, 1024),
    (1024, 32768, 1024),
)
FUSELENS = {(8192, 16384, 768), (8192, 12288, 1536), (8192, 4096, 4096), (4096, 14336, 4096)}
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_op_read.sum")


def _calls():
    import torch
    import torch.nn.functional as F

    import kernels.models.custom_ops  # noqa: F401  (registers fuselens::*)

    torch.manual_seed(0)
    out = []
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        out.append((f"linear {m}x{n}x{k}", lambda x=x, w=w: F.linear(x, w)))
        out.append((f"linear+bias {m}x{n}x{k}", lambda x=x, w=w, b=b: F.linear(x, w, b)))
        if (m, n, k) in FUSELENS:
            out.append(
                (f"fuselens {m}x{n}x{k}", lambda x=x, w=w, b=b: torch.ops.fuselens.gemm_bias_act(x, w, b, "gelu"))
            )
    return out


def _run(mode: str, out: Path) -> None:
    import torch

    calls = _calls()
    for _ in range(3):  # warm-up: cuBLAS heuristics, Triton autotuning, lazy module loads
        for _, f in calls:
            f()
    torch.cuda.synchronize()
    if mode == "trace":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            for _, f in calls:
                f()
            torch.cuda.synchronize()
        prof.export_chrome_trace(str(out / "gemms.json"))
        subprocess.run(["gzip", "-f", str(out / "gemms.json")], check=False)
    else:  # under ncu: only the range between cudaProfilerStart/Stop is profiled
        torch.cuda.cudart().cudaProfilerStart()
        for _, f in calls:
            f()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    (out / "calls.json").write_text(json.dumps([c for c, _ in calls]))


def _parse(text: str) -> list[dict]:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    rows: dict[int, dict] = {}
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:] if start is not None else []))):
        if r.get("Metric Name") not in METRICS or not r.get("ID", "").strip().isdigit():
            continue
        k = rows.setdefault(
            int(r["ID"]), {"kernel": r["Kernel Name"], "grid": r.get("Grid Size"), "block": r.get("Block Size")}
        )
        v = float(r["Metric Value"].replace(",", ""))
        k[r["Metric Name"]] = v * (32 if r["Metric Name"].startswith("lts__t_sectors") else 1)
    return [rows[i] for i in sorted(rows)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--child", choices=("trace", "ncu"))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.child:
        _run(a.child, a.out)
        return
    from kernels.runner import ncu

    env = dict(os.environ)
    me = [sys.executable, "-m", "kernels.lab.gemm_reread", "--out", str(a.out)]
    subprocess.run([*me, "--child", "trace"], check=True, env=env)
    tool = ncu.find_ncu()
    if tool is None:
        print("no ncu")
        return
    log = a.out / "gemms.ncu.csv"
    cmd = [tool, "--metrics", ",".join(METRICS), "--csv", "--print-units", "base", "--profile-from-start", "off"]
    cmd += ["--log-file", str(log), *me, "--child", "ncu"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    kernels = _parse(log.read_text(errors="replace")) if log.exists() else []
    calls = json.loads((a.out / "calls.json").read_text())
    doc = {"method": "ncu --cache-control all (default): caches flushed before each kernel", "calls": calls}
    doc["kernels"] = kernels
    (a.out / "gemms.ncu.json").write_text(json.dumps(doc, indent=1))
    print(f"ncu rc={res.returncode}, {len(kernels)} kernels for {len(calls)} calls")
    for c, k in zip(calls, kernels, strict=False):
        rd = k.get(METRICS[0], 0) / 1e6
        print(
            f"{c:28s} {k['kernel'][:64]:64s} grid {k['grid']} read {rd:8.1f} MB L2 read {k.get(METRICS[2], 0) / 1e6:8.1f}"
        )
    if res.returncode:
        print(res.stderr[-2000:])


if __name__ == "__main__":
    main()
