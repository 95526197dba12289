"""Bytes and FLOPs per GPU op, ESTIMATED from the launching op's shapes and dtypes; achieved rates vs peaks.

estimate_costs(gpu_ops, gpu) -> DataFrame (gpu_ops' index) with bytes, flops, cost_basis, achieved_gbps,
achieved_tflops, pct_peak_bw, pct_peak_flops.

How: the formulas (analyzer/cost_rules.py) run once per UNIQUE (kernel name, op, shapes, dtypes, strides) — a
training trace with 1M kernels has a few thousand — and the answers are mapped back; achieved rates are
column arithmetic. Every figure says what it rests on in cost_basis ('estimate: …', 'recorded: …' or
'unknown: <why>'); unknown is NaN, never 0. docs/COST_MODEL.md has every rule and its checks.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analyzer.codes import factorize, object_codes
from analyzer.fmt import short_name
from analyzer.gpus import GpuSpec
from analyzer.opinfo.cost_rules import Estimate, estimate_kernel, is_helper

COLUMNS = ("bytes", "flops", "cost_basis", "achieved_gbps", "achieved_tflops", "pct_peak_bw", "pct_peak_flops")
# Rates are only compared with an HBM/tensor peak where that peak is the ceiling: host↔device copies run over
# PCIe/NVLink (≈ 25–55 GB/s, not 3,350), and pointwise "FLOPs" are nominal, so neither gets a % of peak.
_MATRIX_CATEGORIES = ("gemm", "attention")


def _arr(df: pd.DataFrame, name: str, default, dtype=object) -> np.ndarray:
    """Column as a numpy array (object for text: pandas 3 would otherwise convert to Arrow strings, ~3 s per
    million rows), or a filled default when the column is absent."""
    if name in df.columns:
        return (
            df[name].to_numpy(dtype=dtype, na_value=default) if dtype is not object else df[name].to_numpy(dtype=object)
        )
    return np.full(len(df), default, dtype=dtype)


def _codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    codes, uniques = factorize(values)
    return codes, len(uniques)


def _shape_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    # by shared object, then by JSON text of the distinct ones: no object per row (analyzer/codes.py says why)
    codes, first = object_codes(values)
    return codes, len(first)


def _per_unique(values: np.ndarray, fn) -> np.ndarray:
    """fn(value) → bool for every row, evaluated once per distinct value (a few hundred, not a million)."""
    codes, uniques = factorize(values)
    hit = np.array([bool(fn(u)) for u in uniques], dtype=bool)
    return hit[codes] if len(values) else np.zeros(0, dtype=bool)


def _kernel_estimates(k: pd.DataFrame) -> dict[str, np.ndarray]:
    """Estimate per unique (name, op, shapes, dtypes, strides, flags); map back to every kernel row."""
    n = len(k)
    names = _arr(k, "name", "")
    op = _arr(k, "op_name", "")
    op_codes, op_names = factorize(op)  # unknown ops → "", decided once per distinct op
    op = np.where(pd.isna(op_names), "", op_names).astype(object)[op_codes] if n else np.zeros(0, dtype=object)
    dims, types, strides = _arr(k, "input_dims", None), _arr(k, "input_types", None), _arr(k, "input_strides", None)
    concrete = _arr(k, "concrete_inputs", None)
    known = _arr(k, "shapes_known", False, dtype=bool)
    launch_codes, launch_names = factorize(_arr(k, "launch_name", ""))
    graph = np.array([isinstance(u, str) and "Graph" in u for u in launch_names], dtype=bool)[launch_codes]
    launched = np.array([isinstance(u, str) and u != "" for u in launch_names], dtype=bool)[launch_codes]
    key = np.zeros(n, dtype=np.int64)
    for codes, size in (_codes(names), _codes(op), *map(_shape_codes, (dims, types, strides, concrete))):
        key = pd.factorize(key * size + codes)[0].astype(np.int64)  # re-coded each time: < n, never overflows
    key = key * 8 + known * 4 + graph * 2 + launched
    codes, uniq = pd.factorize(key)
    first = np.full(len(uniq), -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(n - 1, -1, -1)  # first row of each unique key
    cats, opsd = _arr(k, "category", "other"), _arr(k, "ops", "")
    results: list[Estimate] = [
        estimate_kernel(
            name=str(names[i]),
            category=str(cats[i]),
            ops=str(opsd[i] or ""),
            op_name=str(op[i]),
            dims=dims[i],
            types=types[i],
            strides=strides[i],
            shapes_known=bool(known[i]),
            graph_replay=bool(graph[i]),
            has_launch=bool(launched[i]),
            concrete=concrete[i],
        )
        for i in first
    ]
    est = {
        "bytes": np.array([r.bytes for r in results], dtype=float)[codes],
        "flops": np.array([r.flops for r in results], dtype=float)[codes],
        "cost_basis": np.array([r.basis for r in results], dtype=object)[codes],
        "peak_key": np.array([r.peak_key for r in results], dtype=object)[codes],
        "is_estimate": np.array([r.basis.startswith("estimate") for r in results], dtype=bool)[codes],
    }
    return _one_estimate_per_call(k, est)


def _one_estimate_per_call(k: pd.DataFrame, est: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """An op call that launches several kernels (split-K GEMM + reduce, layer-norm backward's two passes) has
    ONE op-level estimate. It goes on the call's main kernel (not a helper, then the longest); the others get
    NaN and a basis that points at it, so per-step sums never count a call twice. If the main kernel has no
    estimate (a custom MoE op whose GEMMs we cannot model), no kernel of the call keeps one: the op-level
    figure would otherwise land on a small helper (e.g. MoE routing) and read as that kernel's traffic."""
    op_index = _arr(k, "op_index", -1, dtype=np.int64)
    linked = np.flatnonzero(op_index >= 0)
    if len(linked) == 0:
        return est
    sub = pd.DataFrame(
        {
            "op": op_index[linked],
            "helper": is_helper(_arr(k, "ops", "")[linked]),
            "dur": -_arr(k, "dur_us", np.nan, dtype=float)[linked],
            "pos": linked,
        }
    )
    sub["n"] = sub.groupby("op")["op"].transform("size")
    multi = sub[sub["n"] > 1].sort_values(["op", "helper", "dur"], kind="stable")
    if multi.empty:
        return est
    pos = multi["pos"].to_numpy()
    n = multi["n"].to_numpy()
    is_main = ~multi["op"].duplicated(keep="first").to_numpy()
    main = pd.Series(pos[is_main], index=multi["op"].to_numpy()[is_main]).reindex(multi["op"].to_numpy()).to_numpy()

    basis = est["cost_basis"].copy()
    has_est = est["is_estimate"]
    names = _arr(k, "name", "")
    op_names = _arr(k, "op_name", "")
    # the texts are written once per distinct (basis, count) / (main kernel, op, count), not per row: a 1 GiB
    # trace has 40k such kernels and ~10^2 distinct texts
    p, cnt = pos[is_main & has_est[pos]], n[is_main & has_est[pos]]
    codes, first = _distinct(basis[p], cnt)
    basis[p] = _texts([f"{basis[p[i]]} (whole call: {cnt[i]} kernels)" for i in first])[codes]
    drop = ~is_main & has_est[pos]  # secondary kernels that got the op-level figure too
    p, m, cnt = pos[drop], main[drop], n[drop]
    codes, first = _distinct(names[m], has_est[m], op_names[p], cnt)
    texts = []
    for i in first:
        kernel = short_name(names[m[i]], 48)
        if has_est[m[i]]:
            texts.append(
                f"counted: one of {cnt[i]} kernels of a single {op_names[p[i]]} call, in its estimate on {kernel}"
            )
        else:
            why = f"its main kernel {kernel} has no estimate, so neither has the call"
            texts.append(f"unknown: one of {cnt[i]} kernels of a single {op_names[p[i]]} call; {why}")
    basis[p] = _texts(texts)[codes]
    rows = pos[drop]
    out = {c: v.copy() for c, v in est.items()}
    out["cost_basis"] = basis
    # a split-K reduce or a workspace memset beside a GEMM whose call estimate is on the GEMM kernel: 0 here, so a
    # step's sums stay known (NaN made every step with a split-K GEMM 'unknown'); NaN when the call has none
    counted = has_est[main[drop]]
    out["bytes"][rows] = np.where(counted, 0.0, np.nan)
    out["flops"][rows] = np.where(counted, 0.0, np.nan)
    out["peak_key"][rows] = None
    out["is_estimate"][rows] = False
    return out


def _distinct(*columns) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, first row of each code) of the rows' combinations of values."""
    n = len(columns[0])
    key = np.zeros(n, dtype=np.int64)
    for values in columns:
        codes, uniques = factorize(values)
        key = pd.factorize(key * max(len(uniques), 1) + codes)[0].astype(np.int64)  # re-coded: never overflows
    first = np.full(int(key.max()) + 1 if n else 0, -1, dtype=np.int64)
    first[key[::-1]] = np.arange(n - 1, -1, -1)
    return key, first


def _texts(values: list[str]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _memop_estimates(m: pd.DataFrame) -> dict[str, np.ndarray]:
    recorded = _arr(m, "memop_bytes", np.nan, dtype=float)
    kind = _arr(m, "kind", "")
    ok = np.isfinite(recorded)
    # a device-to-device (or peer) copy reads its bytes from HBM and writes them back: twice the recorded size
    on_device = _per_unique(_arr(m, "name", ""), lambda u: "DtoD" in str(u) or "PtoP" in str(u))
    basis = np.array(
        [
            (
                f"recorded: {x} bytes from the trace's args, read and written on the device (x2)"
                if dev
                else f"recorded: {x} bytes from the trace's args"
            )
            if good
            else f"unknown: {x} without a bytes arg"
            for x, good, dev in zip(kind, ok, on_device, strict=True)
        ],
        dtype=object,
    )
    return {
        "bytes": np.where(ok, np.where(on_device, 2.0 * recorded, recorded), np.nan),
        "flops": np.where(ok, 0.0, np.nan),
        "cost_basis": basis,
        "peak_key": np.full(len(m), None, dtype=object),
        "is_estimate": np.zeros(len(m), dtype=bool),
    }


def estimate_costs(gpu_ops: pd.DataFrame, gpu: GpuSpec | None) -> pd.DataFrame:
    """Bytes, FLOPs and achieved rates for every GPU op (see module doc). Index = gpu_ops.index."""
    cols = cost_columns(gpu_ops, gpu)
    return pd.DataFrame(
        {c: pd.Series(v, index=gpu_ops.index, dtype=object if c == "cost_basis" else float) for c, v in cols.items()}
    )


def cost_columns(gpu_ops: pd.DataFrame, gpu: GpuSpec | None) -> dict[str, np.ndarray]:
    """estimate_costs' columns as arrays in gpu_ops' row order (build_trace adds them to gpu_ops without a
    DataFrame in between: 1.1 s for 2 M kernels)."""
    n = len(gpu_ops)
    kind = _arr(gpu_ops, "kind", "kernel")
    is_mem = np.isin(kind, ("memcpy", "memset"))
    est = {
        "bytes": np.full(n, np.nan),
        "flops": np.full(n, np.nan),
        "cost_basis": np.full(n, "", dtype=object),
        "peak_key": np.full(n, None, dtype=object),
        "is_estimate": np.zeros(n, dtype=bool),
    }
    for mask, fn in ((~is_mem, _kernel_estimates), (is_mem, _memop_estimates)):
        if mask.any():
            part = fn(gpu_ops[mask])
            for c in est:
                est[c][mask] = part[c]

    dur = _arr(gpu_ops, "dur_us", np.nan, dtype=float)
    dur = np.where(dur > 0, dur, np.nan)  # a 0-µs record has no meaningful rate
    if gpu is not None and gpu.hbm_gbps:
        _drop_impossible(est, dur, gpu.hbm_gbps, ~is_mem)
    b, f = est["bytes"], est["flops"]
    with np.errstate(invalid="ignore", divide="ignore"):
        gbps = b / dur / 1e3  # bytes / (µs · 1e-6) / 1e9
        tflops = np.where(f > 0, f / dur / 1e6, np.nan)  # FLOPs / (µs · 1e-6) / 1e12; 0-FLOP copies have no rate
    pct_bw = np.full(n, np.nan)
    pct_flops = np.full(n, np.nan)
    if gpu is not None:
        device_copy = np.zeros(n, dtype=bool)  # memset and device-to-device copies are HBM-bound; HtoD/DtoH not
        if is_mem.any():
            on_device = _per_unique(_arr(gpu_ops, "name", "")[is_mem], lambda u: "DtoD" in str(u) or "PtoP" in str(u))
            device_copy[is_mem] = (kind[is_mem] == "memset") | on_device
        hbm_bound = ~is_mem | device_copy
        pct_bw = np.where(hbm_bound, gbps / gpu.hbm_gbps * 100.0, np.nan)
        matrix = np.isin(_arr(gpu_ops, "category", ""), _MATRIX_CATEGORIES)
        pk_codes, pk_names = factorize(est["peak_key"])
        peak = np.array([gpu.tflops.get(p, np.nan) if isinstance(p, str) else np.nan for p in pk_names], dtype=float)
        peak = peak[pk_codes] if n else np.zeros(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            pct_flops = np.where(matrix, tflops / peak * 100.0, np.nan)
    return {
        "bytes": np.asarray(b, dtype=float),
        "flops": np.asarray(f, dtype=float),
        "cost_basis": np.asarray(est["cost_basis"], dtype=object),
        "achieved_gbps": np.asarray(gbps, dtype=float),
        "achieved_tflops": np.asarray(tflops, dtype=float),
        "pct_peak_bw": np.asarray(pct_bw, dtype=float),
        "pct_peak_flops": np.asarray(pct_flops, dtype=float),
    }


# An estimate this many times the HBM peak over the kernel's duration is not traffic any cache level served (L2 runs
# at 2-4x HBM on Hopper and Blackwell): the op's tensors are larger than what its kernel touches. vLLM's
# reshape_and_cache_flash (TraceLens's B200 sample) names the whole KV cache, [4213816, 16, 1, 64] uint8 twice, and
# writes 888 slots of it: 8.6 GB in 4.5 µs, 239x the B200's 8,000 GB/s.
IMPOSSIBLE_X_HBM = 10.0


def _drop_impossible(est: dict, dur_us: np.ndarray, hbm_gbps: float, kernels: np.ndarray) -> None:
    """Kernels whose estimated bytes would take more than IMPOSSIBLE_X_HBM x the HBM peak: bytes unknown, and why."""
    with np.errstate(invalid="ignore", divide="ignore"):
        gbps = est["bytes"] / dur_us / 1e3
        bad = np.flatnonzero(kernels & est["is_estimate"] & (gbps > IMPOSSIBLE_X_HBM * hbm_gbps))
    for i in bad:
        est["cost_basis"][i] = (
            f"unknown: the estimate, {est['bytes'][i] / 1e9:,.2f} GB in {dur_us[i]:,.1f} µs, would be "
            f"{gbps[i] / hbm_gbps:,.0f}x the {hbm_gbps:,.0f} GB/s HBM peak: its op names tensors larger than what the "
            f"kernel touches (was {est['cost_basis'][i][:160]})"
        )
        est["bytes"][i] = np.nan


# ------------------------------------------------------------------------------------------ flags
def hbm_flag(gbps: float, hbm_gbps: float | None) -> str | None:
    """The plain-words flag of an estimated rate above the GPU's HBM peak (None when it is not, or no peak is known).

    The byte estimate assumes no cache reuse; a kernel whose estimate over its duration is above what HBM can
    deliver must have had part of its traffic served by the L2 (or its estimate counts too much)."""
    if hbm_gbps is None or not (isinstance(gbps, (int, float)) and math.isfinite(gbps)) or gbps <= hbm_gbps:
        return None
    return (
        f"above HBM peak: {gbps:,.0f} GB/s estimated > {hbm_gbps:,.0f} GB/s peak; part of its traffic was likely "
        "served by L2 (the byte estimate assumes no cache reuse)"
    )


def hbm_flags(gbps, hbm_gbps: float | None, hbm_bound=None) -> list[list[str]]:
    """hbm_flag for every row (a list per row, empty when nothing is flagged); hbm_bound: rows whose rate is HBM
    traffic (host↔device copies run over PCIe/NVLink: never flagged against HBM)."""
    vals = np.asarray(gbps, dtype=float)
    bound = np.ones(len(vals), dtype=bool) if hbm_bound is None else np.asarray(hbm_bound, dtype=bool)
    out: list[list[str]] = [[] for _ in range(len(vals))]
    if hbm_gbps is None:
        return out
    with np.errstate(invalid="ignore"):
        above = np.flatnonzero(bound & (vals > hbm_gbps))
    for i in above:
        out[i] = [hbm_flag(float(vals[i]), hbm_gbps)]
    return out
