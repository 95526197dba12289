"""Side-by-side speed of the MLP variants and the gating kernels on this GPU -> bench/results/kernels_<gpu>.{md,json}.

    python -m kernels.bench [--out-dir bench/results] [--no-max-autotune] [--n-iter 200] [--sections ...]
    python -m kernels.bench --shapes llm | llm-dtypes | llm-all | hf-plain | users | all   (the shape sweep: kernels/lab/shapes.py)
    python -m kernels.bench --render bench/results/kernels_<gpu>.json     (re-render the .md, no GPU)

All timings: CUDA events around each call, median of --n-iter calls (default 200) after warm-up, L2 flushed before
every call by READING a 256 MB buffer outside the timed region (the H100's L2 is 50 MB; kernels.ops.timing says why a
read, not do_bench's zeroing: the gating table also shows the zeroing flush's numbers). Same process, same
weights, same inputs for every variant. Ceilings measured here, not taken from datasheets:
  copy bandwidth   dst.copy_(src) on 1 GiB, counting bytes read + written
  matmul rate      bf16 8192 x 8192 x 8192 torch.matmul on random data (cuBLAS)
Floors: an MLP's compute floor is its FLOPs over the matmul rate; the gating kernel's memory floor is its bytes
(read gate + up, write h) over the copy bandwidth. Each variant's output is checked against a float64 reference of
the same module (relative Frobenius error) before it is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from kernels.models.variants import VariantUnavailable, build, liger_gating_fn
from kernels.models.workloads import DTYPES, build_model, make_input, mlp_flops
from kernels.ops.timing import graphed, median_us, pass_orders
from kernels.runner import envinfo
from kernels.runner.roofs import HF, measure_ceilings

DECODE_TOKENS = (1, 4, 16)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    y = y.double()
    if not torch.isfinite(y).all():
        return float("nan")
    return float((y - ref).norm() / ref.norm())


def bench_gating(n_iter: int, copy_gbps: float) -> list[dict]:
    from kernels.ops.gating import fused_gating

    rows = []
    M, N = HF["tokens"], HF["hidden"]
    for act in ("gelu_tanh", "silu"):
        for dname in ("bf16", "fp16", "fp32"):
            if dname != "bf16" and act == "silu":
                continue
            dt = DTYPES[dname]
            g = torch.randn(M, N, device="cuda", dtype=dt)
            u = torch.randn(M, N, device="cuda", dtype=dt)
            ref = (F.gelu(g.double(), approximate="tanh") if act == "gelu_tanh" else F.silu(g.double())) * u.double()

            def eager(g=g, u=u, act=act):
                return (F.gelu(g, approximate="tanh") if act == "gelu_tanh" else F.silu(g)) * u

            impls = {
                "eager (2 kernels)": eager,
                "inductor": torch.compile(eager),
                "fuselens": lambda g=g, u=u, a=act: fused_gating(g, u, a),
            }
            try:
                lf = liger_gating_fn(act)
                impls["liger"] = lambda g=g, u=u, lf=lf: lf(g, u)
            except VariantUnavailable as exc:
                log(f"gating: liger skipped: {exc}")
            floor_us = 3 * g.numel() * g.element_size() / (copy_gbps * 1e9) * 1e6
            passes = {name: [] for name in impls}
            for order in pass_orders(impls):  # two passes, the second reversed: their spread is the noise to beat
                for name in order:
                    fn = impls[name]
                    with torch.no_grad():
                        passes[name].append(median_us(fn, n_iter=n_iter, flush_l2=True, flush="read")["median_us"])
            for name, fn in impls.items():
                with torch.no_grad():
                    err = rel_err(fn(), ref)
                    t = {"median_us": sum(passes[name]) / 2}
                    t_dirty = median_us(fn, n_iter=n_iter, flush_l2=True, flush="write")
                gbps = 3 * g.numel() * g.element_size() / (t["median_us"] * 1e-6) / 1e9
                rows.append(
                    {
                        "activation": act,
                        "dtype": dname,
                        "shape": f"{M}x{N}",
                        "impl": name,
                        "us": t["median_us"],
                        "us_dirty_l2": t_dirty["median_us"],
                        "us_passes": passes[name],
                        "gbps": gbps,
                        "pct_copy": 100 * gbps / copy_gbps,
                        "floor_us": floor_us,
                        "rel_err": err,
                    }
                )
                log(f"gating {act} {dname} {name}: {t['median_us']:.1f} us {gbps:.0f} GB/s err {err:.1e}")
            del g, u, ref
    return rows


BENCH_ONLY_IMPLS = {"fuselens-pointer": "pointer", "fuselens-tma2": "tma2"}


GEMM_NAME_HINTS = ("nvjet", "gemm", "cutlass", "sm90_xmma", "matmul")


def gating_in_forward(n_steps: int = 20) -> list[dict]:
    """The gating kernel as it runs inside the HF GEGLU forward (after the GEMMs that wrote gate and up, no flush):
    median kernel duration from a torch.profiler trace of n_steps forwards, per variant. This is the measurement
    the issue's reference numbers come from (Inductor 61.0 us, Liger 51.9 us on an H100)."""
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    model = build_model("geglu", HF["d_model"], HF["hidden"], torch.bfloat16, "cuda")
    x = make_input(64, 128, HF["d_model"], torch.bfloat16, "cuda")
    rows = []
    for name in ("eager", "compile", "liger", "fuselens-gating"):
        try:
            fn = build(name, model)
        except VariantUnavailable as exc:
            rows.append({"variant": name, "skipped": str(exc)})
            continue
        with torch.no_grad():
            for _ in range(3):
                fn(x)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(n_steps):
                    fn(x)
                torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = f"{tmp}/t.json"
            prof.export_chrome_trace(path)
            events = json.loads(Path(path).read_text())["traceEvents"]
        durs: dict[str, list[float]] = {}
        for e in events:
            if e.get("cat") == "kernel" and not any(h in e["name"].lower() for h in GEMM_NAME_HINTS):
                durs.setdefault(e["name"], []).append(e["dur"])
        for kname, d in durs.items():
            d = sorted(d)
            rows.append({"variant": name, "kernel": kname[:90], "calls": len(d), "median_us": d[len(d) // 2]})
        log(f"gating in forward {name}: {[(r['kernel'][:40], r['median_us']) for r in rows if r['variant'] == name]}")
    return rows


def _forced_fuselens(model, impl: str):
    """FuseLens forward forced onto earlier kernel versions, to time them side by side with the current one:
    "pointer" = the first kernels (non-persistent, pointer loads), "tma2" = the first persistent TMA kernel (two
    128-wide dots)."""
    from kernels.lab.sweep_kernels import dual_gemm_2dot
    from kernels.models.workloads import GatedMLP
    from kernels.ops.activations import epilogue_act_id
    from kernels.ops.dual_gemm import dual_gemm_gated
    from kernels.ops.gemm_act import gemm_bias_act

    def fwd(x):
        x2d = x.reshape(-1, x.shape[-1])
        if isinstance(model, GatedMLP):
            wg, wu = model.gate_proj.weight, model.up_proj.weight
            if impl == "tma2":
                h = dual_gemm_2dot(x2d, wg, wu, epilogue_act_id(model.activation, x.dtype))
            else:
                h = dual_gemm_gated(x2d, wg, wu, model.activation, impl=impl)
            y = torch.matmul(h, model.down_proj.weight.t())
        else:
            h = gemm_bias_act(x2d, model.fc1.weight, model.fc1.bias, "gelu", impl="tma" if impl == "tma2" else impl)
            y = F.linear(h, model.fc2.weight, model.fc2.bias)
        return y.view(*x.shape[:-1], y.shape[-1])

    return fwd


def autotune_choices() -> dict:
    """The configs the autotuners picked in this run, per kernel and key (M, N, K, dtypes)."""
    from kernels.lab import sweep_kernels
    from kernels.ops import dual_gemm, gating, gemm_act, hopper_gemm

    tuners = {
        "gating": gating._gating_kernel_tuned,
        "gemm_act_pointer": gemm_act._gemm_act_tuned,
        "dual_gemm_pointer": dual_gemm._dual_gemm_tuned,
        "tma_dual": sweep_kernels.dual_tuned,
        "tma_single": hopper_gemm._single_tuned,
        "tma_gated": hopper_gemm._gated_tuned,
    }
    from kernels.ops.launch import config_text

    out = {}
    for name, t in tuners.items():
        text = config_text if hasattr(t, "timings") else str  # sweep_kernels' tuner is a triton.autotune
        out[name] = {str(k): text(v) for k, v in t.cache.items()}
        for k, times in getattr(t, "timings", {}).items():
            out[name][f"{k} timings_us"] = {c: round(us, 2) for c, us in times.items()}
    # the gated GEMM's first-call choice between the tuned Triton kernel and the Gluon one (kernels.ops.ws_gemm)
    out["gated_triton_or_gluon"] = {
        str(k): {"gluon": hopper_gemm.WS_CHOICE.get(k), **{n: round(us, 2) for n, us in times.items()}}
        for k, times in hopper_gemm.WS_TIMINGS.items()
    }
    return out


def bench_mlp(workload, dname, tokens, variants, n_iter, tflops, graphs=False) -> list[dict]:
    dt = DTYPES[dname]
    d, hdim = HF["d_model"], HF["hidden"]
    model = build_model(workload, d, hdim, dt, "cuda")
    x = make_input(1, tokens, d, dt, "cuda")
    with torch.no_grad():
        ref = build_model(workload, d, hdim, torch.float64, "cuda")(x.double())
    floor_us = mlp_flops(workload, tokens, d, hdim) / (tflops * 1e12) * 1e6
    rows = []
    for name in variants:
        row = {"workload": workload, "dtype": dname, "tokens": tokens, "variant": name, "floor_us": floor_us}
        try:
            t0 = time.perf_counter()
            fn = _forced_fuselens(model, BENCH_ONLY_IMPLS[name]) if name in BENCH_ONLY_IMPLS else build(name, model)
            with torch.no_grad():
                for _ in range(3):
                    y = fn(x)
                torch.cuda.synchronize()
                row["warmup_s"] = time.perf_counter() - t0
                row["rel_err"] = rel_err(y, ref)
                row["us"] = median_us(lambda fn=fn: fn(x), n_iter=n_iter, flush_l2=True)["median_us"]
            if graphs:
                # what a host that launches one forward at a time sees: no queue-ahead, launch overhead included
                with torch.no_grad():
                    row["launch_bound_us"] = median_us(
                        lambda fn=fn: fn(x), n_iter=n_iter, flush_l2=True, queue_ahead=False
                    )["median_us"]
                try:
                    rep = graphed(fn, x)
                    row["graph_us"] = median_us(rep, n_iter=n_iter, flush_l2=True)["median_us"]
                except Exception as exc:
                    row["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            log(
                f"mlp {workload} {dname} M={tokens} {name}: {row.get('us', 0):.1f} us graph {row.get('graph_us')} err {row['rel_err']:.1e}"
            )
        except VariantUnavailable as exc:
            row["skipped"] = str(exc)
            log(f"mlp {name} skipped: {exc}")
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            log(f"mlp {name} FAILED: {row['error']}")
        rows.append(row)
    return rows


DEFAULT_SECTIONS = ("gating", "mlp", "decode")


def merge_results(old: dict, new: dict) -> dict:
    """new's sections over old's: what this run did not measure stays (a shape row by its id, the rest by section).
    `runs` lists the runs whose figures are still in the file, each with its command and commit: every shape row
    names the run that measured it (`run_utc`), so a run whose rows were all re-measured drops out of the list."""
    merged = {**old, **{k: v for k, v in new.items() if k not in ("shapes", "runs")}}
    for key in ("gating", "gating_in_forward", "mlp"):
        if key not in new and key in old:
            merged[key] = old[key]

    def stamped(res) -> list[dict]:
        """res's shape rows, each naming its run: a file of one run names it for rows that do not (None: unknown)."""
        one_run = res.get("created_utc") if len(res.get("runs") or []) <= 1 else None
        return [r if "run_utc" in r else {**r, "run_utc": one_run} for r in res.get("shapes", [])]

    if "shapes" in new:
        rows = {r["id"]: r for r in stamped(old)}
        rows.update({r["id"]: r for r in stamped(new)})
        merged["shapes"] = list(rows.values())
        merged["shape_ceilings_tflops"] = {**old.get("shape_ceilings_tflops", {}), **new["shape_ceilings_tflops"]}
    elif "shapes" in old:
        merged["shapes"] = stamped(old)

    def run_of(res):
        return {k: res.get(k) for k in ("created_utc", "command", "sections")} | {
            "commit": res.get("env", {}).get("git_commit")
        }

    row_runs = {r.get("run_utc") for r in merged.get("shapes", [])}
    remeasured = set(new.get("sections") or DEFAULT_SECTIONS) - {"shapes"}

    def still_in_file(run) -> bool:
        secs = set(run.get("sections") or DEFAULT_SECTIONS)  # runs before `sections` was recorded: the defaults
        if secs - {"shapes"} - remeasured:
            return True
        # a row measured before rows named their run (None) keeps every earlier shape run listed
        return "shapes" in secs and (None in row_runs or run.get("created_utc") in row_runs)

    kept = [r for r in (old.get("runs") or [run_of(old)]) if still_in_file(r)]
    merged["runs"] = kept + (new.get("runs") or [run_of(new)])
    return merged


def _fmt(v, spec=".1f"):
    return "–" if v is None else format(v, spec)


def to_markdown(res: dict) -> str:
    env, c = res["env"], res["ceilings"]
    gpu = env["gpu"]
    out = [f"# FuseLens kernels bench: {gpu['name']}", ""]
    out += [
        f"- GPU: {gpu['name']} (sm {gpu.get('capability')}, {gpu.get('sm_count')} SMs, L2 {(gpu.get('l2_bytes') or 0) / 2**20:.0f} MiB), driver {env['driver']}",
        f"- torch {env['torch']} (CUDA {env['cuda']}), triton {env['triton']}, liger-kernel {env['liger_kernel']}, commit {env['git_commit']}",
        f"- date (UTC) {res['created_utc']}; command `{res['command']}`",
        f"- timing: {res['method']}",
        "",
        "## Ceilings measured on this GPU",
        "",
        f"- device-to-device copy (1 GiB, read + write): **{c['copy_gbps']:.0f} GB/s**",
        f"- bf16 matmul 8192³ (cuBLAS): **{c['matmul_tflops']:.0f} TFLOP/s** ({c['matmul_us_8192']:.0f} µs, the fastest"
        f" of three passes: {', '.join(f'{u:.0f}' for u in c.get('matmul_us_8192_passes', [c['matmul_us_8192']]))} µs)",
    ]
    for k, v in c["cublas_mlp_shapes"].items():
        out.append(f"- cuBLAS {k}: {v['us']:.1f} µs ({v['tflops']:.0f} TFLOP/s)")
    if res.get("gating") or res.get("mlp"):  # a shape-sweep-only file (another GPU) has neither
        out += [
            "",
            "## Gating kernel act(gate) * up (8192 x 3072)",
            "",
            "| act | dtype | impl | µs | GB/s | % of copy | floor µs | µs after a zeroing (dirty) flush | rel err |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in res.get("gating", []):
            out.append(
                f"| {r['activation']} | {r['dtype']} | {r['impl']} | {r['us']:.1f} | {r['gbps']:.0f} | {r['pct_copy']:.1f} | {r['floor_us']:.1f} | {r['us_dirty_l2']:.1f} | {r['rel_err']:.1e} |"
            )
        out += [
            "",
            "Each µs is the mean of two passes' medians (`us_passes` in the JSON); their difference is the noise floor.",
            "",
            "### Gating kernel inside the HF GEGLU forward (profiler trace, 20 forwards, no flush)",
            "",
            "| variant | kernel | calls | median µs |",
            "|---|---|---:|---:|",
        ]
        for r in res.get("gating_in_forward", []):
            if "kernel" in r:
                out.append(f"| {r['variant']} | `{r['kernel'][:70]}` | {r['calls']} | {r['median_us']:.1f} |")
        out += [
            "",
            "## MLP forward",
            "",
            "µs: GPU time per forward (launches queued ahead, kernels.ops.timing). Launch-bound µs (decode rows): one forward"
            " at a time from the host, launch overhead included. CUDA graph µs: the forward captured once and replayed.",
            "",
            "| workload | dtype | tokens | variant | µs | × compile | launch-bound µs | CUDA graph µs | compute floor µs"
            " | × floor | rel err | note |",
            "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        compile_us = {
            (r["workload"], r["dtype"], r["tokens"]): r.get("us")
            for r in res.get("mlp", [])
            if r["variant"] == "compile"
        }
        for r in res.get("mlp", []):
            us = r.get("us")
            note = r.get("skipped") or r.get("error") or r.get("graph_error") or ""
            ratio = us / r["floor_us"] if us else None
            cu = compile_us.get((r["workload"], r["dtype"], r["tokens"]))
            vs_compile = us / cu if us and cu else None
            out.append(
                f"| {r['workload']} | {r['dtype']} | {r['tokens']} | {r['variant']} | {_fmt(us)} | {_fmt(vs_compile, '.2f')}"
                f" | {_fmt(r.get('launch_bound_us'))} | {_fmt(r.get('graph_us'))} | {r['floor_us']:.1f}"
                f" | {_fmt(ratio, '.2f')} | {_fmt(r.get('rel_err'), '.1e')} | {note[:120]} |"
            )
        out += ["", '## Targets (docs/KERNELS.md, "Targets"), judged from the numbers above', ""]
        out += [f"- {_VERDICTS[ok]}: {text}" for ok, text in targets(res)]
        out += [
            "",
            "(A 'faster than' target counts as MET only when the lead exceeds the pass-to-pass spread; a difference within"
            " that spread is a TIE, and MISSED means behind by more than it.)",
        ]
    from kernels.lab import shapes

    out += shapes.to_markdown(res.get("shapes", []), res.get("shape_ceilings_tflops", {}))
    runs = res.get("runs", [])
    if runs:
        out += ["", "Sections of this file came from these runs:", ""]
        out += [f"- {r.get('created_utc')}: `{r.get('command')}` (commit {r.get('commit')})" for r in runs]
    return "\n".join(out) + "\n"


_VERDICTS = {True: "MET", False: "MISSED", "tie": "TIE"}


def targets(res: dict) -> list[tuple[bool | str, str]]:
    """(verdict, text) per target (docs/KERNELS.md, "Targets"), computed from this run's rows (nothing hard-coded):
    True met, False missed, "tie" for a 'faster than' within the noise."""

    def mlp(workload, variant, dtype="bf16", tokens=HF["tokens"]):
        return next(
            (
                r.get("us")
                for r in res.get("mlp", [])
                if (r["workload"], r["variant"], r["dtype"], r["tokens"]) == (workload, variant, dtype, tokens)
            ),
            None,
        )

    def noise(*rows):
        return max(abs(r["us_passes"][0] - r["us_passes"][1]) for r in rows if r and "us_passes" in r)

    def gate(impl, act="gelu_tanh", dtype="bf16"):
        return next(
            (r for r in res.get("gating", []) if (r["impl"], r["activation"], r["dtype"]) == (impl, act, dtype)), None
        )

    out = []
    fl, co, eg = mlp("geglu", "fuselens"), mlp("geglu", "compile"), mlp("geglu", "eager")
    floor = next(
        (r["floor_us"] for r in res.get("mlp", []) if r["workload"] == "geglu" and r["tokens"] == HF["tokens"]), None
    )
    if fl and co:
        out.append(
            (fl <= 0.85 * co, f"HF GEGLU fuselens {fl:.1f} us <= 0.85 x compile {co:.1f} us (ratio {fl / co:.2f})")
        )
    if fl and floor:
        out.append(
            (
                fl <= 1.15 * floor,
                f"HF GEGLU fuselens {fl:.1f} us <= 1.15 x compute floor {floor:.1f} us (ratio {fl / floor:.2f})",
            )
        )
    for act, dt in (("gelu_tanh", "bf16"), ("gelu_tanh", "fp16"), ("gelu_tanh", "fp32"), ("silu", "bf16")):
        ours, ind, lig = gate("fuselens", act, dt), gate("inductor", act, dt), gate("liger", act, dt)
        if ours:
            out.append(
                (ours["pct_copy"] >= 95, f"gating {act} {dt}: {ours['pct_copy']:.1f}% of copy bandwidth (>= 95%)")
            )
            for other in (ind, lig):
                if other:
                    nz = noise(ours, other) if "us_passes" in ours else 0.0
                    # a lead smaller than the pass-to-pass spread is a tie, not a win
                    lead_us = other["us"] - ours["us"]
                    out.append(
                        (
                            True if lead_us > nz else "tie" if lead_us >= -nz else False,
                            f"gating {act} {dt}: fuselens {ours['us']:.1f} us < {other['impl']} {other['us']:.1f} us"
                            f" (pass-to-pass spread {nz:.1f} us)",
                        )
                    )
    inside = {r["variant"]: r for r in res.get("gating_in_forward", []) if "kernel" in r}
    if "fuselens-gating" in inside:
        ours = inside["fuselens-gating"]["median_us"]
        for other in ("compile", "liger"):
            if other in inside:
                theirs = inside[other]["median_us"]
                out.append(
                    (ours < theirs, f"gating inside the forward: fuselens {ours:.1f} us < {other} {theirs:.1f} us")
                )
    pf, pe, pc = mlp("plain", "fuselens"), mlp("plain", "eager"), mlp("plain", "compile")
    if pf and pe and pc:
        out.append(
            (pf < min(pe, pc), f"plain MLP 8192 tokens: fuselens {pf:.1f} us < eager {pe:.1f} and compile {pc:.1f} us")
        )
    if fl and eg:
        out.append((fl < eg, f"HF GEGLU fuselens {fl:.1f} us < eager {eg:.1f} us"))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", default="bench/results")
    p.add_argument("--n-iter", type=int, default=200)
    p.add_argument(
        "--no-max-autotune", action="store_true", help="skip torch.compile mode=max-autotune (slow to compile)"
    )
    p.add_argument("--sections", help="gating,mlp,decode (the default) and/or shapes (the default with --shapes)")
    p.add_argument(
        "--shapes",
        choices=("llm", "llm-dtypes", "llm-all", "hf-plain", "users", "all"),
        help="the shape sweep's rows (kernels/lab/shapes.py)",
    )
    p.add_argument("--rows", help="only these shape-sweep row ids (comma-separated; --merge folds them in by id)")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="write only this run's sections (default: sections this run did not measure are kept from the existing"
        " kernels_<gpu>.json, so a long bench can run as several GPU commands)",
    )
    p.add_argument("--render", metavar="JSON", help="only re-render the .md beside a results .json (no GPU needed)")
    p.add_argument(
        "--merge",
        metavar="JSON",
        help="merge a results .json recorded elsewhere (a GPU run) into --out-dir's kernels_<gpu>.json and re-render"
        " its .md (no GPU needed)",
    )
    ns = p.parse_args(argv)
    if ns.merge:
        try:
            new = json.loads(Path(ns.merge).read_text())
            slug = envinfo.gpu_slug(new["env"]["gpu"]["name"])
            target = Path(ns.out_dir) / f"kernels_{slug}.json"
            res = merge_results(json.loads(target.read_text()), new) if target.is_file() else new
            target.write_text(json.dumps(res, indent=1))
            target.with_suffix(".md").write_text(to_markdown(res))
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: cannot merge {ns.merge}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        print(f"merged {ns.merge} into {target}")
        return 0
    if ns.render:
        src = Path(ns.render)
        try:
            res = json.loads(src.read_text())
            md = to_markdown(res)
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: cannot render {src}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        src.with_suffix(".md").write_text(md)
        return 0
    if not torch.cuda.is_available():
        print("error: no CUDA GPU; the bench needs one", file=sys.stderr)
        return 3
    if ns.n_iter < 100:
        print("error: --n-iter must be >= 100", file=sys.stderr)
        return 2
    sections = set((ns.sections or ("shapes" if ns.shapes else ",".join(DEFAULT_SECTIONS))).split(","))
    if "shapes" in sections and not ns.shapes:
        print("error: --sections shapes needs --shapes SET", file=sys.stderr)
        return 2
    res = {
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python -m kernels.bench " + " ".join(argv or sys.argv[1:]),
        "method": f"CUDA events, median of {ns.n_iter} calls after warm-up, L2 flushed before every call by reading a 256 MB buffer (untimed)",
        "env": envinfo.environment(),
    }
    log(f"env: {json.dumps(res['env'])}")
    res["ceilings"] = measure_ceilings(ns.n_iter)
    log(f"ceilings: {json.dumps(res['ceilings'])}")
    res["sections"] = sorted(sections)
    if "gating" in sections:
        res["gating"] = bench_gating(ns.n_iter, res["ceilings"]["copy_gbps"])
        res["gating_in_forward"] = gating_in_forward()
    tf = res["ceilings"]["matmul_tflops"]
    full = (
        ["eager", "compile"]
        + ([] if ns.no_max_autotune else ["compile-max-autotune"])
        + ["liger", "fuselens-gating", "fuselens"]
    )
    if sections & {"mlp", "decode"}:
        res["mlp"] = []
    if "mlp" in sections:
        res["mlp"] += bench_mlp(
            "geglu", "bf16", HF["tokens"], [*full, "fuselens-tma2", "fuselens-pointer"], ns.n_iter, tf
        )
        res["mlp"] += bench_mlp(
            "swiglu", "bf16", HF["tokens"], ["eager", "compile", "liger", "fuselens-gating", "fuselens"], ns.n_iter, tf
        )
        res["mlp"] += bench_mlp("swiglu", "fp16", HF["tokens"], ["eager", "compile", "fuselens"], ns.n_iter, tf)
        res["mlp"] += bench_mlp(
            "plain", "bf16", HF["tokens"], ["eager", "compile", "fuselens", "fuselens-pointer"], ns.n_iter, tf
        )
    if "decode" in sections:
        for m in DECODE_TOKENS:
            res["mlp"] += bench_mlp(
                "geglu", "bf16", m, ["eager", "compile", "liger", "fuselens"], ns.n_iter, tf, graphs=True
            )
        res["mlp"] += bench_mlp("plain", "bf16", 1, ["eager", "compile", "fuselens"], ns.n_iter, tf, graphs=True)
    if "shapes" in sections:
        from kernels.lab import shapes

        ceilings = {"bf16": tf}
        partial = Path(ns.out_dir) / "kernels_shapes_partial.json"

        def keep(rows):  # a run cut off by a device limit keeps the rows it finished (fold in with --merge)
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(
                json.dumps(
                    res
                    | {
                        "shapes": [r | {"run_utc": res["created_utc"]} for r in rows],
                        "shape_ceilings_tflops": ceilings,
                    },
                    indent=1,
                )
            )

        only = set(ns.rows.split(",")) if ns.rows else None
        res["shapes"] = shapes.run(ns.shapes, ceilings, only, after_row=keep)
        partial.unlink(missing_ok=True)
        for row in res["shapes"]:
            row["run_utc"] = res["created_utc"]  # the run that measured it (merge_results lists only such runs)
        res["shape_ceilings_tflops"] = ceilings
    from kernels.models import dispatch

    res["dispatch"] = dispatch.decisions()
    res["autotune"] = autotune_choices()
    out_dir = Path(ns.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = envinfo.gpu_slug(res["env"]["gpu"]["name"])
    path = out_dir / f"kernels_{slug}.json"
    if not ns.fresh and path.is_file():
        res = merge_results(json.loads(path.read_text()), res)
    path.write_text(json.dumps(res, indent=1))
    md = to_markdown(res)
    (out_dir / f"kernels_{slug}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
