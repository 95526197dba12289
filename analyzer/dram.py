"""Predicted DRAM traffic per kernel, in sequence: an L2-aware byte model (docs/COST_MODEL.md, "DRAM model").

The cost model's `bytes` are logical: every tensor a kernel touches counted as if it crossed HBM. On a GPU whose
last-level cache holds tens of MB (H100 50 MiB, H200 60 MiB), part of a tensor an earlier kernel wrote is still on
chip when the next kernel reads it, and part of what a kernel writes is written back to HBM only later, during
another kernel. This module predicts what Nsight Compute counts in sequence (`--cache-control none`):

    predict_step(step_ops, gpu, device) -> DataFrame (step_ops' index): dram_read_bytes, dram_write_bytes,
                                           dram_bytes, l2_hit_bytes, dram_basis

The model, for one steady-state step repeated (the step before left the cache as this one will):

* **Tensors.** Each kernel reads its launching op's input tensors and writes its output (analyzer.opinfo.dataflow
  .tensor_io; an op whose output shape is not known writes `bytes − inputs`). An input comes from the latest
  earlier kernel of the step whose output has its element count and dtype (the diff's data-flow rule); an input
  with no such producer (a weight, the step's input) is the one the same kernel read one step earlier.
* **The cache keeps the last C bytes touched** (least recently used out first; C = the GPU's cache capacity,
  analyzer.gpus) and **a kernel streams its tensors in order**: the byte at fraction f of a tensor is touched when
  the kernel is at fraction f of its traffic (reads + writes). So a byte a reader asks for is still on chip when
  the bytes touched since it was last touched — the rest of the kernel that touched it, the kernels in between,
  the reader's own traffic before it — are fewer than C: the reuse distance, against C. It is linear in f, so
  the hit fraction of every tensor has a closed form. A kernel that walks its blocks last-first (REVERSED) touches
  byte f at fraction 1 − f: the FuseLens gating kernel reads the tail of the tensor just written while it is
  still on chip, and leaves the head on chip for the next reader.
* **A GEMM re-reads operand panels its cache share cannot keep** (`operand_rereads`): its output tiles run in
  waves of as many CTAs as are resident (analyzer.opinfo.tiles reads the tile, the walk and the wave from the
  kernel's name, grid and shapes); a panel an earlier wave read is read again from DRAM when the distinct bytes
  touched in between exceed the cache. The same LRU, applied inside the kernel; the first read of each operand is
  the inter-kernel rule's.
* **Outputs are written back while their kernel runs**: a kernel's DRAM writes are its own output. In a steady
  step every dirty byte is written back once, so the step's writes are exact; per kernel, the dirty tail left in
  L2 at a kernel's end moves to the next one (on the H100, 10-16 MB from the last pointwise kernel to the down
  projection: docs/COST_MODEL.md lists the misses).

No fitted constant: C comes from the datasheet, everything else from the trace's shapes and launch order. Kernels
without a byte estimate are left out (their traffic is unknown: the basis says so and step totals are NaN).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyzer.codes import factorize, object_codes
from analyzer.gpus import GpuSpec
from analyzer.opinfo import dtypes
from analyzer.opinfo.dataflow import tensor_io
from analyzer.opinfo.tensors import Tensor
from analyzer.opinfo.tiles import Schedule, problem, schedule

COLUMNS = ("dram_read_bytes", "dram_write_bytes", "dram_bytes", "l2_hit_bytes", "dram_basis")
MODEL = (
    "predicted DRAM traffic in sequence: an LRU cache of {cap} ({why}) over in-order streams (a read hits where the "
    "bytes touched since it was last touched are fewer); GEMM operand panels re-read where the waves of its tile "
    "walk outgrow the cache; outputs written back by their own kernel"
)
# Kernels that walk their tensors last-first (their byte f at fraction 1 - f of their traffic), and why we know.
REVERSED = {
    "fuselens_glu_gating_kernel": "walks its blocks last-first (kernels/ops/gating.py; docs/KERNELS.md)",
}


def hit_fraction(a: np.ndarray, b: np.ndarray, cap: float) -> np.ndarray:
    """Share of f in [0, 1] with a + b·f < cap: the bytes of a tensor whose reuse distance a + b·f is under the
    cache size (columnar over every read of a step)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        root = (cap - a) / b
    up = np.clip(root, 0.0, 1.0)  # b > 0: f < root
    down = 1.0 - np.clip(root, 0.0, 1.0)  # b < 0: f > root
    flat = np.where(a < cap, 1.0, 0.0)
    return np.where(b > 0, up, np.where(b < 0, down, flat))


MAX_TILES = 1 << 19  # a GEMM with more output tiles is left out of the re-read rule: ≤ ~0.15 s per distinct op


def _ramp_integral(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """∫ g from 0 to x, g(t) = 1 below lo, falling linearly to 0 at hi, 0 above (the share of capacities in
    [lo, hi] larger than a distance t)."""
    x = np.asarray(x, dtype=float)
    span = max(hi - lo, 1e-30)
    mid = np.clip(x, lo, hi) - lo
    return np.minimum(x, lo) + mid - mid * mid / (2 * span)


def ramp_hit_fraction(a: np.ndarray, b: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Share of f in [0, 1] found when the capacity is anywhere in [lo, hi], each equally likely: the mean over f
    of P(a + b·f < capacity). hit_fraction's closed form when lo == hi."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if hi <= lo:
        return hit_fraction(a, b, hi)
    flat = np.clip((hi - a) / (hi - lo), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = (_ramp_integral(a + b, lo, hi) - _ramp_integral(a, lo, hi)) / b
    return np.where(np.abs(b) > 1e-9 * np.maximum(np.abs(a), 1.0), mean, flat)


def tile_walk(s: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """(row tile, column tile) of every output tile in the order the kernel runs them."""
    t = np.arange(s.tiles, dtype=np.int64)
    if s.order == "rows":
        return t % s.rows, t // s.rows
    if s.order == "cols":
        return t // s.cols, t % s.cols
    width = s.group * s.cols  # grouped: bands of `group` rows, row index fastest inside a band
    first = (t // width) * s.group
    size = np.minimum(s.rows - first, s.group)
    return first + (t % width) % size, (t % width) // size


def operand_rereads(s: Schedule, cap: float, copies: int = 1) -> float:
    """DRAM bytes a GEMM reads beyond its operands counted once: panels an earlier wave read and the cache lost.

    Tiles run in waves of `s.wave`. A wave touches the distinct row and column panels its tiles need, and writes
    its tiles (D_w bytes; n_w of them new: not touched by the wave before). A panel that a later wave needs again
    is found in the cache when the distinct bytes touched in between are fewer than `cap`. Every CTA of a wave
    walks K together, so at K slice f that is: the rest of the wave that last read it, the new bytes of every wave
    between, and the new wave up to slice f:  D_prev + Σ n_between + f·(n_now − D_prev + D_next − n_next), where
    next = prev + 1 (for consecutive waves, (1 − f)·D_prev + f·D_now). Linear in f: `hit_fraction` gives the share
    found. A panel that leaves and comes back between the two waves is counted twice (an upper bound). `copies`:
    the cache keeps a panel that CTAs on every SM read once per L2 partition (GpuSpec.l2_partitions), so each
    panel byte takes that many bytes of it; a tile's output, written by one SM, takes one."""
    if s.tiles > MAX_TILES or s.tiles <= s.wave:
        return 0.0
    i, j = tile_walk(s)
    w = np.arange(s.tiles, dtype=np.int64) // s.wave
    n_w = int(w[-1]) + 1
    whole = np.bincount(w, minlength=n_w) * float(s.tile_out_bytes)  # D_w: outputs, then each panel type's bytes
    new = whole.copy()  # n_w
    uses = []
    for idx, size in ((i, s.row_panel_bytes), (j, s.col_panel_bytes)):
        pw = np.unique(idx * n_w + w)  # (panel, wave) pairs, sorted by panel then wave
        panel, wave = pw // n_w, pw % n_w
        again = np.r_[False, panel[1:] == panel[:-1]]
        last = np.r_[-2, wave[:-1]]  # the wave that read this panel before (same panel where `again`)
        whole += np.bincount(wave, minlength=n_w) * size
        new += np.bincount(wave[~(again & (last == wave - 1))], minlength=n_w) * size
        uses.append((wave[again], last[again], size))
    cum_new = np.concatenate([[0.0], np.cumsum(new)])
    total = 0.0
    for now, prev, size in uses:
        nxt = prev + 1
        a = whole[prev] + cum_new[now] - cum_new[nxt]
        b = new[now] - whole[prev] + whole[nxt] - new[nxt]
        total += float(size * (len(now) - ramp_hit_fraction(a, b, cap / copies, cap).sum()))
    return total


def _key(t: Tensor) -> tuple[int, str | None]:
    return (t.numel, t.dtype)


class _Row:
    """What the model needs of one GPU op: logical reads/writes and the tensors behind them."""

    __slots__ = ("ok", "reads", "writes", "inputs", "output", "why", "reversed", "rereads")

    def __init__(self, ok, reads=0.0, writes=0.0, inputs=(), output=None, why="", reversed=False, rereads=0.0):
        self.ok = ok
        self.rereads = rereads  # GEMM operand bytes read again from DRAM (operand_rereads)
        self.reversed = reversed  # walks its tensors last-first (REVERSED)
        self.reads = reads  # logical bytes read
        self.writes = writes  # logical bytes written
        self.inputs = inputs  # ((key or None, bytes), ...): key None = not linkable
        self.output = output  # (key, bytes) or None
        self.why = why


class _Ctx:
    """What the rows of one predict_step call share: the cache and the device the kernels ran on."""

    __slots__ = ("cap", "device", "copies")

    def __init__(self, cap: float, device: dict | None, copies: int = 1):
        self.cap = cap
        self.device = device
        self.copies = copies  # L2 partitions holding a line that SMs on both sides read


def _gemm_rereads(name: str, op: str, dims, types, launch: tuple, ctx: _Ctx | None) -> tuple[float, str]:
    """(operand bytes a GEMM reads again, the basis text): operand_rereads over the kernel's tile walk."""
    g = problem(op, dims, types)
    sched = "GEMM problem not read from its shapes" if g is None else schedule(name, *launch, g, ctx and ctx.device)
    if not isinstance(sched, str) and sched.tiles > MAX_TILES:
        sched = f"{sched.tiles:,} output tiles, more than the re-read rule walks ({MAX_TILES:,})"
    if ctx is None or isinstance(sched, str):
        why = sched if isinstance(sched, str) else "no device"
        return 0.0, f"GEMM operands counted once ({why}): a lower bound where its tile walk re-reads them"
    rr = operand_rereads(sched, ctx.cap, ctx.copies)
    share = f"between 1/{ctx.copies} of it and all: {ctx.copies} L2 partitions" if ctx.copies > 1 else "all of it"
    return rr, (
        f"GEMM operands read once plus {rr / 1e6:.1f} MB re-read by its tile walk ({sched.how}; a panel is "
        f"re-read when the waves in between touched more than the cache serving it, {share})"
    )


def _row_for(
    kind: str, name: str, op: str, dims, types, logical: float, category: str = "", launch=(), ctx=None
) -> _Row:
    row = _row_without_tensors(kind, name, logical)
    if row is not None:
        return row
    io = tensor_io(op, dims, types) if op else None
    if io is None or not io.inputs:
        return _Row(True, reads=logical, why="no tensors recorded: all bytes taken as reads of unlinked data")
    ins, total_in = _input_bytes(io, logical)
    writes, why = _written_bytes(io, op, ins, total_in, logical)
    out = _output_of(io, writes)
    if name in REVERSED:
        why = "; ".join(x for x in (why, f"{name} {REVERSED[name]}") if x)
    rereads = 0.0
    if category == "gemm":
        rereads, note = _gemm_rereads(name, op, dims, types, launch, ctx)
        why = "; ".join(x for x in (why, note) if x)
    return _Row(
        True,
        reads=total_in,
        writes=writes,
        inputs=tuple(ins),
        output=out,
        why=why,
        reversed=name in REVERSED,
        rereads=rereads,
    )


def _row_without_tensors(kind: str, name: str, logical: float) -> _Row | None:
    """The row of an op whose traffic needs no tensor: no estimate, counted elsewhere, memset or memcpy; else None."""
    if not (logical >= 0):  # NaN: no estimate
        return _Row(False, why="unknown: no byte estimate for this kernel (see cost_basis)")
    if logical == 0 and kind == "kernel":  # a split-K reduce counted in its GEMM call's estimate (cost_basis 'counted')
        return _Row(True, why="its traffic is counted with its op call's main kernel")
    if kind in ("memset", "memcpy"):
        if kind == "memcpy" and "DtoH" in name:
            return _Row(True, reads=logical)
        if kind == "memcpy" and ("DtoD" in name or "PtoP" in name):  # its logical bytes count both directions
            return _Row(True, reads=logical / 2, writes=logical / 2)
        return _Row(True, writes=logical)  # memset, HtoD: bytes written into device memory
    return None


def _input_bytes(io, logical: float) -> tuple[list, float]:
    """([(key or None, bytes)] per input, their total): key None = not linkable; never more than the estimate."""
    fresh = {id(t) for t in io.linkable}
    ins = [(_key(t) if id(t) in fresh else None, t.nbytes) for t in io.inputs]
    ins = [(k, b if b == b else 0.0) for k, b in ins]
    total_in = sum(b for _, b in ins)
    if total_in > logical > 0:  # a stride-0 (broadcast) input stores fewer bytes than its shape: scale to the estimate
        ins = [(k, b * logical / total_in) for k, b in ins]
        total_in = logical
    return ins, total_in


def _written_bytes(io, op: str, ins: list, total_in: float, logical: float) -> tuple[float, str]:
    """(bytes written, why): the estimate less the reads, at least the whole output."""
    writes = max(logical - total_in, 0.0)
    why = ""
    must = io.output.nbytes if io.output is not None else float("nan")
    if must == must and writes < must:
        # a kernel writes its whole output whatever the estimate's split says (a GEMM reading an expanded operand,
        # a broadcast input scaled down above): never predicted below it
        writes = must
        why = "output written in full"
    if writes == 0 and op.startswith("triton_poi_") and len(ins) >= 2 and len({_key(t) for t in io.inputs}) == 1:
        # Inductor stored its result over one of its same-sized args (in_out_ptr): the cost model counts the args
        # once (a lower bound, docs/COST_MODEL.md); the cache sees that buffer written as well
        writes = ins[0][1]
        why = "Inductor in/out buffer: one same-sized arg taken as written too"
    return writes, why


def _output_of(io, writes: float):
    """(key, bytes) of the tensor the op writes, or None when nothing links to it."""
    if io.output is not None and io.output.dtype and writes > 0:
        return (_key(io.output), writes)
    if writes > 0:
        dtype = next((t.dtype for t in io.inputs if t.dtype), None)
        size = dtypes.itemsize(dtype)
        if size and writes % size == 0:  # custom / Inductor ops: an output of `bytes − inputs` in the inputs' dtype
            return ((int(writes // size), dtype), writes)
    return None


LAUNCH = ("grid", "block", "shared_memory_bytes", "registers_per_thread")


def _distinct_rows(step_ops: pd.DataFrame, ctx: _Ctx | None = None) -> tuple[np.ndarray, list[_Row]]:
    """(code per GPU op, one _Row per code): worked out once per distinct (kind, name, op, shapes, types, bytes);
    shape columns keyed by object identity first (analyzer.codes), never one Python object per row."""
    n = len(step_ops)
    key = np.zeros(n, dtype=np.int64)
    bound = 1  # key < bound: re-coded densely before a product would pass int64 (a 1,575-op step of the 1 GiB
    # benchmark trace reaches 1.7e18 over these ten columns; past 9.2e18 keys would wrap and merge kernels)
    for c in ("kind", "name", "op_name", "input_dims", "input_types", "bytes", *LAUNCH):
        if c not in step_ops.columns:
            continue
        if c in ("bytes", "kind", "name", "op_name", *LAUNCH):  # numbers and text: factorized as they are
            vals = step_ops[c].to_numpy(dtype=float if c == "bytes" else object)
            codes, uniq = factorize(vals)
            size = len(uniq)
        else:
            codes, first = object_codes(step_ops[c].to_numpy(dtype=object))
            size = len(first)
        if bound * max(size, 1) >= 2**62:
            key, distinct = pd.factorize(key)
            key, bound = key.astype(np.int64), max(len(distinct), 1)
        key = key * max(size, 1) + codes
        bound *= max(size, 1)
    codes, uniq = pd.factorize(key)
    first = np.full(len(uniq), -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(n - 1, -1, -1)
    get = {
        c: step_ops[c].to_numpy(dtype=object) if c in step_ops.columns else np.full(n, None, dtype=object)
        for c in ("kind", "name", "op_name", "input_dims", "input_types", "category", *LAUNCH)
    }
    logical = step_ops["bytes"].to_numpy(dtype=float) if "bytes" in step_ops.columns else np.full(n, np.nan)
    rows = [
        _row_for(
            str(get["kind"][i] or "kernel"),
            str(get["name"][i] or ""),
            str(get["op_name"][i] or ""),
            get["input_dims"][i],
            get["input_types"][i],
            float(logical[i]),
            str(get["category"][i] or ""),
            tuple(get[c][i] for c in LAUNCH),
            ctx,
        )
        for i in first.tolist()
    ]
    return codes.astype(np.int64), rows


def _reads(codes: np.ndarray, rows: list[_Row]) -> dict[str, np.ndarray]:
    """Every tensor read of the step, flattened (reader position, bytes, id of the last kernel that touched it,
    steps back), in launch order. Linking: an input comes from the latest earlier output with its element count and
    dtype, each producer at most once per reader (a reader's k-th input of one key takes the k-th latest, like
    analyzer.diff.flow.flow_edges); else it is a tensor from before the step, the one this kernel read a step
    earlier. The last toucher of a tensor is its producer or its previous reader. All of it sorts and searches."""
    n = len(codes)
    key_ids: dict = {}
    d_ok = np.array([r.ok for r in rows], dtype=bool)
    d_nin = np.array([len(r.inputs) if r.ok else 0 for r in rows], dtype=np.int64)
    d_off = np.concatenate([[0], np.cumsum(d_nin)])
    d_in_key = np.array(
        [key_ids.setdefault(k, len(key_ids)) if k is not None else -1 for r in rows if r.ok for k, _ in r.inputs],
        dtype=np.int64,
    )
    d_in_bytes = np.array([b for r in rows if r.ok for _, b in r.inputs], dtype=float)
    d_out_key = np.array(
        [key_ids.setdefault(r.output[0], len(key_ids)) if r.ok and r.output is not None else -1 for r in rows],
        dtype=np.int64,
    )
    pos = np.arange(n, dtype=np.int64)
    nin = d_nin[codes]
    reader = np.repeat(pos, nin)
    slot = np.arange(len(reader), dtype=np.int64) - np.repeat(np.cumsum(nin) - nin, nin)
    flat = np.repeat(d_off[:-1][codes], nin) + slot
    key = d_in_key[flat] if len(flat) else np.zeros(0, dtype=np.int64)
    nbytes = d_in_bytes[flat] if len(flat) else np.zeros(0)
    # producers: outputs sorted by (key, position); an input takes the latest one before its reader, minus its rank
    out_key = d_out_key[codes]
    has_out = (out_key >= 0) & d_ok[codes]
    span = n + 1
    comb_out = np.sort(out_key[has_out] * span + pos[has_out])
    rank = pd.Series(np.ones(len(key), dtype=np.int64)).groupby([reader, key]).cumsum().to_numpy() - 1
    at = np.searchsorted(comb_out, key * span + reader, side="left") - 1 - rank
    linked = (key >= 0) & (at >= 0)
    at_c = np.clip(at, 0, max(len(comb_out) - 1, 0))
    if len(comb_out):
        linked &= comb_out[at_c] // span == key
        producer = np.where(linked, comb_out[at_c] % span, -1)
    else:
        linked &= False
        producer = np.full(len(key), -1, dtype=np.int64)
    # tensor id: the producer's position, or a unique id per (reader, slot) for a tensor from before the step
    tid = np.where(linked, producer, n + np.arange(len(key), dtype=np.int64))
    order = np.lexsort((reader, tid))
    t_sorted, r_sorted = tid[order], reader[order]
    first = np.r_[True, t_sorted[1:] != t_sorted[:-1]] if len(order) else np.zeros(0, dtype=bool)
    prev = np.r_[-1, r_sorted[:-1]] if len(order) else np.zeros(0, dtype=np.int64)
    toucher = np.empty(len(key), dtype=np.int64)
    back = np.zeros(len(key), dtype=np.int64)
    own = np.where(linked[order], producer[order], r_sorted)  # first touch: its producer, or itself a step earlier
    toucher[order] = np.where(first, own, prev)
    back[order] = np.where(first & ~linked[order], 1, 0)
    return {"reader": reader, "bytes": nbytes, "toucher": toucher, "back": back}


def predict_step(step_ops: pd.DataFrame, gpu: GpuSpec | None, device: dict | None = None) -> pd.DataFrame:
    """Predicted DRAM bytes of every GPU op of ONE step (rows in launch order). See the module doc. device: the
    trace's deviceProperties entry the ops ran on (SM count and occupancy limits, for GEMM tile waves)."""
    n = len(step_ops)
    out = {c: np.full(n, np.nan) for c in COLUMNS[:-1]}
    cap = gpu.cache_bytes if gpu is not None else float("nan")
    if not (cap > 0):
        why = "unknown: GPU not in the peak table" if gpu is None else f"unknown: no cache size for {gpu.name}"
        return _frame(step_ops, out, np.full(n, why, dtype=object))
    codes, rows = _distinct_rows(step_ops, _Ctx(cap, device, gpu.l2_partitions))
    which = "Infinity Cache" if gpu.llc_bytes == gpu.llc_bytes else "L2"
    base = MODEL.format(cap=f"{cap / 2**20:.0f} MiB", why=f"{gpu.name} {which}")
    ok = np.array([r.ok for r in rows], dtype=bool)[codes]
    reads = np.array([r.reads if r.ok else 0.0 for r in rows])[codes]
    writes = np.array([r.writes if r.ok else 0.0 for r in rows])[codes]
    rev = np.array([r.reversed for r in rows], dtype=bool)[codes]
    rereads = np.array([r.rereads if r.ok else 0.0 for r in rows])[codes]
    touched = reads + writes  # bytes each kernel streams (0 for ops without an estimate: left out)
    start = np.concatenate([[0.0], np.cumsum(touched)[:-1]])  # where each kernel's stream begins in the step
    period = float(touched.sum())  # the same kernel one step later is this far on
    rd = _reads(codes, rows)
    k, q = rd["reader"], rd["toucher"]
    # distance(f) = [start_k + g_k(f)·T_k] − [start_q + g_q(f)·T_q − back·period], g(f) = f or 1 − f (REVERSED)
    a = start[k] - start[q] + rd["back"] * period
    a = a + np.where(rev[k], touched[k], 0.0) - np.where(rev[q], touched[q], 0.0)
    b = np.where(rev[k], -touched[k], touched[k]) - np.where(rev[q], -touched[q], touched[q])
    hits = rd["bytes"] * hit_fraction(a, b, cap)
    hit_bytes = np.bincount(k, weights=hits, minlength=n) if len(k) else np.zeros(n)
    out["dram_read_bytes"] = np.where(ok, reads - hit_bytes + rereads, np.nan)
    out["dram_write_bytes"] = np.where(ok, writes, np.nan)
    out["l2_hit_bytes"] = np.where(ok, hit_bytes, np.nan)
    out["dram_bytes"] = out["dram_read_bytes"] + out["dram_write_bytes"]
    missing = int((~ok).sum())
    if missing:  # their traffic is not in the reuse distances: hits can be overstated
        base += f"; {missing} GPU ops of the step have no byte estimate and are not in the reuse distances"
    d_basis = np.array([base + (f"; {r.why}" if r.why else "") if r.ok else r.why for r in rows], dtype=object)
    return _frame(step_ops, out, d_basis[codes] if n else np.zeros(0, dtype=object))


def _frame(step_ops: pd.DataFrame, out: dict, basis: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame({c: out[c] for c in COLUMNS[:-1]}, index=step_ops.index)
    # object dtype: pandas 3 would turn a text column into Arrow strings, ~0.5 s per 300k rows
    df["dram_basis"] = pd.Series(basis, index=step_ops.index, dtype=object)
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


def device_of(trace) -> dict | None:
    """The deviceProperties entry the trace's GPU spec was looked up from (analyzer.gpus.lookup reads the first)."""
    props = getattr(getattr(trace, "meta", None), "device_properties", None)
    return props[0] if props else None


def predict_steady(trace, g: pd.DataFrame, used: list[int]) -> StepDram:
    """The model on the steady step whose GPU time is the median of `used` (g: gpu_ops of the used steps)."""
    cap = trace.gpu.cache_bytes if trace.gpu is not None else float("nan")
    if g.empty or not used:
        return StepDram(None, predict_step(g.iloc[0:0], trace.gpu, device_of(trace)), cap)
    per = g.groupby("step")["dur_us"].sum().reindex(used).fillna(0.0)
    order = np.argsort(per.to_numpy(), kind="stable")
    step = int(per.index[order[(len(order) - 1) // 2]])
    ops = g[g["step"].to_numpy() == step].sort_values("ts_us", kind="stable")
    return StepDram(step, predict_step(ops, trace.gpu, device_of(trace)), cap)
