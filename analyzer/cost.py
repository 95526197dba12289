"""Bytes and FLOPs per GPU op, ESTIMATED from the launching op's shapes and dtypes; achieved rates vs peaks.

estimate_costs(gpu_ops, gpu) -> DataFrame (gpu_ops' index) with bytes, flops, cost_basis, achieved_gbps,
achieved_tflops, pct_peak_bw, pct_peak_flops.

How: the formulas (analyzer/cost_rules.py) run once per UNIQUE (kernel name, op, shapes, dtypes, strides) — a
training trace with 1M kernels has a few thousand — and the answers are mapped back; achieved rates are
column arithmetic. Every figure says what it rests on in cost_basis ('estimate: …', 'recorded: …' or
'unknown: <why>'); unknown is NaN, never 0. docs/COST_MODEL.md has every rule and its checks.
"""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd

from analyzer.cost_rules import Estimate, estimate_kernel, is_helper
from analyzer.gpus import GpuSpec

COLUMNS = ("bytes", "flops", "cost_basis", "achieved_gbps", "achieved_tflops", "pct_peak_bw", "pct_peak_flops")
# Rates are only compared with an HBM/tensor peak where that peak is the ceiling: host↔device copies run over
# PCIe/NVLink (≈ 25–55 GB/s, not 3,350), and pointwise "FLOPs" are nominal, so neither gets a % of peak.
_HBM_MEMCPY = ("DtoD", "PtoP")
_MATRIX_CATEGORIES = ("gemm", "attention")


def _col(df: pd.DataFrame, name: str, default) -> pd.Series:
    return df[name] if name in df.columns else pd.Series(default, index=df.index, dtype=object)


def _json(values: pd.Series) -> list[bytes]:
    dumps = orjson.dumps
    return [dumps(v) for v in values.tolist()]


def _kernel_estimates(k: pd.DataFrame) -> pd.DataFrame:
    """Estimate per unique (name, op, shapes) and map back to every kernel row."""
    key = pd.DataFrame(
        {
            "name": k["name"].astype(object),
            "op": _col(k, "op_name", "").fillna("").astype(object),
            "dims": _json(_col(k, "input_dims", None)),
            "types": _json(_col(k, "input_types", None)),
            "strides": _json(_col(k, "input_strides", None)),
            "known": _col(k, "shapes_known", False).fillna(False).astype(bool),
            "graph": _col(k, "launch_name", "").fillna("").astype(str).str.contains("Graph", regex=False),
            "launched": _col(k, "launch_name", "").fillna("").astype(str) != "",
        },
        index=k.index,
    )
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(key))
    first = pd.Series(np.arange(len(k))).groupby(codes).first().to_numpy()
    results: list[Estimate] = []
    for pos in first:
        row = k.iloc[pos]
        results.append(
            estimate_kernel(
                name=row["name"],
                category=row.get("category", "other"),
                ops=row.get("ops", ""),
                op_name=key["op"].iat[pos],
                dims=row.get("input_dims"),
                types=row.get("input_types"),
                strides=row.get("input_strides"),
                shapes_known=bool(key["known"].iat[pos]),
                graph_replay=bool(key["graph"].iat[pos]),
                has_launch=bool(key["launched"].iat[pos]),
            )
        )
    take = pd.Index(codes)
    out = pd.DataFrame(
        {
            "bytes": np.array([r.bytes for r in results], dtype=float)[take],
            "flops": np.array([r.flops for r in results], dtype=float)[take],
            "cost_basis": np.array([r.basis for r in results], dtype=object)[take],
            "peak_key": np.array([r.peak_key for r in results], dtype=object)[take],
        },
        index=k.index,
    )
    return _one_estimate_per_call(k, out)


def _one_estimate_per_call(k: pd.DataFrame, est: pd.DataFrame) -> pd.DataFrame:
    """An op call that launches several kernels (split-K GEMM + reduce, layer-norm backward's two passes) has
    ONE op-level estimate. It goes on the call's main kernel (not a helper, then the longest); the others get
    NaN and a basis that points at it, so per-step sums never count a call twice. If the main kernel has no
    estimate (a custom MoE op whose GEMMs we cannot model), no kernel of the call keeps one: the op-level
    figure would otherwise land on a small helper (e.g. MoE routing) and read as that kernel's traffic."""
    op_index = _col(k, "op_index", -1).fillna(-1).astype(np.int64).to_numpy()
    linked = op_index >= 0
    if not linked.any():
        return est
    sub = pd.DataFrame(
        {
            "op": op_index[linked],
            "helper": [
                is_helper(c, o)
                for c, o in zip(_col(k, "category", "")[linked], _col(k, "ops", "")[linked], strict=True)
            ],
            "dur": -_col(k, "dur_us", np.nan).to_numpy(dtype=float)[linked],
            "pos": np.flatnonzero(linked),
        }
    )
    sub["n"] = sub.groupby("op")["op"].transform("size")
    multi = sub[sub["n"] > 1].sort_values(["op", "helper", "dur"], kind="stable")
    if multi.empty:
        return est
    is_main = ~multi["op"].duplicated(keep="first").to_numpy()
    main = multi[is_main].set_index("op")["pos"]
    has_est = est["cost_basis"].str.startswith("estimate").to_numpy()
    est = est.copy()
    names = k["name"].to_numpy(dtype=object)
    op_names = _col(k, "op_name", "").to_numpy(dtype=object)
    col = {c: est.columns.get_loc(c) for c in ("bytes", "flops", "cost_basis", "peak_key")}
    for o, p, n in zip(multi["op"].to_numpy(), multi["pos"].to_numpy(), multi["n"].to_numpy(), strict=True):
        m = main[o]
        if p == m:
            if has_est[p]:
                est.iat[p, col["cost_basis"]] += f" (whole call: {n} kernels)"
            continue
        if not has_est[p]:
            continue  # keeps its own reason (graph replay, no model …)
        est.iat[p, col["bytes"]] = np.nan
        est.iat[p, col["flops"]] = np.nan
        est.iat[p, col["peak_key"]] = None
        if has_est[m]:
            why = f"the call's estimate is on {_short(names[m])}"
        else:
            why = f"its main kernel {_short(names[m])} has no estimate, so neither has the call"
        est.iat[p, col["cost_basis"]] = f"unknown: one of {n} kernels of a single {op_names[p]} call; {why}"
    return est


def _short(name: str, width: int = 48) -> str:
    name = str(name).removeprefix("void ")
    return name if len(name) <= width else name[: width - 1] + "…"


def _memop_estimates(m: pd.DataFrame) -> pd.DataFrame:
    recorded = _col(m, "memop_bytes", np.nan).astype(float).to_numpy()
    kind = _col(m, "kind", "").astype(str).to_numpy()
    ok = np.isfinite(recorded)
    basis = np.where(
        ok,
        np.char.add(np.char.add("recorded: ", kind.astype(str)), " bytes from the trace's args"),
        np.char.add("unknown: ", np.char.add(kind.astype(str), " without a bytes arg")),
    ).astype(object)
    return pd.DataFrame(
        {
            "bytes": np.where(ok, recorded, np.nan),
            "flops": np.where(ok, 0.0, np.nan),
            "cost_basis": basis,
            "peak_key": None,
        },
        index=m.index,
    )


def estimate_costs(gpu_ops: pd.DataFrame, gpu: GpuSpec | None) -> pd.DataFrame:
    """Bytes, FLOPs and achieved rates for every GPU op (see module doc). Index = gpu_ops.index."""
    if len(gpu_ops) == 0:
        return pd.DataFrame(
            {c: pd.Series(dtype=object if c == "cost_basis" else float) for c in COLUMNS}, index=gpu_ops.index
        )
    kind = _col(gpu_ops, "kind", "kernel").astype(str)
    is_mem = kind.isin(("memcpy", "memset")).to_numpy()
    parts = []
    if (~is_mem).any():
        parts.append(_kernel_estimates(gpu_ops[~is_mem]))
    if is_mem.any():
        parts.append(_memop_estimates(gpu_ops[is_mem]))
    est = pd.concat(parts).reindex(gpu_ops.index)

    dur = _col(gpu_ops, "dur_us", np.nan).astype(float).to_numpy()
    dur = np.where(dur > 0, dur, np.nan)  # a 0-µs record has no meaningful rate
    b = est["bytes"].to_numpy(dtype=float)
    f = est["flops"].to_numpy(dtype=float)
    gbps = b / dur / 1e3  # bytes / (µs · 1e-6) / 1e9
    tflops = np.where(f > 0, f / dur / 1e6, np.nan)  # FLOPs / (µs · 1e-6) / 1e12; 0-FLOP copies have no rate
    pct_bw = np.full(len(est), np.nan)
    pct_flops = np.full(len(est), np.nan)
    if gpu is not None:
        names = gpu_ops["name"].astype(str)
        hbm_bound = ~is_mem | (kind == "memset").to_numpy() | names.str.contains("|".join(_HBM_MEMCPY)).to_numpy()
        pct_bw = np.where(hbm_bound, gbps / gpu.hbm_gbps * 100.0, np.nan)
        matrix = _col(gpu_ops, "category", "").isin(_MATRIX_CATEGORIES).to_numpy()
        peak = np.array(
            [gpu.tflops.get(p, np.nan) if isinstance(p, str) else np.nan for p in est["peak_key"]], dtype=float
        )
        pct_flops = np.where(matrix, tflops / peak * 100.0, np.nan)
    return pd.DataFrame(
        {
            "bytes": b,
            "flops": f,
            "cost_basis": est["cost_basis"].astype(object).to_numpy(),
            "achieved_gbps": gbps,
            "achieved_tflops": tflops,
            "pct_peak_bw": pct_bw,
            "pct_peak_flops": pct_flops,
        },
        index=gpu_ops.index,
    )
