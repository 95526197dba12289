"""One run's representative step as an ordered kernel sequence, and the alignment of two such sequences.

Never aligns on raw ts (each run has its own time base): a run is reduced to the ordered list of GPU ops of its
steady-state steps. Steps with the same ordered (kernel, op, shapes) list share a signature; the most common
signature is "the step", and each position's duration is the median over the steps that have it (3 active steps
in our runner's traces, so one slow step never decides a figure).

Two sequences are aligned by a longest common subsequence over kernel keys (difflib, autojunk off: a GEMM that
repeats in every layer is signal, not junk). GEMMs key on (batch, M, N, K, dtype) from their op's shapes, so cuBLAS
vs CUTLASS vs a Triton template with the same problem still match; everything else keys on (name, op, shapes).
"""

from __future__ import annotations

import bisect
import math
from collections import deque, namedtuple
from dataclasses import dataclass, field
from itertools import islice

import numpy as np
import pandas as pd

from analyzer.diff_ops import (
    TensorIO,
    canonical_ops,
    dims_text,
    gemm_problem,
    inductor_ops,
    is_gemm_op,
    is_inductor_name,
    tensor_io,
    text_ops,
)
from analyzer.errors import DiffError

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
    "classify_ops",
    "is_gemm",
    "context",
    "node",
    "key",
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
    g = g[g["step"].isin(steps)]
    if (g["kind"] == "kernel").sum() == 0:
        raise DiffError(f"{src}: no GPU kernels in its steady-state steps {steps}; nothing to compare")
    notes: list[str] = []
    if g["device"].nunique() > 1:  # one trace per GPU is the Kineto norm; keep the busiest device
        dev = int(g.groupby("device")["dur_us"].sum().idxmax())
        notes.append(f"GPU ops on devices {sorted(g['device'].unique().tolist())}; compared device {dev} only")
        g = g[g["device"] == dev]
    g = g.sort_values(["step", "ts_us"], kind="stable")

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
            f"({n_mode} GPU ops); figures per kernel use those {len(same)} steps"
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
    _annotate(rows, trace)
    return RunSeq(label, rows, [int(s) for s in same], steps_used or steps, int(same[shown_i]), notes)


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
    cols = zip(
        rows["name"].tolist(),
        rows["op_name"].tolist(),
        map(repr, dims_col),
        map(repr, types_col),
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
            hit = cache[k] = _row_facts(*k[:2], dims_col[i], types_col[i], *k[4:])
        facts.append(hit)
    rows["role"] = roles
    for n, col in enumerate(("gemm", "io", "op_ops", "name_ops", "classify_ops", "is_gemm", "key")):
        rows[col] = [f[n] for f in facts]
    rows["context"] = _enclosing_ranges(rows, trace)
    rows["node"] = _autograd_nodes(rows, trace)


def _row_facts(name, op, dims, types, role: str, ops, category, kind) -> tuple:
    """(gemm, io, op_ops, name_ops, classify_ops, is_gemm, key) of one GPU op (see _annotate)."""
    op = op or ""
    g = gemm_problem(op, dims, types) if role == "main" and (is_gemm_op(op) or is_inductor_name(op)) else None
    io = tensor_io(op, dims, types) if op and role in ("main", "first", "last") else TensorIO((), None)
    if role == "first":
        io = TensorIO(io.inputs, None)
    elif role == "last":
        io = TensorIO((), io.output)
    # ops from the launching op: an aten op's own name, or words of an autograd Function / custom op name
    if role in ("memop", "helper"):
        oo = frozenset()  # a memset under aten::mm does not compute an mm
    elif is_inductor_name(op):
        oo = inductor_ops(op)
    else:
        oo = canonical_ops(op) if op.startswith("aten::") else text_ops(op)
    no = inductor_ops(name) if is_inductor_name(name) else text_ops(name)
    if ops and role not in ("memop", "helper"):
        co = frozenset().union(*(canonical_ops(o) for o in str(ops).split("+") if o))
    else:
        co = frozenset()
    if g is not None:
        key = g.key
    elif role == "memop":  # a workspace memset pairs with its twin whatever the op's out= argument
        key = ("m", name, op)
    else:
        key = ("k", name, op, dims_text(dims))
    return g, io, oo, no, co, g is not None or (category == "gemm" and kind == "kernel"), key


def _containing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray, innermost: bool):
    """Intervals [start, end] of one thread that contain each time in t (NaN contains nothing, is in nothing).

    innermost: an array of interval indices, the one with the latest start (ties: the first given), -1 for none.
    Else: for each time, the array of all containing intervals ordered by start (ties: as given).
    Vectorised binary lifting over a sparse table of maximum ends — log2(n) NumPy passes instead of one pass over
    all intervals per kernel (5k autograd nodes × 100k kernels before)."""
    n = len(starts)
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


def _enclosing_ranges(rows: pd.DataFrame, trace) -> list[tuple[str, ...]]:
    """Names of the CPU record_function ranges that enclose each kernel's launch (innermost last), generic step /
    compiled-graph wrappers dropped. A FuseLens or user kernel launched under record_function('fuselens::geglu')
    is named by that range even when its own name says nothing."""
    ann = trace.annotations
    launches = trace.launches
    empty: list[tuple[str, ...]] = [()] * len(rows)
    if ann is None or len(ann) == 0 or launches is None or len(launches) == 0:
        return empty
    ann = ann[~ann["on_gpu"].astype(bool)]
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
    notes: list[str] = field(default_factory=list)  # how the match was made, when not exhaustively (match_blocks)

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


def align(base: pd.DataFrame, cand: pd.DataFrame) -> Alignment:
    """Pairs of equal kernels: first the in-order matching blocks (match_blocks), then equal kernels left over on
    both sides paired in order of appearance ('reordered': e.g. a second stream scheduled them differently)."""
    codes: dict = {}
    b_codes = [codes.setdefault(k, len(codes)) for k in base["key"]]
    c_codes = [codes.setdefault(k, len(codes)) for k in cand["key"]]
    in_b, in_c, notes = match_blocks(b_codes, c_codes)
    b_gemm = base["is_gemm"].to_numpy()
    b_has_gemm = [g is not None for g in base["gemm"]]
    pairs: list[tuple[int, int, str]] = [
        (bi, cj, "gemm" if b_gemm[bi] and b_has_gemm[bi] else "same") for bi, cj in zip(in_b, in_c, strict=True)
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
        notes=notes,
    )


# --- matching blocks ------------------------------------------------------------------------------------------------
#
# The exact method is difflib's (Ratcliff/Obershelp, autojunk off): the longest block of equal kernels first (ties:
# leftmost in the baseline, then in the candidate), then the same on each side of it. Its cost is the number of
# (baseline, candidate) kernel pairs with equal keys it visits, summed over every block it looks for — quadratic in
# how often a kernel repeats: 35M pairs (~9 s) for a 19k-op V100 training step against itself, ~1e9 (432 s) for a
# 97k-op against a 116k-op one. Every real step pair we test stays below EXACT_WORK and gets exactly difflib's blocks.
# Past it, the blocks found so far are kept and what is left is cut at landmarks — the common start and end, kernels
# occurring once in each list, else kernels occurring equally often in both (the k-th with the k-th) — kept in order
# by a longest increasing subsequence; the exact search then runs between consecutive landmarks, where the lists are
# short. A stretch with no landmark at all is matched in windows of WINDOW kernels. The Diff's notes say when either
# happened.

EXACT_WORK = 4_000_000  # kernel pairs the exact search may visit over a whole step: ~0.7-1 s here (~0.2 µs a pair)
LEAF_WORK = 250_000  # ... between two landmarks: ~50 ms at most
WINDOW = 1_000  # kernels per window where no landmark exists
WINDOW_WORK = 2_000_000  # a window's exact search stops here (a window of one kernel repeated 1000 times)
# A rectangle this small is searched exactly without a limit: at most area × shorter side = 4096 × 64 pairs.
LEAF_AREA = 4096


class _TooMuchWork(Exception):
    """The exact search hit its limit: the blocks it had found (valid difflib blocks) and the rectangles it had not
    searched yet, each (alo, ahi, blo, bhi, exact_ok); the one it was searching has exact_ok False."""

    def __init__(self, blocks: list, pending: list) -> None:
        super().__init__("exact block search over its limit")
        self.blocks = blocks
        self.pending = pending


def _blocks_exact(a: list, b2j: dict, alo: int, ahi: int, blo: int, bhi: int, limit: float) -> list[tuple]:
    """difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() of a[alo:ahi] vs b[blo:bhi] as
    (i, j, size) triples: the same blocks (tests/test_diff_align.py checks it against difflib on real steps).
    b2j: each key's positions in b, increasing; they are bisected to the rectangle instead of skipped one by one.
    Raises _TooMuchWork once more than `limit` equal pairs have been visited."""
    work = 0
    out = []
    queue = [(alo, ahi, blo, bhi)]
    bisect_left = bisect.bisect_left
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        besti, bestj, bestsize = alo, blo, 0
        j2len: dict[int, int] = {}
        for i in range(alo, ahi):
            occ = b2j.get(a[i])
            lo = bisect_left(occ, blo) if occ else 0
            hi = bisect_left(occ, bhi, lo) if occ else 0
            if lo == hi:
                j2len = {}
                continue
            work += hi - lo
            get = j2len.get
            new = {}
            for j in islice(occ, lo, hi):
                k = new[j] = get(j - 1, 0) + 1
                if k > bestsize:
                    besti, bestj, bestsize = i - k + 1, j - k + 1, k
            j2len = new
            if work > limit:
                raise _TooMuchWork(out, [(alo, ahi, blo, bhi, False)] + [(*q, True) for q in queue])
        if bestsize:
            out.append((besti, bestj, bestsize))
            if alo < besti and blo < bestj:
                queue.append((alo, besti, blo, bestj))
            if besti + bestsize < ahi and bestj + bestsize < bhi:
                queue.append((besti + bestsize, ahi, bestj + bestsize, bhi))
    return out


def _equal_pairs(a: np.ndarray, b: np.ndarray) -> int:
    """How many (i, j) with a[i] == b[j]: what one exact block search over the whole of a and b visits."""
    ua, ca = np.unique(a, return_counts=True)
    ub, cb = np.unique(b, return_counts=True)
    _, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    return int(np.dot(ca[ia].astype(np.int64), cb[ib].astype(np.int64)))


def _lis(values: list[int]) -> list[int]:
    """Indices of a longest strictly increasing subsequence of values (patience sorting, O(n log n))."""
    tails: list[int] = []
    tail_at: list[int] = []
    prev = [-1] * len(values)
    for k, v in enumerate(values):
        p = bisect.bisect_left(tails, v)
        if p == len(tails):
            tails.append(v)
            tail_at.append(k)
        else:
            tails[p] = v
            tail_at[p] = k
        prev[k] = tail_at[p - 1] if p else -1
    out = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        out.append(k)
        k = prev[k]
    return out[::-1]


def _landmarks(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """In-order pairs (i, j) of landmark kernels: keys occurring once in a and once in b; if none, keys occurring
    equally often in both (k-th occurrence with k-th: a GEMM in each of 24 layers on both sides). A longest
    increasing subsequence drops pairs that cross the others. None when no key qualifies."""
    ua, inv_a, ca = np.unique(a, return_inverse=True, return_counts=True)
    ub, inv_b, cb = np.unique(b, return_inverse=True, return_counts=True)
    _, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    for ok in ((ca[ia] == 1) & (cb[ib] == 1), ca[ia] == cb[ib]):
        if ok.any():
            break
    else:
        return None
    keep_a = np.zeros(len(ua), dtype=bool)
    keep_a[ia[ok]] = True
    keep_b = np.zeros(len(ub), dtype=bool)
    keep_b[ib[ok]] = True
    pa = np.flatnonzero(keep_a[inv_a.ravel()])
    pb = np.flatnonzero(keep_b[inv_b.ravel()])
    pa = pa[np.argsort(a[pa], kind="stable")]  # by key, then position: the k-th of each key lines up
    pb = pb[np.argsort(b[pb], kind="stable")]
    order = np.argsort(pa, kind="stable")
    pa, pb = pa[order], pb[order]
    keep = _lis(pb.tolist())
    return pa[keep], pb[keep]


def match_blocks(a: list[int], b: list[int]) -> tuple[list[int], list[int], list[str]]:
    """In-order pairs of equal keys of a and b: (positions in a, positions in b, notes). Exactly difflib's matching
    blocks while that search stays under EXACT_WORK pairs; else landmarks for the rest (see the comment above)."""
    b2j: dict[int, list[int]] = {}
    for j, x in enumerate(b):
        b2j.setdefault(x, []).append(j)
    arr_a = np.asarray(a, dtype=np.int64)
    arr_b = np.asarray(b, dtype=np.int64)
    blocks: list[tuple[int, int, int]] = []
    stack: list[tuple[int, int, int, int, bool]] = [(0, len(a), 0, len(b), False)]
    if _equal_pairs(arr_a, arr_b) <= EXACT_WORK:  # else even the first block costs more than the limit
        try:
            return (*_pairs(_blocks_exact(a, b2j, 0, len(a), 0, len(b), EXACT_WORK)), [])
        except _TooMuchWork as stop:  # the long blocks were cheap, the tail of short ones is not: keep the former
            blocks, stack = stop.blocks, stop.pending
    n_landmarks = 0
    windowed = [0, 0]  # baseline kernels, windows
    while stack:
        alo, ahi, blo, bhi, exact_ok = stack.pop()
        if alo >= ahi or blo >= bhi:
            continue
        if (ahi - alo) * (bhi - blo) <= LEAF_AREA:  # most gaps between landmarks: a few kernels a side
            blocks += _blocks_exact(a, b2j, alo, ahi, blo, bhi, math.inf)
            continue
        p = _common_run(arr_a, arr_b, alo, ahi, blo, bhi, 1)
        if p:
            blocks.append((alo, blo, p))
            alo, blo = alo + p, blo + p
        s = _common_run(arr_a, arr_b, ahi - 1, alo - 1, bhi - 1, blo - 1, -1)
        if s:
            blocks.append((ahi - s, bhi - s, s))
            ahi, bhi = ahi - s, bhi - s
        n_landmarks += p + s
        if alo >= ahi or blo >= bhi:
            continue
        sub_a, sub_b = arr_a[alo:ahi], arr_b[blo:bhi]
        if (exact_ok or p or s) and _equal_pairs(sub_a, sub_b) <= LEAF_WORK:
            try:
                blocks += _blocks_exact(a, b2j, alo, ahi, blo, bhi, LEAF_WORK)
                continue
            except _TooMuchWork as stop:
                blocks += stop.blocks
                stack += stop.pending
                continue
        marks = _landmarks(sub_a, sub_b)
        if marks is not None:
            n_landmarks += len(marks[0])
            pi, pj = alo, blo
            for i, j in zip((marks[0] + alo).tolist(), (marks[1] + blo).tolist(), strict=True):
                blocks.append((i, j, 1))
                stack.append((pi, i, pj, j, True))
                pi, pj = i + 1, j + 1
            stack.append((pi, ahi, pj, bhi, True))
            continue
        n = -(-max(ahi - alo, bhi - blo) // WINDOW)  # no landmark: proportional windows
        cut_a = [alo + (ahi - alo) * k // n for k in range(n + 1)]
        cut_b = [blo + (bhi - blo) * k // n for k in range(n + 1)]
        windowed[0] += ahi - alo
        windowed[1] += n
        for k in range(n):
            try:
                blocks += _blocks_exact(a, b2j, cut_a[k], cut_a[k + 1], cut_b[k], cut_b[k + 1], WINDOW_WORK)
            except _TooMuchWork as stop:  # keep the window's long blocks, leave its short ones unmatched
                blocks += stop.blocks
    notes = [
        f"alignment: matching these {len(a):,} and {len(b):,} GPU ops block by block (difflib's method) would "
        f"visit more than {EXACT_WORK:,} kernel pairs; its longest blocks were kept"
        + (
            f", the rest cut at {n_landmarks:,} landmark kernels (common runs, kernels occurring once or equally "
            "often in both runs) and matched between them"
            if n_landmarks
            else ""
        )
    ]
    if windowed[0]:
        notes.append(
            f"alignment: {windowed[0]:,} baseline GPU ops had no landmark kernel nearby and were matched in "
            f"{windowed[1]:,} windows of about {WINDOW:,} ops: a kernel that moved farther than a window is listed "
            "as unmatched, not paired"
        )
    return (*_pairs(blocks), notes)


def _common_run(arr_a: np.ndarray, arr_b: np.ndarray, i: int, i_end: int, j: int, j_end: int, step: int) -> int:
    """Length of the run of equal keys from (i, j) towards (i_end, j_end), exclusive, stepping by +1 or -1."""
    n = min(abs(i_end - i), abs(j_end - j))
    if n <= 0:
        return 0
    if step > 0:
        eq = arr_a[i : i + n] == arr_b[j : j + n]
    else:
        eq = arr_a[i - n + 1 : i + 1][::-1] == arr_b[j - n + 1 : j + 1][::-1]
    return n if eq.all() else int(np.argmin(eq))


def _pairs(blocks: list[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    in_a: list[int] = []
    in_b: list[int] = []
    for i, j, k in sorted(blocks):
        in_a.extend(range(i, i + k))
        in_b.extend(range(j, j + k))
    return in_a, in_b
