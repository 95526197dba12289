"""One run's representative step as an ordered kernel sequence, and the alignment of two such sequences.

Never aligns on raw ts (each run has its own time base): a run is reduced to the ordered list of GPU ops of its
steady-state steps. Steps with the same ordered (kernel, op, shapes) list share a signature; the most common
signature is "the step", and each position's duration is the median over the steps that have it (3 active steps
in our runner's traces, so one slow step never decides a figure).

Two sequences are aligned on kernel keys: GEMMs key on (batch, M, N, K, dtype) from their op's shapes, so cuBLAS vs
CUTLASS vs a Triton template with the same problem still match; everything else keys on (name, op, shapes). The
in-order pairs come from landmarks (kernels occurring once in each run) and windowed longest common subsequences,
O(n) in the step's length (match_blocks; the "matching blocks" comment below has the numbers and why not difflib).
"""

from __future__ import annotations

import bisect
from collections import deque, namedtuple
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analyzer.diff.blocks import match_blocks
from analyzer.errors import DiffError
from analyzer.opinfo import attention, gemm, names
from analyzer.opinfo.dataflow import TensorIO, tensor_io
from analyzer.opinfo.tensors import Tensor, dims_text, read_tensors
from analyzer.summary import shapes_text

# Ranges that wrap a whole step or a whole compiled graph say nothing about one kernel.
_GENERIC_RANGE_PREFIXES = (
    "ProfilerStep#",
    "## Call CompiledFxGraph",
    "Torch-Compiled Region",
    "## ",
    "CompiledFunction",
)


# The columns of rows the matcher and the Diff read one row at a time (RunSeq.records).
RECORD_FIELDS = (
    "name",
    "op_name",
    "kind",
    "category",
    "library",
    "role",
    "dur_us",
    "bytes",
    "op_index",
    "input_dims",
    "gemm",
    "io",
    "op_ops",
    "name_ops",
    "is_gemm",
    "context",
    "node",
    "formula_node",
    "autograd_seq",
    "key",
    "dims",
    "attn",
    "kernel_gbps",
)
_Record = namedtuple("_Record", RECORD_FIELDS)


@dataclass
class RunSeq:
    """One run reduced to its representative step."""

    label: str
    rows: pd.DataFrame  # one row per GPU op of the step, in launch order; columns listed in sequence()
    steps_with_signature: list[int]  # steady steps whose kernel list equals the representative one
    steps_used: list[int]  # all steady steps the Summary used
    step_shown: int  # the step whose kernel list is shown (median GPU time among steps_with_signature)
    notes: list[str] = field(default_factory=list)
    # duration of each GPU op of `rows` (columns, launch order) in each step of steps_with_signature (rows): the
    # per-step figures behind rows' medians, for step-to-step spreads (analyzer.diff.comparability)
    step_durs_us: np.ndarray | None = field(default=None, repr=False, compare=False)
    # the context each of those calls ran in (same shape as step_durs_us): a code for the kernel that ran last before
    # it and whether the GPU idled in between (analyzer.diff.align.kernel_contexts); and code -> its description
    step_context: np.ndarray | None = field(default=None, repr=False, compare=False)
    context_names: dict = field(default_factory=dict, repr=False, compare=False)

    _records: list | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def records(self) -> list:
        """rows as a list of namedtuples (the RECORD_FIELDS columns), built once per run: the matcher reads rows one
        at a time, and DataFrame.itertuples over all 45 columns cost ~1 s per 100k rows, four times per run."""
        if self._records is None:
            cols = [self.rows[f].tolist() for f in RECORD_FIELDS]
            self._records = list(map(_Record._make, zip(*cols, strict=True)))
        return self._records

    @property
    def n_kernels(self) -> int:
        return int((self.rows["kind"] == "kernel").sum())

    @property
    def n_memops(self) -> int:
        return int((self.rows["kind"] != "kernel").sum())


def sequence(summary, label: str, step: int | None = None) -> RunSeq:
    """The representative step of a run (see module doc). step: use this step number instead of the mode."""
    trace = summary.trace
    src = trace.meta.source
    g = trace.gpu_ops
    steps_used = [int(s) for s in (summary.steps_used or [])]
    if step is not None:
        if step not in set(g["step"].tolist()):
            raise DiffError(f"{src}: step {step} has no GPU ops (steps: {sorted(set(g['step'].tolist()) - {-1})})")
        steps = [int(step)]
    else:
        steps = steps_used or sorted(int(s) for s in set(g["step"].tolist()) if s >= 0)
    g_all = g
    g = g[g["step"].isin(steps)]
    if (g["kind"] == "kernel").sum() == 0:
        where = f"steps {', '.join(map(str, steps))}" if steps else "any profiler step"
        raise DiffError(f"{src}: no GPU kernels in {where} (a truncated or CPU-only trace?); nothing to compare")
    notes: list[str] = []
    if g["device"].nunique() > 1:  # one trace per GPU is the Kineto norm; keep the busiest device
        dev = int(g.groupby("device")["dur_us"].sum().idxmax())
        notes.append(f"GPU ops on devices {sorted(g['device'].unique().tolist())}; compared device {dev} only")
        g = g[g["device"] == dev]
    # each step's first kernel ran behind the step before it: contexts are read with that step's ops in view
    near = g_all[g_all["step"].isin(set(steps) | {s - 1 for s in steps}) & g_all["device"].eq(g["device"].iloc[0])]
    context, context_names = kernel_contexts(near)
    g = g.sort_values(["step", "ts_us"], kind="stable")
    replay = g["graph_replay"].to_numpy(dtype=bool) if "graph_replay" in g else np.zeros(len(g), dtype=bool)
    if replay.any():
        # The op around a cudaGraphLaunch (often none) is not what a replayed kernel computes, and all its kernels
        # share it: each replayed kernel is its own call, with no op, so no op's shapes or ops are read into it.
        g = g.copy()
        g.loc[replay, "op_name"] = ""
        g.loc[replay, "op_index"] = -1
        notes.append(
            f"{int(replay.sum())} GPU ops ran as CUDA-graph replays: no op or shapes per kernel, so kernels are "
            "aligned with the other run by name and order, and their bytes are unknown"
        )

    key_text = g["name"].astype(str) + "\x1f" + g["op_name"].astype(str) + "\x1f" + g["input_dims"].map(repr)
    h = pd.util.hash_pandas_object(key_text, index=False).to_numpy(np.uint64)
    step_arr = g["step"].to_numpy()
    starts = np.flatnonzero(np.r_[True, step_arr[1:] != step_arr[:-1]])
    counts = np.diff(np.r_[starts, len(step_arr)])
    pos = np.arange(len(step_arr)) - np.repeat(starts, counts)
    with np.errstate(over="ignore"):  # a wrapping uint64 sum of hash × (position + 1): order-sensitive signature
        sig = np.add.reduceat(h * (pos.astype(np.uint64) + np.uint64(1)), starts)
    sigs = pd.DataFrame({"step": step_arr[starts], "n": counts, "sig": sig})
    mode = sigs.groupby(["n", "sig"]).size().sort_values(ascending=False, kind="stable")
    n_mode, sig_mode = mode.index[0]
    same = sigs[(sigs["n"] == n_mode) & (sigs["sig"] == sig_mode)]["step"].tolist()
    if len(same) < len(sigs):
        notes.append(
            f"kernel lists differ between steps: {len(same)} of {len(sigs)} steady steps share the most common one "
            f"({n_mode} GPU ops); figures per kernel use "
            + ("that step alone" if len(same) == 1 else f"those {len(same)} steps")
        )
    sel = g[g["step"].isin(same)]
    durs = sel["dur_us"].to_numpy().reshape(len(same), n_mode)
    step_time = durs.sum(axis=1)
    shown_i = int(np.argsort(step_time, kind="stable")[(len(same) - 1) // 2])  # the median step by GPU time
    rows = sel.iloc[shown_i * n_mode : (shown_i + 1) * n_mode].copy()
    rows["dur_us"] = np.median(durs, axis=0)
    for col in ("bytes", "flops"):
        vals = sel[col].to_numpy(dtype=float).reshape(len(same), n_mode)
        rows[col] = vals[shown_i]
    rows = rows.reset_index(drop=True)
    rows["pos"] = np.arange(len(rows))
    rows["kernel_gbps"] = _summary_gbps(rows, summary)
    _annotate(rows, trace)
    ctx = context.reindex(sel.index).to_numpy(np.uint64).reshape(len(same), n_mode)
    return RunSeq(
        label, rows, [int(s) for s in same], steps_used or steps, int(same[shown_i]), notes, durs, ctx, context_names
    )


# A kernel queued behind the previous one starts within ~1-3 µs of its end on an H100/H200 (bundled sample traces:
# 3,011 kernels start 0-5 µs after the previous kernel, 168 at 5-10 µs, 1,198 at 10-50 µs, where the GPU waited
# for the host). Past QUEUED_US the GPU idled first, and how long matters more than what ran before: on the H200 the
# plain MLP's 8192x768x8192 GEMM takes 145 µs right behind the previous step and 151 µs after a ~1 ms idle.
QUEUED_US = 5.0
NO_PREDECESSOR = np.uint64(0)  # the context of the first kernel on a device: nothing ran before it
_IDLE_SALT = np.uint64(0x9E3779B97F4A7C15)  # marks "after an idle GPU" in a context code (xor with the predecessor)


def launch_text(ops: pd.DataFrame) -> pd.Series:
    """Each GPU op's kernel name and launch config (grid, block) as one text, indexed like ops: the kernel's identity
    apart from its inputs (kernel_contexts hashes it; analyzer.diff.comparability adds the alignment key)."""
    return ops["name"].astype(str) + "\x1f" + ops["grid"].astype(str) + "\x1f" + ops["block"].astype(str)


def kernel_contexts(ops: pd.DataFrame) -> tuple[pd.Series, dict]:
    """The context every GPU op of one device ran in, indexed like ops, as a code: the kernel that ran last before
    it (its signature: a hash of name, grid and block) and whether it was queued right behind it (at most QUEUED_US
    of idle GPU since that kernel ended, memcpy/memset time in between not counted as idle) or started after an
    idle GPU; NO_PREDECESSOR for the first. Also {code: 'behind K' | 'after an idle GPU, last behind K'}.

    Why: the same kernel doing the same work runs longer or shorter with what ran before it — the predecessor's
    dirty L2 lines are written back during it (an idle gap does not clean them), its power and clock transient, an
    idle GPU ramping up — so two calls are evidence of the GPU's conditions only in the same context
    (analyzer.diff.comparability). In a trace cut from an interleaved session (kernels.lab.interleave) a turn's
    first kernel names the variant's own kernel of its previous turn: the GPU idled (a sync) in between, and that
    side of the context is the same in every variant."""
    if ops.empty:
        return pd.Series(np.zeros(0, dtype=np.uint64), index=ops.index), {}
    o = ops.sort_values("ts_us", kind="stable")
    ts = o["ts_us"].to_numpy(float)
    dur = np.nan_to_num(o["dur_us"].to_numpy(float))
    is_k = o["kind"].eq("kernel").to_numpy()
    # the kernel itself (name and launch config), not the op around it: eager's aten::mm and Inductor's extern mm can
    # launch the same cuBLAS kernel on views of other shapes, and that is the same predecessor
    sig = pd.util.hash_pandas_object(launch_text(o), index=False).to_numpy(np.uint64, copy=True)
    n = len(o)
    idx = np.arange(n)
    last_k = np.maximum.accumulate(np.where(is_k, idx, -1))
    prev_k = np.r_[-1, last_k[:-1]]  # the latest kernel launched before each op (-1: none)
    memop_busy = np.cumsum(np.where(is_k, 0.0, dur))  # memcpy/memset time up to and including each op
    has = prev_k >= 0
    pk = np.where(has, prev_k, 0)
    between = np.r_[0.0, memop_busy[:-1]] - memop_busy[pk]  # memop time after the previous kernel, before this op
    idle = ts - (ts[pk] + dur[pk]) - between
    after_idle = idle > QUEUED_US
    ctx = np.where(after_idle, sig[pk] ^ _IDLE_SALT, sig[pk])
    ctx = np.where(has, ctx, NO_PREDECESSOR).astype(np.uint64)
    ctx[has & (ctx == NO_PREDECESSOR)] = np.uint64(1)  # a hash that lands on the reserved code
    names_by_sig = pd.Series(o["name"].astype(str).to_numpy(), index=sig).groupby(level=0).first()
    codes = pd.DataFrame({"ctx": ctx[has], "sig": sig[pk][has], "idle": after_idle[has]}).drop_duplicates("ctx")
    names = {
        int(c): (
            f"after an idle GPU, last behind {names_by_sig.get(h, '?')}" if i else f"behind {names_by_sig.get(h, '?')}"
        )
        for c, h, i in zip(codes["ctx"], codes["sig"], codes["idle"], strict=True)
    }
    return pd.Series(ctx, index=o.index), names


def _summary_gbps(rows: pd.DataFrame, summary) -> np.ndarray:
    """Each GPU op's achieved GB/s as the Summary's kernel table states it (its (name, op, shapes) row: estimated
    bytes per call over the median call), so a fusion row's GB/s for one kernel is the figure every other surface
    shows for it (NaN where the table has no such row)."""
    k = getattr(summary, "kernels", None)
    if k is None or len(k) == 0:
        return np.full(len(rows), np.nan)
    table = {
        (n, o, sh): g
        for n, o, sh, g in zip(k["name"], k["op_name"], k["shapes"], k["achieved_gbps"].astype(float), strict=True)
    }
    keys = zip(rows["name"], rows["op_name"], map(shapes_text, rows["input_dims"]), strict=True)
    return np.array([table.get(key, np.nan) for key in keys], dtype=float)


def _roles(rows: pd.DataFrame) -> pd.Series:
    """What each GPU op does for the op call that launched it, so tensors and the GEMM problem are not counted once
    per kernel: 'main' (the call's only kernel, or the GEMM kernel of a GEMM call: not the memset or split-K
    reduction cuBLAS launches beside it, e.g. a 'Memset (Device)' under every aten::mm in the Qwen H100 trace),
    'first' / 'last' / 'middle' kernel of a multi-kernel call (first reads the inputs, last writes the output),
    'helper' (a non-GEMM kernel of a GEMM call), 'memop'."""
    is_kernel = rows["kind"].eq("kernel")
    call = rows["op_index"].where(rows["op_index"] >= 0, -1 - rows["pos"])  # no op: a call of its own
    k = rows.assign(_call=call, _k=is_kernel.astype(int), _g=(is_kernel & rows["category"].eq("gemm")).astype(int))
    n_k = k.groupby("_call")["_k"].transform("sum")
    has_gemm = k.groupby("_call")["_g"].transform("max").astype(bool)
    # of several GEMM-category kernels in one call (cuBLASLt split-K: the GEMM, then splitKreduce_kernel) the longest
    # does the GEMM; the others are helpers, so M, N, K and FLOPs are counted once per call
    gemm_dur = rows["dur_us"].where(is_kernel & rows["category"].eq("gemm"))
    is_longest = gemm_dur.eq(gemm_dur.groupby(call).transform("max")) & gemm_dur.notna()
    is_longest &= ~is_longest.groupby(call).cumsum().gt(1)  # ties: the first
    kr = k[is_kernel].groupby("_call").cumcount().reindex(rows.index)
    role = np.where(
        ~is_kernel,
        "memop",
        np.where(
            has_gemm,
            np.where(is_longest, "main", "helper"),
            np.where(n_k == 1, "main", np.where(kr == 0, "first", np.where(kr == n_k - 1, "last", "middle"))),
        ),
    )
    return pd.Series(role, index=rows.index)


def _annotate(rows: pd.DataFrame, trace) -> None:
    """Per-row facts the matcher needs: GEMM problem, tensors, op sets by source, alignment key.

    Worked out once per distinct (name, op, shapes, types, role, ops, category, kind): a step of 100k GPU ops repeats
    a few hundred distinct kernels (the 19k-op V100 step: ~1,100), and each row is then one dict look-up."""
    roles = _roles(rows)
    dims_col = rows["input_dims"].tolist()
    types_col = rows["input_types"].tolist()
    concrete_col = rows["concrete_inputs"].tolist() if "concrete_inputs" in rows else [None] * len(rows)
    strides_col = rows["input_strides"].tolist() if "input_strides" in rows else [None] * len(rows)
    cols = zip(
        rows["name"].tolist(),
        rows["op_name"].tolist(),
        map(repr, dims_col),
        map(repr, types_col),
        map(repr, concrete_col),
        map(repr, strides_col),
        roles.tolist(),
        rows["ops"].tolist(),
        rows["category"].tolist(),
        rows["kind"].tolist(),
        range(len(rows)),
        strict=True,
    )
    cache: dict[tuple, tuple] = {}
    facts = []
    for *k, i in cols:
        k = tuple(k)
        hit = cache.get(k)
        if hit is None:
            hit = cache[k] = _row_facts(*k[:2], dims_col[i], types_col[i], concrete_col[i], strides_col[i], *k[6:])
        facts.append(hit)
    rows["role"] = roles
    for n, col in enumerate(("gemm", "io", "op_ops", "name_ops", "is_gemm", "key", "dims", "attn")):
        rows[col] = [f[n] for f in facts]
    rows["io"] = _concat_dtypes(rows["io"].tolist())
    rows["context"] = _enclosing_ranges(rows, trace)
    rows["node"] = _autograd_nodes(rows, trace)
    rows["formula_node"] = _formula_nodes(rows["node"].tolist(), trace)
    rows["autograd_seq"] = _autograd_seqs(rows, trace)


def _concat_dtypes(ios: list, lookback: int = 8) -> list:
    """A cat/stack's tensors have no recorded dtype ('TensorList'): take it from the latest earlier kernel (within
    `lookback`) whose output has the element count of one of its inputs (RoPE's cat reads the neg kernel's
    output), so the cat's output can be followed and sized like any other."""
    out = list(ios)
    for i, io in enumerate(ios):
        if io.output is None or io.output.dtype is not None or not io.inputs or any(t.dtype for t in io.inputs):
            continue
        sizes = {t.numel for t in io.inputs}
        for p in range(i - 1, max(-1, i - lookback - 1), -1):
            src = ios[p].output
            if src is not None and src.dtype and src.numel in sizes:
                dt = src.dtype
                out[i] = TensorIO(tuple(Tensor(t.shape, dt) for t in io.inputs), Tensor(io.output.shape, dt), io.fresh)
                break
    return out


def _row_facts(name, op, dims, types, concrete, strides, role: str, ops, category, kind) -> tuple:
    """(gemm, io, op_ops, name_ops, is_gemm, key, dims, attn) of one GPU op (see _annotate); dims is dims_text of
    its op's input shapes; attn the attention call of an SDPA-family op (analyzer.opinfo.attention) or None.
    name_ops: the kernel name's ops as analyzer.opinfo.classify decoded them (the one decoder)."""
    op = op or ""
    g = gemm.gemm_problem(op, dims, types) if role == "main" else None
    io = (
        tensor_io(op, dims, types, concrete, strides)
        if op and role in ("main", "first", "last")
        else TensorIO((), None)
    )
    attn = None
    if role in ("main", "first", "last") and attention.is_attention_op(op):
        attn = attention.attention_problem(op, read_tensors(dims, types), concrete, name)
    if role == "first":
        io = TensorIO(io.inputs, None)
    elif role == "last":
        io = TensorIO((), io.output)
    if ops and role not in ("memop", "helper"):
        no = frozenset().union(*(names.canonical_ops(o) for o in str(ops).split("+") if o))
    else:
        no = frozenset()
    # ops from the launching op: an aten op's own name, or words of an autograd Function / custom op name
    if role in ("memop", "helper"):
        oo = frozenset()  # a memset under aten::mm does not compute an mm
    elif op == name and gemm.is_template(op):  # a template's name also lists its inputs' producers: the
        oo = no  # classifier's answer from its buffers (classify.template_ops) is the evidence, not the name again
    elif names.is_inductor_name(op):
        oo = names.inductor_ops(op)
    else:
        oo = names.canonical_ops(op) if op.startswith("aten::") else names.text_ops(op)
    shapes = dims_text(dims)
    if g is not None:
        key = g.key
    elif attn is not None:  # the same attention call whatever else its op records (a compiled graph's extra args)
        # KV heads left out: the same GQA attention is called with 4 KV heads (SDPA's enable_gqa) or with K and V
        # expanded to the 16 query heads (a compiled graph's repeat_kv view): the same kernel and FLOPs
        key = ("a", name, op, attn.batch, attn.heads, attn.q_len, attn.kv_len, attn.head_dim, attn.v_head_dim,
               attn.dtype, attn.backward)  # fmt: skip
    elif role == "memop":  # a workspace memset pairs with its twin whatever the op's out= argument
        key = ("m", name, op)
    else:
        key = ("k", name, op, shapes)
    return g, io, oo, no, g is not None or (category == "gemm" and kind == "kernel"), key, shapes, attn


def _containing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray, innermost: bool):
    """Intervals [start, end] of one thread that contain each time in t (NaN contains nothing, is in nothing).

    innermost: an array of interval indices, the one with the latest start (ties: the first given), -1 for none.
    Else: for each time, the array of all containing intervals ordered by start (ties: as given).
    Vectorised binary lifting over a sparse table of maximum ends — log2(n) NumPy passes instead of one pass over
    all intervals per kernel (5k autograd nodes × 100k kernels before)."""
    ok = np.flatnonzero(~(np.isnan(starts) | np.isnan(ends)))
    order = ok[np.lexsort((-ok, starts[ok]))]  # start ascending; ties: the first given last, so it is found first
    s, e = starts[order], ends[order]
    table = [e]
    while (1 << len(table)) <= len(e):
        prev, w = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-w], prev[w:]))  # max of e[i : i + 2w]
    live = np.flatnonzero(~np.isnan(t))
    hi = np.full(len(t), 0, dtype=np.int64)
    hi[live] = np.searchsorted(s, t[live], side="right")  # intervals [0, hi) start at or before t
    found: list[tuple[np.ndarray, np.ndarray]] = []
    while len(live):
        cur = hi[live].copy()
        tq = t[live]
        for p in range(len(table) - 1, -1, -1):  # skip back over blocks whose ends all fall before t
            cand = cur - (1 << p)
            can = cand >= 0
            blk = np.full(len(cur), np.inf)
            blk[can] = table[p][cand[can]]
            move = can & (blk < tq)
            cur[move] = cand[move]
        j = cur - 1
        hit = j >= 0
        hit[hit] = e[j[hit]] >= tq[hit]
        found.append((live[hit], j[hit]))
        if innermost:
            break
        hi[live[hit]] = j[hit]
        live = live[hit]
    if innermost:
        out = np.full(len(t), -1, dtype=np.int64)
        for q, j in found:
            out[q] = order[j]
        return out
    per: list[list[int]] = [[] for _ in range(len(t))]
    for q, j in reversed(found):  # outermost first
        for qq, jj in zip(q.tolist(), order[j].tolist(), strict=True):
            per[qq].append(jj)
    for x in per:
        if len(x) > 1:
            x.sort(key=lambda k: (starts[k], k))  # equal starts: as given (the lifting found them the other way)
    return [np.asarray(x, dtype=np.int64) for x in per]


def _autograd_nodes(rows: pd.DataFrame, trace) -> list[int]:
    """cpu_ops row of the 'autograd::engine::evaluate_function: …Backward0' call around each kernel's op (-1: none):
    the innermost one (latest start) on the op's thread."""
    cpu = trace.cpu_ops
    out = np.full(len(rows), -1, dtype=np.int64)
    if cpu is None or len(cpu) == 0:
        return out.tolist()
    is_ev = cpu["name"].astype(str).str.startswith("autograd::engine::evaluate_function").to_numpy()
    if not is_ev.any():
        return out.tolist()
    if not cpu.index.is_unique:  # op_index is a row label of cpu_ops: unique by construction (RangeIndex)
        cpu = cpu[~cpu.index.duplicated()]
        is_ev = cpu["name"].astype(str).str.startswith("autograd::engine::evaluate_function").to_numpy()
    at = cpu.index.get_indexer(rows["op_index"].to_numpy())  # -1: no op, or not in cpu_ops
    at[rows["op_index"].to_numpy() < 0] = -1
    has = np.flatnonzero(at >= 0)
    cpu_tid = cpu["tid"].to_numpy()
    cpu_ts = cpu["ts_us"].to_numpy(dtype=float)
    cpu_end = cpu["end_us"].to_numpy(dtype=float)
    labels = cpu.index.to_numpy()
    q_tid, q_ts = cpu_tid[at[has]], cpu_ts[at[has]]
    for tid in np.unique(cpu_tid[is_ev]):
        ev = np.flatnonzero(is_ev & (cpu_tid == tid))
        mine = np.flatnonzero(q_tid == tid)
        if len(mine) == 0:
            continue
        inner = _containing(cpu_ts[ev], cpu_end[ev], q_ts[mine], innermost=True)
        got = inner >= 0
        out[has[mine[got]]] = labels[ev[inner[got]]]
    return out.tolist()


def _formula_nodes(nodes: list[int], trace) -> list[int]:
    """Each row's autograd node where that node runs one aten op's derivative formula (names.is_formula_node), else
    -1: the op calls of such a node compute separate gradients; a compiled graph's or a custom op's backward node
    runs kernels that feed each other."""
    cpu = trace.cpu_ops
    known = {n for n in nodes if n >= 0}
    if not known or cpu is None:
        return [-1] * len(nodes)
    if not cpu.index.is_unique:
        cpu = cpu[~cpu.index.duplicated()]
    names_of = cpu["name"].reindex(sorted(known)).astype(str)
    formula = {n for n, text in names_of.items() if names.is_formula_node(text)}
    return [n if n in formula else -1 for n in nodes]


def _autograd_seqs(rows: pd.DataFrame, trace) -> list[int]:
    """Each row's autograd sequence number (-1: none): its forward op's for a kernel outside the backward, its
    formula node's for a kernel of one (MulBackward0 carries the sequence number of the aten::mul it
    differentiates), so a backward kernel finds the forward op whose saved tensors it reads (analyzer.diff.saved)."""
    cpu = trace.cpu_ops
    out = np.full(len(rows), -1, dtype=np.int64)
    if cpu is None or len(cpu) == 0 or "sequence_number" not in cpu:
        return out.tolist()
    if not cpu.index.is_unique:
        cpu = cpu[~cpu.index.duplicated()]
    seq = cpu["sequence_number"].to_numpy(dtype=np.int64)
    node = rows["formula_node"].to_numpy(dtype=np.int64)
    own = rows["op_index"].to_numpy(dtype=np.int64)
    key = np.where(node >= 0, node, np.where(rows["node"].to_numpy(dtype=np.int64) < 0, own, -1))
    at = cpu.index.get_indexer(key)
    got = (key >= 0) & (at >= 0)
    out[got] = seq[at[got]]
    return out.tolist()


_RANGE_OPS = ("Optimizer.step#", "Optimizer.zero_grad#")  # record_function ranges that old traces list as operators


def _enclosing_ranges(rows: pd.DataFrame, trace) -> list[tuple[str, ...]]:
    """Names of the CPU record_function ranges that enclose each kernel's launch (innermost last), generic step /
    compiled-graph wrappers dropped. A FuseLens or user kernel launched under record_function('fuselens::geglu')
    is named by that range even when its own name says nothing."""
    ann = trace.annotations
    launches = trace.launches
    empty: list[tuple[str, ...]] = [()] * len(rows)
    if ann is not None and len(ann):
        ann = ann[~ann["on_gpu"].astype(bool)]
    # torch.optim's step range, which PyTorch 1.x traces record as an operator, not an annotation (Kineto's
    # tb_plugin ResNet-50: `Optimizer.step#SGD.step`, category "Operator", around 483 add_ / mul_ kernels)
    cpu = trace.cpu_ops
    if cpu is not None and len(cpu):
        opt = cpu[cpu["name"].astype(str).str.startswith(_RANGE_OPS)]
        if len(opt):
            ann = (
                pd.concat([ann, opt[["name", "tid", "ts_us", "end_us"]]], ignore_index=True) if ann is not None else opt
            )
    if ann is None or len(ann) == 0 or launches is None or len(launches) == 0:
        return empty
    keep = ~ann["name"].astype(str).str.startswith(_GENERIC_RANGE_PREFIXES)
    ann = ann[keep]
    if len(ann) == 0:
        return empty
    tid_of = dict(zip(launches["correlation"].tolist(), launches["tid"].tolist(), strict=True))
    a_tid = ann["tid"].to_numpy()
    a_ts = ann["ts_us"].to_numpy(dtype=float)
    a_end = ann["end_us"].to_numpy(dtype=float)
    a_name = ann["name"].astype(str).to_numpy()
    q_tid = np.array([tid_of.get(c) for c in rows["correlation"].tolist()], dtype=object)
    q_ts = rows["launch_ts_us"].to_numpy(dtype=float)
    out = list(empty)
    for tid in pd.unique(a_tid):
        mine = np.flatnonzero(q_tid == tid)
        if len(mine) == 0:
            continue
        rng = np.flatnonzero(a_tid == tid)
        t = q_ts[mine]
        t = np.where(np.isfinite(t), t, np.nan)
        for q, hit in zip(mine.tolist(), _containing(a_ts[rng], a_end[rng], t, innermost=False), strict=True):
            if len(hit):
                out[q] = tuple(a_name[rng[hit]].tolist())
    return out


# --- alignment ----------------------------------------------------------------------------------------------------


@dataclass
class Alignment:
    pairs: list[tuple[int, int, str]]  # (base pos, candidate pos, how: 'same' | 'gemm' | 'reordered')
    anchors_b: list[int]  # base positions of the in-order pairs (increasing)
    anchors_c: list[int]  # their candidate positions (increasing)
    unmatched_b: list[int]
    unmatched_c: list[int]

    def gap_of(self, c_pos: int) -> int:
        """Index k such that c_pos lies between anchor k-1 and anchor k (0: before the first anchor)."""
        return bisect.bisect_left(self.anchors_c, c_pos)

    def base_window(self, c_pos: int, extra: int) -> tuple[int, int]:
        """Open interval of base positions a candidate kernel may have replaced: its gap between anchors, widened
        by `extra` anchors on each side."""
        k = self.gap_of(c_pos)
        lo_i, hi_i = k - 1 - extra, k + extra
        lo = self.anchors_b[lo_i] if lo_i >= 0 else -1
        hi = self.anchors_b[hi_i] if hi_i < len(self.anchors_b) else 10**12
        return lo, hi

    def base_coord(self, c_pos: int, n_c: int, n_b: int) -> float:
        """Where a candidate kernel sits on the base axis, interpolated between the anchors around it."""
        k = self.gap_of(c_pos)
        cb = self.anchors_b[k - 1] if k > 0 else -1
        cc = self.anchors_c[k - 1] if k > 0 else -1
        nb = self.anchors_b[k] if k < len(self.anchors_b) else n_b
        nc = self.anchors_c[k] if k < len(self.anchors_c) else n_c
        return cb + (c_pos - cc) * (nb - cb) / max(nc - cc, 1)


def _replayed(rows: pd.DataFrame) -> bool:
    return "graph_replay" in rows and bool(rows["graph_replay"].any())


def _name_keys(rows: pd.DataFrame) -> list[tuple]:
    """Keys by kernel name alone, for a pair where one run replays CUDA graphs: its kernels have no op or shapes,
    so a GEMM's (M, N, K) or a kernel's op cannot be compared; the same name in the same order is the evidence."""
    return [("m" if k != "kernel" else "k", n) for k, n in zip(rows["kind"], rows["name"], strict=True)]


def align(base: pd.DataFrame, cand: pd.DataFrame) -> Alignment:
    """Pairs of equal kernels: first the in-order matching blocks (match_blocks), then equal kernels left over on
    both sides paired in order of appearance ('reordered': e.g. a second stream scheduled them differently).
    When either run replays CUDA graphs, kernels are equal by name (`_name_keys`), and pairs say 'name'."""
    by_name = _replayed(base) or _replayed(cand)
    codes: dict = {}
    b_codes = [codes.setdefault(k, len(codes)) for k in (_name_keys(base) if by_name else base["key"])]
    c_codes = [codes.setdefault(k, len(codes)) for k in (_name_keys(cand) if by_name else cand["key"])]
    in_b, in_c = match_blocks(b_codes, c_codes)
    b_gemm = base["is_gemm"].to_numpy()
    b_has_gemm = [g is not None for g in base["gemm"]]
    pairs: list[tuple[int, int, str]] = [
        (bi, cj, "name" if by_name else "gemm" if b_gemm[bi] and b_has_gemm[bi] else "same")
        for bi, cj in zip(in_b, in_c, strict=True)
    ]
    anchors_b = list(in_b)
    anchors_c = list(in_c)
    mb = set(anchors_b)
    mc = set(anchors_c)
    left_c: dict[int, deque[int]] = {}
    for j in range(len(c_codes)):
        if j not in mc:
            left_c.setdefault(c_codes[j], deque()).append(j)
    for i in range(len(b_codes)):
        if i in mb:
            continue
        q = left_c.get(b_codes[i])
        if q:
            j = q.popleft()
            pairs.append((i, j, "reordered"))
            mb.add(i)
            mc.add(j)
    return Alignment(
        pairs=sorted(pairs),
        anchors_b=anchors_b,
        anchors_c=anchors_c,
        unmatched_b=[i for i in range(len(b_codes)) if i not in mb],
        unmatched_c=[j for j in range(len(c_codes)) if j not in mc],
    )
