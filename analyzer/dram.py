"""Predicted DRAM traffic per kernel, in sequence: an L2-aware byte model (docs/COST_MODEL.md, "DRAM model").

The cost model's `bytes` are logical: every tensor a kernel touches counted as if it crossed HBM. On a GPU whose
last-level cache holds tens of MB (H100 50 MiB, H200 60 MiB), part of a tensor an earlier kernel wrote is still on
chip when the next kernel reads it, and part of what a kernel writes is written back to HBM only later, during
another kernel. This module predicts what Nsight Compute counts in sequence (`--cache-control none`):

    predict_step(step_ops, gpu) -> DataFrame (step_ops' index): dram_read_bytes, dram_write_bytes, dram_bytes,
                                   l2_hit_bytes, dram_basis

The model, for one steady-state step repeated (the previous step left the cache as this one will):

* **Tensors.** Each kernel reads its launching op's input tensors and writes its output (analyzer.ops.dataflow
  .tensor_io; an op whose output shape is not known writes `bytes − inputs`). An input comes from the latest
  earlier kernel of the step whose output has its element count and dtype (the diff's data-flow rule); an input
  with no such producer (a weight, the step's input) is the one the same kernel read one step earlier.
* **The cache is a pool of C bytes with random replacement** (C = the GPU's cache capacity, analyzer.gpus). Every
  byte a kernel brings in (a read miss or a write) evicts a random resident byte, so a tensor left with `r` bytes
  resident keeps r·e^(−A/C) of them after A bytes are brought in. That is the reuse distance: the bytes moved in
  between, against C.
* **A kernel streams its tensors evenly.** Reading an input with r bytes resident while bringing in A bytes hits
  r·φ(A/C), φ(x) = (1 − e^(−x))/x (the resident part shrinks while the kernel runs); A = reads − hits + writes
  (solved per kernel). What it touched stays resident as size·φ(A/C).
* **Writes reach DRAM when evicted.** Dirty bytes D (all outputs not yet written back) lose the same fraction:
  a kernel writes back D·(1 − e^(−A/C)) of what was dirty before it plus out·(1 − φ(A/C)) of its own output; the
  rest stays dirty for later kernels. So a kernel's DRAM writes can be an earlier kernel's output, as Nsight
  Compute counts them.

No fitted constant: C comes from the datasheet, everything else from the trace's shapes. Kernels without a byte
estimate are left out of the cache (their traffic is unknown: the basis says so and step totals are NaN).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analyzer.gpus import GpuSpec
from analyzer.ops import dtypes
from analyzer.ops.dataflow import tensor_io
from analyzer.ops.tensors import Tensor

COLUMNS = ("dram_read_bytes", "dram_write_bytes", "dram_bytes", "l2_hit_bytes", "dram_basis")
PASSES = 3  # steps simulated back to back; the last is reported (the first starts from a cache of clean bytes)
MODEL = (
    "predicted DRAM traffic in sequence: random-replacement cache of {cap} ({why}); reuse by element count + dtype "
    "from the previous kernels of the step; writes counted when evicted"
)


def phi(x: float) -> float:
    """Mean survival of bytes brought in evenly while x cache-capacities of new bytes arrive: (1 − e^−x)/x."""
    if x < 1e-6:
        return 1.0 - x / 2.0
    return -math.expm1(-x) / x


def _solve_alloc(logical: float, resident: float, cap: float) -> float:
    """A such that A = logical − resident·φ(A/C): bytes a kernel brings in (misses + writes). Monotone in A, so
    a few Newton steps from A = logical converge (|φ'| ≤ 1/2 and resident ≤ C keep the slope ≥ 1/2)."""
    if resident <= 0.0:
        return logical
    a = logical
    for _ in range(30):
        x = a / cap
        f = a - logical + resident * phi(x)
        if x < 1e-6:
            dphi = -0.5
        else:
            e = math.exp(-x)
            dphi = (e * x - (1.0 - e)) / (x * x)
        step = f / (1.0 + resident * dphi / cap)
        a -= step
        if abs(step) < 1.0:
            break
    return max(a, 0.0)


def _key(t: Tensor) -> tuple[int, str | None]:
    return (t.numel, t.dtype)


class _Row:
    """What the model needs of one GPU op: logical reads/writes and the tensors behind them."""

    __slots__ = ("ok", "reads", "writes", "inputs", "output", "why")

    def __init__(self, ok, reads=0.0, writes=0.0, inputs=(), output=None, why=""):
        self.ok = ok
        self.reads = reads  # logical bytes read
        self.writes = writes  # logical bytes written
        self.inputs = inputs  # ((key or None, bytes), ...): key None = not linkable
        self.output = output  # (key, bytes) or None
        self.why = why


def _row_for(kind: str, name: str, op: str, dims, types, logical: float) -> _Row:
    if not (logical >= 0):  # NaN: no estimate
        return _Row(False, why="unknown: no byte estimate for this kernel (see cost_basis)")
    if kind in ("memset", "memcpy"):
        if kind == "memcpy" and "DtoH" in name:
            return _Row(True, reads=logical)
        if kind == "memcpy" and ("DtoD" in name or "PtoP" in name):
            return _Row(True, reads=logical, writes=logical)
        return _Row(True, writes=logical)  # memset, HtoD: bytes written into device memory
    io = tensor_io(op, dims, types) if op else None
    if io is None or not io.inputs:
        return _Row(True, reads=logical, why="no tensors recorded: all bytes taken as reads of unlinked data")
    fresh = {id(t) for t in io.linkable}
    ins = [(_key(t) if id(t) in fresh else None, t.nbytes) for t in io.inputs]
    ins = [(k, b if b == b else 0.0) for k, b in ins]
    total_in = sum(b for _, b in ins)
    if total_in > logical > 0:  # a stride-0 (broadcast) input stores fewer bytes than its shape: scale to the estimate
        ins = [(k, b * logical / total_in) for k, b in ins]
        total_in = logical
    writes = max(logical - total_in, 0.0)
    why = ""
    if writes == 0 and op.startswith("triton_poi_") and len(ins) >= 2 and len({_key(t) for t in io.inputs}) == 1:
        # Inductor stored its result over one of its same-sized args (in_out_ptr): the cost model counts the args
        # once (a lower bound, docs/COST_MODEL.md); the cache sees that buffer written as well
        writes = ins[0][1]
        why = "Inductor in/out buffer: one same-sized arg taken as written too"
    out = None
    if io.output is not None and io.output.dtype and writes > 0:
        out = (_key(io.output), writes)
    elif writes > 0:
        dtype = next((t.dtype for t in io.inputs if t.dtype), None)
        size = dtypes.itemsize(dtype)
        if size and writes % size == 0:  # custom / Inductor ops: an output of `bytes − inputs` in the inputs' dtype
            out = ((int(writes // size), dtype), writes)
    return _Row(True, reads=total_in, writes=writes, inputs=tuple(ins), output=out, why=why)


def _rows(step_ops: pd.DataFrame) -> list[_Row]:
    """One _Row per GPU op, worked out once per distinct (kind, name, op, shapes, types, bytes)."""
    cols = [
        step_ops[c].tolist() if c in step_ops.columns else [None] * len(step_ops)
        for c in ("kind", "name", "op_name", "input_dims", "input_types", "bytes")
    ]
    cache: dict[tuple, _Row] = {}
    out = []
    for kind, name, op, dims, types, logical in zip(*cols, strict=True):
        logical = float(logical) if logical is not None else float("nan")
        k = (kind, name if kind != "kernel" else "", op, repr(dims), repr(types), logical)
        hit = cache.get(k)
        if hit is None:
            hit = cache[k] = _row_for(str(kind or "kernel"), str(name or ""), str(op or ""), dims, types, logical)
        out.append(hit)
    return out


def _links(rows: list[_Row]) -> list[list]:
    """Tensor id of every input: ('p', producer position) for the latest earlier output with its element count and
    dtype (each producer at most once per reader, like analyzer.diff.match.flow_edges), else ('x', position, slot):
    a tensor from before the step, the one this kernel read one step earlier."""
    by_key: dict[tuple, list[int]] = {}
    ids: list[list] = []
    for pos, r in enumerate(rows):
        used: set[int] = set()
        mine = []
        for slot, (key, _) in enumerate(r.inputs):
            tid = ("x", pos, slot)
            if key is not None:
                for p in reversed(by_key.get(key, ())):
                    if p not in used:
                        used.add(p)
                        tid = ("p", p)
                        break
            mine.append(tid)
        ids.append(mine)
        if r.ok and r.output is not None:
            by_key.setdefault(r.output[0], []).append(pos)
    return ids


def predict_step(step_ops: pd.DataFrame, gpu: GpuSpec | None) -> pd.DataFrame:
    """Predicted DRAM bytes of every GPU op of ONE step (rows in launch order). See the module doc."""
    n = len(step_ops)
    out = {c: np.full(n, np.nan) for c in COLUMNS[:-1]}
    cap = gpu.cache_bytes if gpu is not None else float("nan")
    if not (cap > 0):
        why = "unknown: GPU not in the peak table" if gpu is None else f"unknown: no cache size for {gpu.name}"
        return _frame(step_ops, out, np.full(n, why, dtype=object))
    rows = _rows(step_ops)
    ids = _links(rows)
    which = "Infinity Cache" if gpu.llc_bytes == gpu.llc_bytes else "L2"
    base = MODEL.format(cap=f"{cap / 2**20:.0f} MiB", why=f"{gpu.name} {which}")
    resident: dict = {}  # tensor id -> (bytes resident right after its last touch, cumulative allocation then)
    alloc = 0.0  # bytes brought into the cache so far
    dirty = 0.0
    res = np.zeros((n, 3))  # read, write, hit
    for _ in range(PASSES):
        for pos, r in enumerate(rows):
            if not r.ok:
                continue
            tids = ids[pos]
            seen: dict = {}
            for tid, (_, size) in zip(tids, r.inputs, strict=True):
                if tid in seen:
                    continue
                hit = resident.get(tid)
                seen[tid] = min(size, hit[0] * math.exp(-(alloc - hit[1]) / cap)) if hit else 0.0
            on_chip = sum(seen.values())
            logical = r.reads + r.writes
            a = _solve_alloc(logical, on_chip, cap)
            x = a / cap
            f = phi(x)
            hits = on_chip * f
            decay = math.exp(-x)
            wb = dirty * (1.0 - decay) + r.writes * (1.0 - f)
            dirty = dirty * decay + r.writes * f
            alloc += a
            res[pos] = (r.reads - hits, wb, hits)
            for tid, (_, size) in zip(tids, r.inputs, strict=True):
                resident[tid] = (size * f, alloc)
            if r.output is not None:
                resident[("p", pos)] = (r.output[1] * f, alloc)
    ok = np.array([r.ok for r in rows], dtype=bool)
    out["dram_read_bytes"][ok] = res[ok, 0]
    out["dram_write_bytes"][ok] = res[ok, 1]
    out["l2_hit_bytes"][ok] = res[ok, 2]
    out["dram_bytes"] = out["dram_read_bytes"] + out["dram_write_bytes"]
    basis = np.array([base + (f"; {r.why}" if r.why else "") if r.ok else r.why for r in rows], dtype=object)
    return _frame(step_ops, out, basis)


def _frame(step_ops: pd.DataFrame, out: dict, basis: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame({c: out[c] for c in COLUMNS[:-1]}, index=step_ops.index)
    df["dram_basis"] = basis
    return df


class StepDram:
    """The model on one steady-state step of a trace: per GPU op (`ops`, index = gpu_ops rows of that step) and
    the step's totals (NaN when any op of the step has no prediction)."""

    def __init__(self, step: int | None, ops: pd.DataFrame, cache_bytes: float):
        self.step = step
        self.ops = ops
        self.cache_bytes = cache_bytes

    def totals(self) -> dict:
        o = self.ops
        known = len(o) > 0 and bool(o["dram_bytes"].notna().all())

        def total(c: str) -> float:
            return float(o[c].sum()) if known else float("nan")

        return {
            "dram_bytes": total("dram_bytes"),
            "dram_read_bytes": total("dram_read_bytes"),
            "dram_write_bytes": total("dram_write_bytes"),
            "l2_hit_bytes": total("l2_hit_bytes"),
            "dram_step": self.step,
            "ops_without_dram": int(o["dram_bytes"].isna().sum()),
        }


def predict_steady(trace, g: pd.DataFrame, used: list[int]) -> StepDram:
    """The model on the steady step whose GPU time is the median of `used` (g: gpu_ops of the used steps)."""
    cap = trace.gpu.cache_bytes if trace.gpu is not None else float("nan")
    if g.empty or not used:
        return StepDram(None, predict_step(g.iloc[0:0], trace.gpu), cap)
    per = g.groupby("step")["dur_us"].sum().reindex(used).fillna(0.0)
    order = np.argsort(per.to_numpy(), kind="stable")
    step = int(per.index[order[(len(order) - 1) // 2]])
    ops = g[g["step"].to_numpy() == step].sort_values("ts_us", kind="stable")
    return StepDram(step, predict_step(ops, trace.gpu), cap)
