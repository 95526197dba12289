"""Time EVERY autotune config of the FuseLens TMA GEMMs at the MLP shapes, one config forced at a time.

    python -m kernels.lab.sweep [--out FILE.md] [--n-iter 100]

Why: the autotuner reports only its winner, and it could not say why 128 x 256 tiles were never
chosen for the plain MLP's GEMM + bias + GELU; a table of every config's time, next to the same config with the
activation switched off and next to cuBLAS at the same shape, separates "slow main loop" from "slow epilogue" from
"does not fit". Same timing as the bench (kernels.ops.timing: CUDA events, L2 flushed by a read, launches queued
ahead); each row also carries its relative error against float64, so a fast wrong config cannot hide. Needs a
CUDA GPU with sm_90+.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels.lab import sweep_kernels
from kernels.lab.sweep_kernels import LIBDEVICE_GELU, act_f32_with_libdevice
from kernels.ops import hopper_gemm
from kernels.ops.activations import TORCH_ACTS, act_id, epilogue_act_id, tanh_approx
from kernels.ops.launch import config_text, forced
from kernels.ops.timing import median_us

# (name, M, K, N, dtype, activation): the plain MLP's fc1 (GEMM + bias + GELU) and the HF GEGLU gate/up projection.
SINGLE_CASES = [("plain fc1", 8192, 768, 3072, torch.bfloat16, "gelu")]
GATED_CASES = [
    ("HF gate/up", 8192, 768, 3072, torch.bfloat16, "gelu_tanh"),
    ("SwiGLU gate/up", 8192, 768, 3072, torch.bfloat16, "silu"),
]


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def _single_inputs(M, K, N, dt, seed: int):
    """x [M, K], w [N, K] scaled by K^-0.5 (outputs of unit size), bias [N] x 0.1; seeded: a row's inputs are the same
    in every run."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
    w = torch.randn(N, K, device="cuda", dtype=dt, generator=g) * K**-0.5
    b = torch.randn(N, device="cuda", dtype=dt, generator=g) * 0.1
    return x, w, b


def _gated_inputs(M, K, N, dt, act: str, seed: int):
    """x [M, K], gate and up weights [N, K] scaled by K^-0.5 (seeded), and the float64 reference
    act(x Wg^T) * (x Wu^T)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
    wg = torch.randn(N, K, device="cuda", dtype=dt, generator=g) * K**-0.5
    wu = torch.randn(N, K, device="cuda", dtype=dt, generator=g) * K**-0.5
    xd = x.double()
    return x, wg, wu, TORCH_ACTS[act](xd @ wg.double().T) * (xd @ wu.double().T)


def _time(fn, n_iter: int) -> float:
    return median_us(fn, n_iter=n_iter, warmup=5, flush_l2=True)["median_us"]


def _config_rows(tuners, configs, runs: dict, ref, tflop: float, n_iter: int) -> list[str]:
    """One row per config: the time of each callable in runs (the first is the real one: TFLOP/s, rel err)."""
    rows = []
    for cfg in configs:
        try:
            first, *others = runs.values()
            err = _rel(forced(tuple((t, cfg) for t in tuners), first), ref)
            times = [forced(tuple((t, cfg) for t in tuners), partial(_time, fn, n_iter)) for fn in runs.values()]
            rest = " | ".join(f"{t:.1f}" for t in times[1:])
            rows.append(f"| {config_text(cfg)} | {times[0]:.1f} | {tflop / times[0] * 1e6:.0f} | {rest} | {err:.1e} |")
        except Exception as exc:  # out of resources: the autotuner would skip it too
            rows.append(f"| {config_text(cfg)} | did not run: {type(exc).__name__} {str(exc)[:60]} |")
        print(rows[-1], flush=True)
    return rows


def sweep_single(name, M, K, N, dt, act, n_iter: int) -> list[str]:
    x, w, b = _single_inputs(M, K, N, dt, seed=1)
    ref = F.gelu(x.double() @ w.double().T + b.double())
    tflop = 2 * M * N * K / 1e12
    lines = [f"\n### {name}: act(x W^T + b), M={M} K={K} N={N} {str(dt)[6:]} {act}\n"]
    lines.append("| config | µs | TFLOP/s | µs, no activation | µs, libdevice erf (the first epilogue) | rel err |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    t = _time(partial(F.linear, x, w, b), n_iter)
    lines.append(f"| cuBLAS F.linear (GEMM + bias) | {t:.1f} | {tflop / t * 1e6:.0f} | | | |")
    t = _time(lambda: F.gelu(F.linear(x, w, b)), n_iter)
    lines.append(f"| cuBLAS F.linear + F.gelu (eager) | {t:.1f} | {tflop / t * 1e6:.0f} | | | |")
    runs = {a: partial(hopper_gemm.persistent_gemm, x, w, b, act_id(a)) for a in (act, "identity")}
    runs["libdevice"] = partial(sweep_kernels.libdevice_gemm_bias_act, x, w, b)
    tuners = [hopper_gemm._single_tuned, sweep_kernels.libdevice_single_tuned]
    return lines + _config_rows(tuners, hopper_gemm.SINGLE_CONFIGS, runs, ref, tflop, n_iter)


def sweep_gated(name, M, K, N, dt, act, n_iter: int) -> list[str]:
    """Each config with the shipped epilogue (8-row gate/up blocks, tanh.approx) next to the earlier pieces: the
    exp2 + rcp activation, the 1-row interleave (element-wise shared-memory stores), and no activation at all."""
    x, wg, wu, ref = _gated_inputs(M, K, N, dt, act, seed=2)
    tflop = 2 * 2 * M * N * K / 1e12
    lines = [f"\n### {name}: act(x Wg^T) * (x Wu^T), M={M} K={K} N={N} {str(dt)[6:]} {act}\n"]
    lines.append(
        "| config | µs (shipped: 8-row blocks, tanh.approx) | TFLOP/s | µs, 8-row, exp2 + rcp | µs, 1-row, exp2 + rcp"
        " (earlier) | µs, 8-row, no activation | µs, 1-row, no activation | rel err |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    t = _time(partial(F.linear, x, torch.cat([wg, wu])), n_iter)
    lines.append(f"| cuBLAS one GEMM to [gate; up] (N = {2 * N}) | {t:.1f} | {tflop / t * 1e6:.0f} | | | | | |")
    gated = partial(hopper_gemm.persistent_gated, x, wg, wu, ws=False)
    runs = {
        "shipped": partial(gated, epilogue_act_id(act, dt), rows=hopper_gemm.GATE_UP_ROWS),
        "8 exact": partial(gated, act_id(act), rows=8),
        "1 exact": partial(gated, act_id(act), rows=1),
        "8 none": partial(gated, act_id("identity"), rows=8),
        "1 none": partial(gated, act_id("identity"), rows=1),
    }
    return lines + _config_rows([hopper_gemm._gated_tuned], hopper_gemm.GATED_CONFIGS, runs, ref, tflop, n_iter)


# Configs tried at the LLM shapes (big N and K: 4096 x 11008 .. 4096 x 14336) beside the shipped ones
# (hopper_gemm.GATED_CONFIGS and GATED_CONFIGS_LLM); other candidates tried are in hopper_gemm's notes.
EXPLORE_GATED = [
    hopper_gemm.gated_config(128, 128, 64, 4, 8, group_m=4),
    hopper_gemm.gated_config(128, 128, 64, 3, 8, group_m=32),
    hopper_gemm.gated_config(256, 64, 64, 4, 8),
]
EXPLORE_SINGLE = [
    hopper_gemm.single_config(128, 256, 64, 4, 8, group_m=16, subtile=True),
    hopper_gemm.single_config(256, 128, 64, 3, 8, group_m=16, subtile=True),
]
# (name, M, K, N, dtype, activation)
GATED_LLM_CASES = [
    ("Llama-2-7B gate/up", 4096, 4096, 11008, torch.bfloat16, "silu"),
    ("Llama-3-8B gate/up", 8192, 4096, 14336, torch.bfloat16, "silu"),
    ("TinyLlama gate/up", 2048, 2048, 5632, torch.float16, "silu"),
]
SINGLE_LLM_CASES = [("BERT-large fc1", 4096, 1024, 4096, torch.bfloat16, "gelu")]


def sweep_gated_llm(name, M, K, N, dt, act, n_iter: int) -> list[str]:
    """Shipped and exploratory configs at an LLM shape: the shipped epilogue and no activation (the main loop's
    own time), beside cuBLAS computing gate and up as one GEMM."""
    x, wg, wu, ref = _gated_inputs(M, K, N, dt, act, seed=3)
    tflop = 2 * 2 * M * N * K / 1e12
    lines = [f"\n### {name}: act(x Wg^T) * (x Wu^T), M={M} K={K} N={N} {str(dt)[6:]} {act}\n"]
    lines.append("| config | µs (shipped epilogue) | TFLOP/s | µs, no activation | rel err |")
    lines.append("|---|---:|---:|---:|---:|")
    wgu = torch.cat([wg, wu])
    t = _time(partial(F.linear, x, wgu), n_iter)
    lines.append(f"| cuBLAS one GEMM to [gate; up] (N = {2 * N}) | {t:.1f} | {tflop / t * 1e6:.0f} | | |")
    del wgu
    gated = partial(hopper_gemm.persistent_gated, x, wg, wu, ws=False)
    runs = {"shipped": partial(gated, epilogue_act_id(act, dt)), "none": partial(gated, act_id("identity"))}
    configs = hopper_gemm.GATED_CONFIGS + hopper_gemm.GATED_CONFIGS_LLM + EXPLORE_GATED
    return lines + _config_rows([hopper_gemm._gated_tuned], configs, runs, ref, tflop, n_iter)


def sweep_single_llm(name, M, K, N, dt, act, n_iter: int) -> list[str]:
    x, w, b = _single_inputs(M, K, N, dt, seed=4)
    ref = TORCH_ACTS[act](x.double() @ w.double().T + b.double())
    tflop = 2 * M * N * K / 1e12
    lines = [f"\n### {name}: act(x W^T + b), M={M} K={K} N={N} {str(dt)[6:]} {act}\n"]
    lines.append("| config | µs | TFLOP/s | µs, no activation | rel err |")
    lines.append("|---|---:|---:|---:|---:|")
    t = _time(partial(F.linear, x, w, b), n_iter)
    lines.append(f"| cuBLAS F.linear (GEMM + bias) | {t:.1f} | {tflop / t * 1e6:.0f} | | |")
    runs = {a: partial(hopper_gemm.persistent_gemm, x, w, b, act_id(a)) for a in (act, "identity")}
    configs = hopper_gemm.SINGLE_CONFIGS + EXPLORE_SINGLE
    return lines + _config_rows([hopper_gemm._single_tuned], configs, runs, ref, tflop, n_iter)


@triton.jit
def _act_probe_kernel(x_ptr, out_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if ACT == 7:  # noqa: SIM108 (a constexpr branch, so only one of the two is compiled)
        y = tanh_approx(x)
    else:
        y = act_f32_with_libdevice(x, ACT)
    tl.store(out_ptr + offs, y, mask=offs < n)


# activation name (the approximate forms compute the exact one's function) -> float64 reference
_ACT_REFS = (
    {"tanh": torch.tanh}
    | {
        name: TORCH_ACTS[name.removesuffix("_approx")]
        for name in ("gelu_tanh", "gelu_tanh_approx", "silu", "silu_approx", "gelu")
    }
    | {"gelu_libdevice": TORCH_ACTS["gelu"]}
)


def activation_accuracy() -> list[str]:
    """Every epilogue activation on this GPU against float64, over 2^22 evenly spaced fp32 inputs in [-12, 12]:
    the largest absolute error, the largest error relative to max(|ref|, 1) (the scale a bf16 output rounds at),
    and, rounded to bf16 and fp16 like a kernel's output, the share of outputs that differ from float64 rounded
    the same way and by how many steps at most (both over outputs of magnitude >= 2^-10: below that, fp32 and its
    flush-to-zero set the error, which the absolute column shows)."""
    x = torch.linspace(-12, 12, 1 << 22, device="cuda", dtype=torch.float32)
    lines = ["\n### Epilogue activations on this GPU vs float64 (2^22 fp32 inputs in [-12, 12])\n"]
    lines.append(
        "| activation | ACT | max abs err | max err / max(abs(ref), 1) | bf16 outputs off (abs(ref) >= 2^-10)"
        " | max bf16 steps | fp16 outputs off | max fp16 steps |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, ref_fn in _ACT_REFS.items():
        aid = {"tanh": 7, "gelu_libdevice": LIBDEVICE_GELU}.get(name) or act_id(name)
        out = torch.empty_like(x)
        _act_probe_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), ACT=aid, BLOCK=1024)
        ref = ref_fn(x.double())
        err = (out.double() - ref).abs()
        row = f"| {name} | {aid} | {err.max().item():.2e} | {(err / ref.abs().clamp_min(1)).max().item():.2e}"
        for dt, mantissa_bits in ((torch.bfloat16, 7), (torch.float16, 10)):
            got, want = out.to(dt).double(), ref.to(dt).double()
            big = want.abs() >= 2**-10  # steps are counted where a step is a relative size (no zero crossings)
            step = torch.exp2(torch.floor(torch.log2(want.abs().clamp_min(2**-10))) - mantissa_bits)
            steps = ((got - want).abs() / step)[big]
            row += f" | {(got != want)[big].double().mean().item():.2%} | {steps.max().item():.0f}"
        lines.append(row + " |")
        print(lines[-1], flush=True)
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels.lab.sweep", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="also write the tables to this Markdown file")
    ap.add_argument("--n-iter", type=int, default=100)
    ap.add_argument(
        "--cases",
        choices=("hf", "llm", "floor", "all"),
        default="hf",
        help="hf: the HF-shape tables and the activation accuracy (default); llm: every shipped and exploratory"
        " config at the LLM shapes (30 timed calls each); floor: every down_proj and gate/up candidate and whole"
        " forwards at the LLM shapes, timed in turns with the SM clock (kernels/lab/sweep_floor.py)",
    )
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        print("error: kernels.lab.sweep needs a CUDA GPU with sm_90+ (the TMA kernels)", file=sys.stderr)
        return 3
    head = [f"# Per-config sweep: {torch.cuda.get_device_name()}, torch {torch.__version__}"]
    head[0] += f", triton {triton.__version__}"
    head.append(f"CUDA events, median of {args.n_iter}, L2 flushed by a read before each call, launches queued ahead.")
    lines = list(head)
    if args.cases in ("hf", "all"):
        lines += activation_accuracy()
        for case in SINGLE_CASES:
            lines += sweep_single(*case, n_iter=args.n_iter)
        for case in GATED_CASES:
            lines += sweep_gated(*case, n_iter=args.n_iter)
    if args.cases in ("llm", "all"):
        for case in GATED_LLM_CASES:
            lines += sweep_gated_llm(*case, n_iter=min(args.n_iter, 30))
            torch.cuda.empty_cache()
        for case in SINGLE_LLM_CASES:
            lines += sweep_single_llm(*case, n_iter=args.n_iter)
    if args.cases == "floor":
        from kernels.lab import sweep_floor

        lines += sweep_floor.run(lambda msg: print(msg, flush=True))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
