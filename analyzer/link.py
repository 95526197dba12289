"""Kernel → runtime launch → innermost CPU op, all vectorised.

Chain (per GPU op):
1. ``correlation`` → the runtime/driver call that launched it (cudaLaunchKernel, cuLaunchKernelEx, hipLaunchKernel,
   cudaMemcpyAsync, cudaGraphLaunch …). Correlation args are enough; flow events (``ac2g``, legacy ``async``) are
   redundant with them and are not read. Kernels without their own External id (Qwen H100: 436 of 1,465) get
   the launch's.
2. External id → the CPU op. Kineto stamps GPU activity with the External id of the op on top of the profiler's
   correlation stack at launch time, i.e. the INNERMOST op. A user_annotation (record_function) can be that
   innermost range: then the op is unknown rather than an outer op whose shapes would be wrong.
3. A launch with no External id, one naming no op (2022 traces stamp the correlation id there: HTA's
   trace_diff pair) or one shared by several ops: the innermost cpu_op on the launch's pid/tid whose
   [ts, end] encloses the launch, by interval search (``innermost_enclosing``). On four real traces with their
   External ids stripped, this finds exactly the op the External id named (tests/analyzer/test_link.py).
4. A correlation that fans out to several GPU ops (a CUDA-graph replay: one cudaGraphLaunch, hundreds of
   kernels) keeps every kernel; they carry the launching op's name but ``shapes_known = False``: that op's
   shapes are not the kernels' shapes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyzer.codes import factorize


def link(gpu: pd.DataFrame, launches: pd.DataFrame, cpu: pd.DataFrame, annotation_ext_ids: np.ndarray) -> pd.DataFrame:
    """Return gpu with launch_name, launch_ts_us, launch_latency_us, op_index, op_name, input_*, shapes_known.

    gpu/launches/cpu use the schema's column names; cpu's index is the op_index written to gpu.
    """
    out = gpu.copy(deep=False)  # copy-on-write (pandas 3): only new columns are written, nothing is copied
    ln = _launch_of(gpu, launches)
    out["launch_name"] = pd.Series(ln["name"], dtype=object, index=out.index)
    out["launch_ts_us"] = ln["ts"]
    out["launch_latency_us"] = out["ts_us"].to_numpy() - ln["ts"]
    ext = gpu["external_id"].to_numpy().copy()
    ext = np.where(ext >= 0, ext, ln["ext"])
    out["external_id"] = ext
    op_index = _op_of(cpu, ext, ln, annotation_ext_ids)
    out["op_index"] = op_index
    has_op = op_index >= 0
    cols = _op_columns(cpu, op_index, has_op)
    replay = _replays(gpu, ln["name"])
    for c in ("input_dims", "input_types", "input_strides", "concrete_inputs"):
        cols[c][replay] = None
    for c, v in cols.items():
        out[c] = pd.Series(v, dtype=object, index=out.index)
    out["shapes_known"] = has_op & ~replay & np.not_equal(cols["input_dims"], None)
    out["graph_replay"] = replay
    return out


def _launch_of(gpu: pd.DataFrame, launches: pd.DataFrame) -> dict[str, np.ndarray]:
    """1. correlation → launch (first launch with that correlation; duplicates would be a broken trace): per GPU op
    its launch's name, ts, external id, pid and tid, and whether it has one ('has')."""
    n = len(gpu)
    li = _lookup(launches["correlation"].to_numpy(), gpu["correlation"].to_numpy())
    has_launch = li >= 0
    ln = {
        "has": has_launch,
        "name": np.full(n, "", dtype=object),
        "ts": np.full(n, np.nan),
        "ext": np.full(n, -1, dtype=np.int64),
        "pid": np.full(n, -1, dtype=np.int64),
        "tid": np.full(n, -1, dtype=np.int64),
    }
    if has_launch.any():
        sel = li[has_launch]
        ln["name"][has_launch] = launches["name"].to_numpy(dtype=object)[sel]
        ln["ts"][has_launch] = launches["ts_us"].to_numpy()[sel]
        ln["ext"][has_launch] = launches["external_id"].to_numpy()[sel]
        ln["pid"][has_launch] = launches["pid"].to_numpy()[sel]
        ln["tid"][has_launch] = launches["tid"].to_numpy()[sel]
    return ln


def _op_of(cpu: pd.DataFrame, ext: np.ndarray, ln: dict, annotation_ext_ids: np.ndarray) -> np.ndarray:
    """op_index per GPU op (-1: none): steps 2 and 3 of the module doc."""
    # 2. External id → cpu op (ids that appear on exactly one cpu op)
    cpu_ext = cpu["external_id"].to_numpy()
    ext_codes = pd.factorize(cpu_ext)[0]
    unique_ext = (np.bincount(ext_codes)[ext_codes] == 1) & (cpu_ext >= 0)
    pos = _lookup(np.where(unique_ext, cpu_ext, -1), ext)
    op_index = np.where(pos >= 0, cpu.index.to_numpy()[np.maximum(pos, 0)] if len(cpu) else -1, -1).astype(np.int64)

    # 3. no usable External id (none, one naming no op, or one shared by several ops): innermost enclosing op on
    #    the launching thread. Not when the id names a user annotation: that range WAS the innermost.
    known_annotation = _lookup(np.asarray(annotation_ext_ids, dtype=np.int64), ext) >= 0
    need = (op_index < 0) & ln["has"] & ~known_annotation
    if need.any() and len(cpu):
        found = innermost_enclosing(
            cpu["pid"].to_numpy(),
            cpu["tid"].to_numpy(),
            cpu["ts_us"].to_numpy(),
            cpu["end_us"].to_numpy(),
            ln["pid"][need],
            ln["tid"][need],
            ln["ts"][need],
        )
        op_index[need] = np.where(found >= 0, cpu.index.to_numpy()[np.maximum(found, 0)], -1)
    return op_index


def _op_columns(cpu: pd.DataFrame, op_index: np.ndarray, has_op: np.ndarray) -> dict[str, np.ndarray]:
    """The launching op's name and shapes carried to each GPU op (None / '' where it has no op)."""
    n = len(op_index)
    cols = {
        "op_name": np.full(n, "", dtype=object),
        "input_dims": np.full(n, None, dtype=object),
        "input_types": np.full(n, None, dtype=object),
        "input_strides": np.full(n, None, dtype=object),
        "concrete_inputs": np.full(n, None, dtype=object),
    }
    if has_op.any():
        rows = cpu.index.get_indexer(op_index[has_op])
        cols["op_name"][has_op] = cpu["name"].to_numpy(dtype=object)[rows]
        for c in ("input_dims", "input_types", "input_strides", "concrete_inputs"):
            if c != "concrete_inputs" or c in cpu:
                cols[c][has_op] = cpu[c].to_numpy(dtype=object)[rows]
    return cols


def _replays(gpu: pd.DataFrame, launch_name: np.ndarray) -> np.ndarray:
    """4. fan-out: one correlation, several GPU ops → graph replay (or a multi-kernel launch API): shapes unknown."""
    n = len(gpu)
    corr = gpu["correlation"].to_numpy()
    fan_out = np.zeros(n, dtype=bool)
    valid = corr >= 0
    if valid.any():
        codes = pd.factorize(corr[valid])[0]
        fan_out[valid] = np.bincount(codes)[codes] > 1
    codes, names = factorize(launch_name)  # per distinct launch API name (a handful), not per kernel
    graph = np.array([isinstance(u, str) and "GraphLaunch" in u for u in names], dtype=bool)[codes]
    return fan_out | graph


def _lookup(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Position in keys of each query (first occurrence), -1 if absent or query < 0. Vectorised (sort + search)."""
    if len(keys) == 0 or len(queries) == 0:
        return np.full(len(queries), -1, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    at = np.searchsorted(sorted_keys, queries, side="left")
    at_c = np.minimum(at, len(keys) - 1)
    hit = (at < len(keys)) & (sorted_keys[at_c] == queries) & (queries >= 0)
    return np.where(hit, order[at_c], -1).astype(np.int64)


_BLOCK = 16  # positions scanned one by one before the search moves up to block maxima


def _last_reaching(end: np.ndarray, j: np.ndarray, lo: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each query: the largest i in [lo, j] with end[i] >= t, else lo - 1.

    Most answers are a few positions back (the launching op's parent: on the 1 GiB benchmark trace the median is
    2, the 90th percentile 12, of 80k queries), a few are 10^5 back (a step-long op). So: scan the last _BLOCK
    positions, vectorised over the open queries; the rest search the maxima of _BLOCK-sized blocks the same way
    (recursively, each level 16× shorter), then scan inside the block found. Everything stays O(n + queries ·
    16 · levels), in O(n) memory."""
    pos = lo - 1
    open_ = np.arange(len(j))
    for s in range(_BLOCK):
        p = j[open_] - s
        inside = p >= lo[open_]
        hit = inside & (end[np.maximum(p, 0)] >= t[open_])
        pos[open_[hit]] = p[hit]
        open_ = open_[inside & ~hit]
        if not open_.size:
            return pos
    # [lo, j - _BLOCK] is left, and positions j - _BLOCK + 1 .. j are all below t: so in the block holding
    # j - _BLOCK (whose other positions are among those), a block maximum ≥ t can only sit at or before it
    jj, ll, tt = j[open_] - _BLOCK, lo[open_], t[open_]
    n_blocks = -(-len(end) // _BLOCK)
    padded = np.full(n_blocks * _BLOCK, -np.inf)
    padded[: len(end)] = end
    maxima = padded.reshape(n_blocks, _BLOCK).max(axis=1)
    lo_block = ll // _BLOCK
    block = _last_reaching(maxima, jj // _BLOCK, lo_block, tt)
    found = block >= lo_block
    rows, block, tt, jj = open_[found], block[found], tt[found], jj[found]
    top = np.minimum(block * _BLOCK + _BLOCK - 1, jj)
    got = np.full(len(rows), -1, dtype=np.int64)
    for s in range(_BLOCK):  # the block holds an end ≥ t: its last such position
        p = top - s
        hit = (got < 0) & (p >= block * _BLOCK) & (padded[np.maximum(p, 0)] >= tt)
        got[hit] = p[hit]
    pos[rows] = np.where(got >= lo[rows], got, lo[rows] - 1)  # a block can straddle the thread's start
    return pos


def _thread_codes(op_pid, op_tid, q_pid, q_tid) -> tuple[np.ndarray, np.ndarray]:
    """Dense code per (pid, tid) of the ops, and the same code for each query thread (-1 if it has no op).
    Two 1-D factorizations combined (a MultiIndex costs ~0.25 s per million rows)."""
    pid_code, pid_uniq = pd.factorize(op_pid)
    tid_code, tid_uniq = pd.factorize(op_tid)
    n_tid = max(len(tid_uniq), 1)
    code = pid_code.astype(np.int64) * n_tid + tid_code
    qp = pd.Index(pid_uniq).get_indexer(q_pid)
    qt = pd.Index(tid_uniq).get_indexer(q_tid)
    q_code = np.where((qp >= 0) & (qt >= 0), qp.astype(np.int64) * n_tid + qt, -1)
    return code, q_code


def innermost_enclosing(
    op_pid: np.ndarray,
    op_tid: np.ndarray,
    op_start: np.ndarray,
    op_end: np.ndarray,
    q_pid: np.ndarray,
    q_tid: np.ndarray,
    q_ts: np.ndarray,
) -> np.ndarray:
    """For each query (pid, tid, ts): position of the innermost op on that thread with start ≤ ts ≤ end, or -1.

    Ops on one thread nest, so the innermost enclosing op is the LATEST-starting op with start ≤ ts and
    end ≥ ts. Sort ops by (thread, start); for a query, j0 = last op starting at or before ts on its thread;
    the answer is the largest j ≤ j0 (same thread) with end_j ≥ ts. That "previous element ≥ x" search runs for
    all queries at once in `_last_reaching` (a short scan, then block maxima of end).
    """
    nq = len(q_ts)
    result = np.full(nq, -1, dtype=np.int64)
    if nq == 0 or len(op_start) == 0:
        return result
    thread_code, q_code = _thread_codes(op_pid, op_tid, q_pid, q_tid)
    ok_q = (q_code >= 0) & np.isfinite(q_ts)
    if not ok_q.any():
        return result
    keep = np.flatnonzero(np.isin(thread_code, np.unique(q_code[ok_q])))  # only threads that have queries
    start = np.nan_to_num(op_start[keep], nan=np.inf)
    end = np.nan_to_num(op_end[keep], nan=-np.inf)
    code = thread_code[keep]
    order = np.lexsort((-end, start, code))  # by thread, then start; the outer (longer) op first on ties
    s_code, s_start, s_end = code[order], start[order], end[order]
    q_idx = np.flatnonzero(ok_q)
    qc, qt = q_code[q_idx], q_ts[q_idx]
    lo = np.searchsorted(s_code, qc, side="left")
    hi = np.searchsorted(s_code, qc, side="right")
    j = np.empty(len(q_idx), dtype=np.int64)
    for c in np.unique(qc):  # one searchsorted per thread (tens), not per event
        m = qc == c
        a, b = lo[m][0], hi[m][0]
        j[m] = a + np.searchsorted(s_start[a:b], qt[m], side="right") - 1
    # Most launches sit in the latest-started op (j itself encloses t); only the rest need the search.
    hit = (j >= lo) & (s_end[np.maximum(j, 0)] >= qt)
    miss = np.flatnonzero(~hit & (j >= lo))
    pos = j.copy()
    if miss.size:
        pos[miss] = _last_reaching(s_end, j[miss], lo[miss], qt[miss])
    good = pos >= lo
    good &= s_end[np.maximum(pos, 0)] >= qt
    result[q_idx[good]] = keep[order[pos[good]]]
    return result
