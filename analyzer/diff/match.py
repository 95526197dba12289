"""Fusion groups: which baseline kernels each new candidate kernel replaced, and the HBM round trips that saved.

Input: two aligned representative steps (analyzer.diff.align). Kernels paired by the alignment are "the same work"
and anchor everything else. Each baseline kernel left over is claimed by at most one new candidate kernel, by the
strongest evidence available (docs/DIFF.md has the full rule):

1. ops   — the candidate's ops, from its name (Inductor 'triton_poi_fused__unsafe_view_gelu_mul_0' -> gelu, mul;
           '_geglu_tanh_forward_kernel' -> gelu, mul; '_dual_gemm_kernel' -> mm), its launching op or autograd
           Function ('LigerGELUMulFunction') or the record_function ranges around its launch, cover the baseline
           kernel's ops. Window: its gap between anchors widened by EXTRA_ANCHORS anchors each side, because Inductor
           hoists GEMMs above the pointwise work that consumes them (HF GEGLU: eager runs gate-GEMM, gelu, up-GEMM,
           mul; compile runs gate-GEMM, up-GEMM, gelu·mul). Ties go to the nearest candidate on the base axis.
2. position — a new candidate kernel alone in its gap between anchors takes the baseline kernels of that gap
           (a user's @triton.jit kernel whose name says nothing). Several: the nearest one.
GEMM merge — before evidence 1: a candidate GEMM whose problem is several left-over baseline GEMMs stacked along M
           or N (shared operand, FLOPs adding up exactly) takes them (analyzer.diff.merge).
3. data flow — a baseline kernel still unclaimed whose output feeds a group member, or which reads a member's output,
           joins that group (FuseLens gating: '_gating_kernel' sits where mul was; gelu, two kernels earlier, feeds
           mul). A matched GEMM whose candidate names an epilogue op ('…gemm_relu…') that its baseline GEMM does not
           absorbs the pointwise kernel its output feeds.

A claim needs evidence, never mere neighbourhood: a candidate kernel the baseline also runs (same name) replaces
nothing (two ranks of one job: their left-over copies are added and removed work); a vendor kernel replaces one op
call per op it computes; a member claimed by position alone must pass a tensor to or from another member.

Bytes avoided (per group): a tensor that one group member writes and another member reads is an intermediate the
fused kernel never materializes: its size × (1 write + 1 read per reading member). A kernel whose name says it saves
its GEMM outputs (classify.name_facts: a training forward keeping g and u for the backward) still writes those: only
their reads count. Tensors flowing into or out of the group are still written/read by the candidate and are not
counted.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from analyzer.diff.align import Alignment, RunSeq
from analyzer.diff.attention import attention_chains, backward_chains, moves_scores
from analyzer.diff.blocks import lis
from analyzer.diff.bounds import fused_problems, problem_at, prologues
from analyzer.diff.flow import FLOW_LOOKBACK, SIDE_ROLES, feeds, flow_edges
from analyzer.diff.merge import claim_gemm_merges, merged_operand
from analyzer.diff.saved import count_saved_reads
from analyzer.fmt import short_name
from analyzer.opinfo import names
from analyzer.opinfo.classify import gemm_capacity, name_facts
from analyzer.opinfo.names import (
    NameVerdict,
    canonical_ops,
    inductor_name_verdict,
    is_inductor_name,
    text_ops,
)
from analyzer.opinfo.tensors import Tensor
from analyzer.phases import is_optimizer_kernel

# A replaced kernel sits within this many kernels of where its replacement lands on the base axis (HF GEGLU: 2;
# an eager transformer block's norm or MLP tail: ~10). Beyond it, in unrelated runs, names alone would pair
# kernels from different layers.
MAX_CLAIM_DISTANCE = 24
EXTRA_ANCHORS = 2  # see module doc, evidence 1
MAX_RECLAIMS = 2  # passes that claim again without the stray pairs the previous pass found
_POSITION = "position: new work between the same matched kernels"


@dataclass
class Intermediate:
    tensor: Tensor
    producer: int  # base position
    consumers: list[int]  # base positions reading it inside the group
    still_written: bool = False  # the fused kernel writes it too (a GEMM output it saves): only the reads avoided
    # base positions in other groups reading it again (a saved tensor the backward re-reads: analyzer.diff.saved)
    other_reads: list[int] = field(default_factory=list)
    # a GEMM merge's shared operand (analyzer.diff.merge): no write; consumers are the merged GEMMs' re-reads of it
    shared_operand: bool = False

    @property
    def nbytes(self) -> float:
        return self.tensor.nbytes

    @property
    def round_trip_bytes(self) -> float:
        write = 0 if self.still_written or self.shared_operand else 1
        return self.tensor.nbytes * (write + len(self.consumers) + len(self.other_reads))


@dataclass
class Group:
    fused: list[int]  # candidate positions of the new kernel(s): one, except for a 'kernel choice'
    members: list[int]  # base positions they replaced, in base order
    kind: str = ""  # 'fusion' (n -> 1) | 'swap' (1 -> 1) | 'kernel choice' (same op and shapes, other kernels)
    evidence: dict[int, str] = field(default_factory=dict)  # base position -> how it was claimed
    side: list[int] = field(default_factory=list)  # base memsets / helper kernels of replaced op calls
    intermediates: list[Intermediate] = field(default_factory=list)
    bytes_complete: bool = True  # False when a member's tensors are unknown: bytes avoided is then a lower bound
    saved_unknown: bool = False  # the backward may re-read an avoided tensor, how often unknown (analyzer.diff.saved)
    edges: list | None = None  # (producer, consumer, tensor) known from the group's structure (an attention chain)

    @property
    def bytes_avoided(self) -> float:
        return float(sum(i.round_trip_bytes for i in self.intermediates))


@dataclass
class GroupResult:
    groups: list[Group]
    unmatched_b: list[int]
    unmatched_c: list[int]
    pairs: list[tuple[int, int, str]]  # alignment pairs that remain pairs (epilogue absorptions removed)


def _base_ops(row) -> frozenset[str]:
    """A baseline kernel's ops: its aten op when known (precise), else words of its name and the classifier's ops."""
    if row.op_ops:
        return row.op_ops
    return row.name_ops


def _cand_sources(row) -> list[tuple[str, frozenset[str]]]:
    """(evidence label, ops) for a candidate kernel, strongest first."""
    out = [("kernel name", row.name_ops)]
    if row.op_name:
        out.append((f"launching op {row.op_name}", row.op_ops))
    for rng in reversed(row.context):
        out.append((f"range {rng}", text_ops(rng)))
    return [(label, ops) for label, ops in out if ops]


def group_kernels(base: RunSeq, cand: RunSeq, al: Alignment) -> GroupResult:
    """Fusion groups of two aligned steps (module doc), one evidence rule after another. Every search is windowed —
    a claim lies within MAX_CLAIM_DISTANCE kernels of its candidate on the base axis, data flow within FLOW_LOOKBACK
    — so the work is ~49 look-ups per left-over kernel, with the same claims as pairing every left-over baseline
    kernel with every left-over candidate kernel (21 s for two unrelated real steps of 16k and 25k ops; windowed:
    0.4 s, tests/analyzer/test_diff_align.py, bench/results/diff.md)."""
    b_rows, c_rows = base.records, cand.records
    # 0. same op, same shapes, other kernels (cuDNN picked another algorithm, a library update renamed a kernel):
    #    the same work, so no intermediate can have been avoided
    choices, taken_b, taken_c = _kernel_choices(b_rows, c_rows, al)
    banned: set[tuple[int, int]] = set()
    for _ in range(MAX_RECLAIMS + 1):
        st = _Claims(b_rows, c_rows, al, taken_b, taken_c, banned)
        _claim_attention(st)
        _claim_optimizer(st)
        st.set_segments()
        claim_gemm_merges(st, MAX_CLAIM_DISTANCE)
        _claim_by_ops(st)
        _claim_by_ops_in_segment(st)
        _claim_by_position(st)
        _claim_by_data_flow(st)
        groups_by_c = _groups_of_claims(st)
        stray = _strays(groups_by_c, b_rows) | prologues(groups_by_c, b_rows, c_rows)
        if not stray or stray <= banned:
            break
        banned |= stray  # claim again without them: the nearer candidate that named the op may not be the one
    pairs = _claim_epilogues(st, groups_by_c)
    _claim_side_work(st, groups_by_c)
    groups = sorted(groups_by_c.values(), key=lambda g: g.fused[0])
    for g in groups:
        g.kind = "fusion" if len(g.members) > 1 else "swap"
        _intermediates(g, b_rows, c_rows)
    count_saved_reads(groups, b_rows)
    return GroupResult(
        groups=sorted(groups + choices, key=lambda g: g.fused[0]),
        unmatched_b=[i for i in st.left_b if i not in st.claim],
        unmatched_c=[j for j in st.left_c if j not in groups_by_c and j not in st.claimed_c],
        pairs=pairs,
    )


class _Claims:
    """What the evidence rules share: the left-over kernels of both runs, each candidate's ops, cap and place on
    the base axis, and the claims so far (base pos -> (cand pos, evidence); insertion order matters to data flow)."""

    def __init__(
        self, b_rows: list, c_rows: list, al: Alignment, taken_b: set[int], taken_c: set[int], banned=frozenset()
    ) -> None:
        self.b_rows, self.c_rows, self.al = b_rows, c_rows, al
        self.banned = banned  # (base pos, cand pos) pairs a previous pass found without a tensor in common
        n_b, n_c = len(b_rows), len(c_rows)
        self.left_b = [i for i in al.unmatched_b if i not in taken_b]  # increasing (al.unmatched_b is)
        self.left_c = [j for j in al.unmatched_c if j not in taken_c]
        self.claim: dict[int, tuple[int, str]] = {}
        self.coord = {j: al.base_coord(j, n_c, n_b) for j in self.left_c}
        self.sources = {j: _cand_sources(c_rows[j]) for j in self.left_c}
        self.all_ops = {
            j: frozenset().union(*(ops for _, ops in src)) if src else frozenset() for j, src in self.sources.items()
        }
        base_names = frozenset(r.name for r in b_rows if r.kind == "kernel")
        self.caps = {j: _claim_cap(c_rows[j], base_names) for j in self.left_c}
        self.gemm_caps = {j: gemm_capacity(c_rows[j].name) for j in self.left_c}  # GEMMs its name says it runs
        self.gemm_claims = dict.fromkeys(self.left_c, 0)
        # the (M, N, K) of each GEMM a FuseLens kernel runs, from its op's shapes: it replaces only those GEMMs
        self.gemm_left = {j: fused_problems(c_rows[j]) for j in self.left_c}
        self.n_claims = dict.fromkeys(self.left_c, 0)
        self.spent: dict[int, dict[str, int]] = {}  # capped cand pos -> op it computes -> op call whose kernel took it
        self.rank: dict[int, int] = {}  # base pos -> its place in claim's order
        self.first_rank: dict[int, int] = {}  # cand pos -> rank of its first claim
        # eager attention chains of the baseline (QKᵀ GEMM … PV GEMM): only an attention kernel, or a kernel that
        # itself moves a tensor of the chain's score size, may take their members (analyzer.diff.attention)
        self.chains = attention_chains(b_rows, self.left_b)
        taken = {m for ch in self.chains for m in ch.members}
        self.chains += backward_chains(b_rows, [i for i in self.left_b if i not in taken])
        self.chain_of = {m: ch for ch in self.chains for m in ch.members}
        self.chain_for: dict = {}  # cand pos -> the chain it took
        self.claimed_c: set[int] = set()  # candidate positions that replace something (groups' fused kernels)
        self.optimizer_fused: tuple[int, list[int]] | None = None  # (lead, the other optimizer kernels)
        # where each candidate may claim on the base axis: its gap between anchors widened by EXTRA_ANCHORS anchors
        # each side (so a group is one stretch of the baseline's program, never one spanning a layer's 7+ GEMMs)
        self.window = {j: al.base_window(j, EXTRA_ANCHORS) for j in self.left_c}
        self.seg_b: list[int] = []  # attention boundaries (set_segments, once attention chains are claimed)
        self.seg_c: list[int] = []

    def set_segments(self) -> None:
        """Cut both steps at their attention kernels (an attention kernel that took an eager chain, or an attention
        pair of the alignment), in order on both sides: segment k of the baseline and segment k of the candidate
        run the same layer's work. Inductor hoists independent work across GEMM anchors (a compiled Llama runs
        layer 1's q projection before the mask, position-id and RoPE-table kernels that eager runs first), so a
        claim may reach anywhere in the candidate's own layer, never into another."""
        bounds = sorted(
            [(min(ch.members), j) for j, ch in self.chain_for.items()]
            + [(i, j) for i, j, _ in self.al.pairs if self.b_rows[i].attn is not None]
        )
        keep = lis([j for _, j in bounds])
        self.seg_b = [bounds[k][0] for k in keep]
        self.seg_c = [bounds[k][1] for k in keep]

    def segment_b(self, i: int) -> int | None:
        return bisect.bisect_right(self.seg_b, i) if self.seg_b else None

    def segment_c(self, j: int) -> int | None:
        return bisect.bisect_right(self.seg_c, j) if self.seg_c else None

    def in_stretch(self, j: int, i: int) -> bool:
        """Is base position i in candidate j's stretch of the program: its gap between anchors widened by
        EXTRA_ANCHORS anchors, or (steps cut at attention kernels) its own layer's segment?"""
        lo, hi = self.window[j]
        if lo < i < hi:
            return True
        sb = self.segment_b(i)
        return sb is not None and sb == self.segment_c(j)

    def name_verdict(self, j: int, i: int) -> NameVerdict:
        """What the candidate's own (Inductor) name says about it computing baseline kernel i (names module)."""
        b = self.b_rows[i]
        return inductor_name_verdict(self.c_rows[j].name, b.op_name, _base_ops(b))

    def room(self, j: int, i: int | None = None) -> bool:
        if i is not None and (i, j) in self.banned:
            return False
        if i is not None and i in self.chain_of and not moves_scores(self.c_rows[j], self.chain_of[i]):
            return False  # position or an op name is no evidence that an attention chain went into this kernel
        if i is not None and (not self.in_stretch(j, i) or self.name_verdict(j, i).allowed is False):
            return False  # the op lies outside the candidate's stretch, or its name rules the op out
        if i is not None and self.b_rows[i].is_gemm and self.gemm_claims[j] >= (self.gemm_caps[j] or 1 << 30):
            return False  # it already replaced every GEMM its name says it runs
        if i is not None and self.b_rows[i].is_gemm and problem_at(self.gemm_left[j], self.b_rows[i].gemm) is None:
            return False  # not a GEMM its op's shapes say it runs (or that one is taken)
        cap = self.caps[j]
        if cap is None:
            return True
        if self.n_claims[j] >= cap:
            return False
        row = self.b_rows[i] if i is not None else None
        return row is None or _ops_free(self.spent.get(j, {}), _base_ops(row), row.op_index)

    def take(self, i: int, j: int, how: str) -> None:
        said = self.name_verdict(j, i).how
        if said:  # a rewrite or a truncated name: the claim says what it rests on
            how = f"{how} ({said})"
        self.rank[i] = len(self.claim)
        self.first_rank.setdefault(j, self.rank[i])
        self.claim[i] = (j, how)
        self.n_claims[j] += 1
        self.gemm_claims[j] += bool(self.b_rows[i].is_gemm)
        at = problem_at(self.gemm_left[j], self.b_rows[i].gemm) if self.b_rows[i].is_gemm else None
        if at is not None and at >= 0:
            del self.gemm_left[j][at]
        if self.caps[j] is not None:
            self.spent.setdefault(j, {}).update(dict.fromkeys(_base_ops(self.b_rows[i]), self.b_rows[i].op_index))


def _claim_attention(st: _Claims) -> None:
    """An attention kernel (flash, cuDNN, memory-efficient) takes the eager chain whose QKᵀ and PV GEMMs have its
    shapes (B·H, S_q, S_k, D, D_v): the GEMMs, the scale/mask/softmax/cast kernels on the [B, H, S_q, S_k] scores
    between them, the K/V head-repeat copies feeding them and the layout copy of the PV output. Shapes are the
    evidence, never position; the chain is within MAX_CLAIM_DISTANCE of the candidate's place on the base axis."""
    # one lead per attention op call: its longest kernel (cuDNN's bprop, not its dO·O pre-pass), with the call's
    # attention problem (recorded on the call's first and last kernels)
    longest: dict[int, int] = {}
    att_of: dict[int, object] = {}
    for j in st.left_c:
        r = st.c_rows[j]
        if r.op_index < 0 or r.kind != "kernel":
            continue
        if r.attn is not None:
            att_of[r.op_index] = r.attn
        if r.op_index not in longest or r.dur_us > st.c_rows[longest[r.op_index]].dur_us:
            longest[r.op_index] = j
    for call, j in sorted(longest.items(), key=lambda x: x[1]):
        att = att_of.get(call)
        if att is None:
            continue
        best = None
        for ch in st.chains:
            if ch.taken or not ch.matches(att):
                continue
            d = min(abs(m - st.coord[j]) for m in ch.members)
            if d <= MAX_CLAIM_DISTANCE and (best is None or d < best[0]):
                best = (d, ch)
        if best is None:
            continue
        ch = best[1]
        ch.taken = True
        st.chain_for[j] = ch
        for m in ch.members:
            if m not in st.claim:
                st.take(m, j, ch.evidence[m])


def _optimizer_kernel(row) -> bool:
    return is_optimizer_kernel(row.name, row.op_name, row.context)


def _claim_optimizer(st: _Claims) -> None:
    """The optimizer step, whole: the baseline's optimizer kernels (foreach multi_tensor_apply launches, one per
    chunk of parameters and per op) go to the candidate's (a fused AdamW kernel, Inductor's foreach kernels).
    Evidence: both are the optimizer step (op family or torch.optim's range); the longest candidate kernel leads
    the group, the others join it, and Inductor kernels after the first foreach kernel belong to that compiled
    graph (its step counters)."""
    base = [
        i
        for i in st.left_b
        if _optimizer_kernel(st.b_rows[i]) and st.b_rows[i].kind == "kernel" and not st.b_rows[i].is_gemm
    ]
    # a kernel the baseline also runs is no new implementation of the step (two ranks of one job: cap 0)
    cand = [
        j
        for j in st.left_c
        if _optimizer_kernel(st.c_rows[j])
        and st.c_rows[j].kind == "kernel"
        and st.caps[j] != 0
        and not st.c_rows[j].is_gemm
    ]
    if not base or not cand:
        return
    tail = [
        j
        for j in st.left_c
        if j > cand[0] and j not in cand and is_inductor_name(st.c_rows[j].name) and st.caps[j] != 0
    ]
    cand = sorted({*cand, *tail})
    lead = max(cand, key=lambda j: (st.c_rows[j].dur_us, -j))
    what = "+".join(sorted({names.op_base(st.b_rows[i].op_name).strip("_") for i in base}))[:120]
    for i in base:
        st.take(i, lead, f"optimizer step ({what}) replaced by the candidate's optimizer kernels")
    st.optimizer_fused = (lead, [j for j in cand if j != lead])


def _claim_by_ops(st: _Claims) -> None:
    """Evidence 1: the candidate's ops cover the baseline kernel's, nearest pairs first (a capped candidate keeps
    the baseline kernel closest to it). Only baseline kernels within MAX_CLAIM_DISTANCE of j's base coordinate can
    qualify: found by bisection (the range is one wider on each side; the exact test decides)."""
    b_rows, left_b = st.b_rows, st.left_b
    base_ops = {i: _base_ops(b_rows[i]) for i in left_b}
    pairs = []
    for j in st.left_c:
        ops_j = st.all_ops[j]
        if not ops_j or st.caps[j] == 0:
            continue  # no ops named: nothing can be covered (a non-empty set is never <= the empty set)
        lo, hi = st.al.base_window(j, EXTRA_ANCHORS)
        cj = st.coord[j]
        first = bisect.bisect_left(left_b, cj - MAX_CLAIM_DISTANCE - 1)
        last = bisect.bisect_right(left_b, cj + MAX_CLAIM_DISTANCE + 1)
        for i in left_b[first:last]:
            ops_b = base_ops[i]
            d = abs(i - cj)
            if not ops_b or not (lo < i < hi) or d > MAX_CLAIM_DISTANCE or not _covers(st, i, j, ops_b, ops_j):
                continue
            if b_rows[i].is_gemm and "mm" not in ops_j:
                continue
            if st.caps[j] is None and not _touches(b_rows[i], st.c_rows[j]):
                continue  # named, but none of its tensors is the fused kernel's: an inner member, or another's
            pairs.append((d, -j, i, j))
    for _, _, i, j in sorted(pairs):
        if i in st.claim or not st.room(j, i):
            continue
        ops_b = base_ops[i]
        labels = [lbl for lbl, ops in st.sources[j] if ops_b & ops] or ["kernel name"]
        st.take(i, j, f"ops {'+'.join(sorted(ops_b))} named by {', '.join(labels)}")


def _covers(st: _Claims, i: int, j: int, ops_b: frozenset[str], ops_j: frozenset[str]) -> bool:
    """Do candidate j's ops cover baseline kernel i's: all named, or the rest named by a decomposition its Inductor
    name records (names.INDUCTOR_REWRITES: an embedding's gather, a neg folded into a sub)?"""
    if ops_b <= ops_j:
        return True
    v = st.name_verdict(j, i)
    return bool(v.allowed) and v.how.startswith("rewrite")


def _touches(b_row, c_row) -> bool:
    """Does baseline kernel b_row share a tensor size with candidate c_row's recorded arguments (an Inductor
    kernel's buffers, a launching op's inputs)? Unknown on either side: no evidence against. A fused kernel reads
    and writes the tensors entering and leaving its group, so the members an op name claims must touch them; the
    members inside (an RMSNorm's eps add and rsqrt on [tokens, 1]) join through data flow (evidence 3)."""
    c_sizes = {t.numel for t in c_row.io.linkable if t.numel > 1}
    if c_row.io.output is not None and c_row.io.output.numel > 1:
        c_sizes.add(c_row.io.output.numel)
    b_ts = [t for t in (*b_row.io.inputs, b_row.io.output) if t is not None and t.numel > 1]
    if not c_sizes or not b_ts:
        return True
    # or half of one: RoPE's rotate_half works on the two halves of the last dimension of q / k
    return any(t.numel in c_sizes or 2 * t.numel in c_sizes for t in b_ts)


def _claim_by_ops_in_segment(st: _Claims) -> None:
    """Evidence 1 again, within a layer: a baseline kernel still unclaimed goes to the candidate Triton kernel of
    the same segment (Claims.set_segments) whose descriptive name lists its ops, nearest by relative place in the
    segment. For work Inductor moved across GEMM anchors, beyond the anchor window of evidence 1."""
    if not st.seg_b:
        return
    b_rows, c_rows = st.b_rows, st.c_rows
    by_seg: dict[int, list[int]] = {}
    for j in st.left_c:
        if st.caps[j] is None and st.all_ops[j] and is_inductor_name(c_rows[j].name):
            by_seg.setdefault(st.segment_c(j), []).append(j)
    n_b, n_c = len(b_rows), len(c_rows)
    edges_b, edges_c = [-1, *st.seg_b, n_b], [-1, *st.seg_c, n_c]

    def rel(pos: int, seg: int, edges: list[int]) -> float:
        return (pos - edges[seg]) / max(edges[seg + 1] - edges[seg], 1)

    for i in st.left_b:
        if i in st.claim or b_rows[i].role in SIDE_ROLES:
            continue
        ops_b = _base_ops(b_rows[i])
        seg = st.segment_b(i)
        if not ops_b or seg not in by_seg:
            continue
        if b_rows[i].is_gemm:
            continue  # a GEMM goes to a kernel that names mm, by evidence 1 or the epilogue rule
        ri = rel(i, seg, edges_b)
        named = [
            j
            for j in by_seg[seg]
            if st.name_verdict(j, i).allowed is True and _covers(st, i, j, ops_b, st.all_ops[j]) and st.room(j, i)
        ]
        touching = [j for j in named if _touches(b_rows[i], c_rows[j])]
        ops = "+".join(sorted(ops_b))
        where = "in the same layer (between the same attention kernels)"
        if touching:
            j = min(touching, key=lambda x: (abs(rel(x, seg, edges_c) - ri), x))
            st.take(i, j, f"ops {ops} named by kernel name, {where}")
        elif len(named) == 1 and ops_b <= st.all_ops[named[0]]:
            # an inner tensor of the fused work (RoPE backward's rotate_half halves): no size in common with the
            # kernel's buffers, but the only kernel of its layer whose name lists the op
            st.take(i, named[0], f"ops {ops}: the only kernel {where} whose name lists them")


def _claim_by_position(st: _Claims) -> None:
    """Evidence 2: a gap's left-over baseline kernels go to a new kernel of the same gap whose names say nothing (a
    user's @triton.jit kernel). A kernel that names its ops got its claims in evidence 1; a memcpy replaces no
    compute. Within one gap a candidate's base coordinate grows with its position, so the nearest one is a neighbour
    of i in that order (bisection), not a scan of the gap."""
    opaque = [
        j
        for j in st.left_c
        if not st.all_ops[j]
        and st.c_rows[j].kind == "kernel"
        and not is_vendor_kernel(st.c_rows[j])
        and st.caps[j] != 0
    ]
    by_gap: dict[int, tuple[list[float], list[int]]] = {}
    for j in opaque:  # increasing j: coordinates increase within a gap
        cs, js = by_gap.setdefault(bisect.bisect_left(st.al.anchors_c, j), ([], []))
        cs.append(st.coord[j])
        js.append(j)
    for i in st.left_b:
        if i in st.claim or st.b_rows[i].role in SIDE_ROLES:
            continue
        hit = by_gap.get(bisect.bisect_left(st.al.anchors_b, i))  # as many anchors before i as before j: same gap
        if hit is None:
            continue
        j = _nearest(i, *hit)
        if j is not None and st.room(j, i):
            st.take(i, j, _POSITION)


def _claim_by_data_flow(st: _Claims) -> None:
    """Evidence 3: data flow into / out of a group whose kernel is a fused one (not capped: an eager op's kernel
    does one op). Rounds: each sees the members as they were when it began (claims made in a round join in the
    next), the nearest member wins, ties to the group claimed first and its earliest member. A kernel left out of
    one round can only join a later one through a member claimed since, within FLOW_LOOKBACK of it: only those are
    looked at again."""
    b_rows = st.b_rows
    left_b_set = set(st.left_b)
    todo = st.left_b
    while todo:
        seen = len(st.claim)  # members as the round began: rank < seen
        new: list[int] = []
        for i in todo:
            if i in st.claim or b_rows[i].role in SIDE_ROLES:
                continue
            best = None
            for m in range(i - FLOW_LOOKBACK, i + FLOW_LOOKBACK + 1):
                if st.rank.get(m, seen) >= seen:
                    continue
                j = st.claim[m][0]
                if st.caps[j] is not None or (b_rows[i].is_gemm and st.all_ops[j] and "mm" not in st.all_ops[j]):
                    continue
                if not st.room(j, i):
                    continue
                p, q = (i, m) if i < m else (m, i)
                if feeds(b_rows[p], b_rows[q]):
                    key = (abs(m - i), st.first_rank[j], st.rank[m])
                    if best is None or key < best[0]:
                        best = (key, j, m)
            if best is not None:
                st.take(i, best[1], f"data flow: its tensor passes to/from {short_name(b_rows[best[2]].name, 48)}")
                new.append(i)
        near = {x for i in new for x in range(i - FLOW_LOOKBACK, i + FLOW_LOOKBACK + 1)}
        todo = sorted(x for x in near & left_b_set if x not in st.claim)


def _groups_of_claims(st: _Claims) -> dict[int, Group]:
    """One group per claiming candidate; members claimed by position alone that no tensor links go back."""
    groups_by_c: dict[int, Group] = {}
    for i, (j, how) in sorted(st.claim.items()):
        g = groups_by_c.setdefault(j, Group(fused=[j], members=[]))
        g.members.append(i)
        g.evidence[i] = how
    for j, g in groups_by_c.items():
        for i in _unlinked(g, st.b_rows, st.coord[j]):
            g.members.remove(i)
            del g.evidence[i], st.claim[i]
        if j in st.chain_for:
            ch = st.chain_for[j]
            g.edges = [e for e in ch.edges if e[0] in g.members and e[1] in g.members] if not ch.backward else None
            # the other kernels of the same attention op call (cuDNN's memset, its dO·O and dQ-cast kernels) are
            # part of the replacement, not new work
            call = st.c_rows[j].op_index
            if call >= 0:
                g.fused += [x for x in st.left_c if x != j and st.c_rows[x].op_index == call and x not in st.claimed_c]
                st.claimed_c.update(g.fused)
        if st.optimizer_fused is not None and j == st.optimizer_fused[0]:
            g.fused += [x for x in st.optimizer_fused[1] if x not in st.claimed_c and x not in groups_by_c]
            st.claimed_c.update(g.fused)
    return groups_by_c


def _claim_epilogues(st: _Claims, groups_by_c: dict[int, Group]) -> list[tuple[int, int, str]]:
    """Evidence 4: a matched GEMM whose candidate kernel names an epilogue op absorbs the pointwise kernel it feeds.
    Returns the alignment pairs that remain pairs (absorbed GEMM pairs become groups)."""
    b_rows, c_rows, al = st.b_rows, st.c_rows, st.al
    n_b, n_c = len(b_rows), len(c_rows)
    pair_of_b = {p[0]: p for p in al.pairs}
    absorbed: set[tuple[int, int, str]] = set()
    for i in st.left_b:
        if i in st.claim or b_rows[i].is_gemm or b_rows[i].role in SIDE_ROLES or i in st.chain_of:
            continue  # an epilogue is pointwise work: a GEMM, a split-K reduction or attention scores are not
        ops_i = _base_ops(b_rows[i])
        for p in range(i - 1, max(-1, i - FLOW_LOOKBACK - 1), -1):
            pr = pair_of_b.get(p)
            if pr is None or not b_rows[p].is_gemm or not feeds(b_rows[p], b_rows[i]):
                continue
            cj = pr[1]
            if abs(al.base_coord(cj, n_c, n_b) - p) > FLOW_LOOKBACK:
                continue  # a 'reordered' pair from elsewhere in the step (same M, N, K): not this call's GEMM
            if ops_i and ops_i <= _epilogue_ops(c_rows[cj], b_rows[p]):
                g = groups_by_c.get(cj) or Group(fused=[cj], members=[p])
                g.evidence.setdefault(p, "GEMM with the same M, N, K; its epilogue now does the work")
                g.members = sorted({*g.members, i})
                g.evidence[i] = f"epilogue: {'+'.join(sorted(ops_i))} named by the candidate GEMM"
                groups_by_c[cj] = g
                st.claim[i] = (cj, g.evidence[i])
                absorbed.add(pr)
                del pair_of_b[p]
                break
    return [p for p in al.pairs if p not in absorbed] if absorbed else list(al.pairs)


def _claim_side_work(st: _Claims, groups_by_c: dict[int, Group]) -> None:
    """Side work (a cuBLAS workspace memset, a split-K reduction) of a replaced op call leaves with it."""
    b_rows = st.b_rows
    group_of_call = {b_rows[m].op_index: g for g in groups_by_c.values() for m in g.members if b_rows[m].op_index >= 0}
    for i in st.left_b:
        g = group_of_call.get(b_rows[i].op_index)
        if i not in st.claim and b_rows[i].role in SIDE_ROLES and g is not None:
            g.side.append(i)
            st.claim[i] = (g.fused[0], "side work of a replaced op call")


def _strays(groups_by_c: dict[int, Group], b_rows: list) -> set[tuple[int, int]]:
    """(member, candidate) pairs where a member claimed by ops shares no tensor (element count and dtype) with any
    other member of its group, all of whose tensors are known: the op name matched, the data did not (the FuseLens
    dual-GEMM kernel names a mul; the nearest eager mul was an RMSNorm's fp32 ·(1 + w), not the gating mul)."""
    out = set()
    for j, g in groups_by_c.items():
        if len(g.members) < 3 or g.edges is not None:
            continue
        sigs = {}
        for m in g.members:
            io = b_rows[m].io
            if io.output is None or not io.inputs:
                sigs = None
                break
            # a half of a member's tensor links too (RoPE's rotate_half: neg of one half, cat of both)
            sigs[m] = {(n, t.dtype) for t in (*io.inputs, io.output) for n in (t.numel, 2 * t.numel)}
        if sigs is None:
            continue
        for m in g.members:
            if not g.evidence.get(m, "").startswith("ops"):
                continue
            others = set().union(*(v for k, v in sigs.items() if k != m))
            if not sigs[m] & others:
                out.add((m, j))
    return out


def _unlinked(g: Group, b_rows: list, coord: float) -> list[int]:
    """Members a group must give back: those claimed by position alone that no tensor links to another member. Sitting
    in the same gap is no evidence that two left-over kernels were fused into one (Qwen H100 with its embedding's
    index_select kernel renamed to a bare user kernel and the arange beside it gone: the user kernel "fused" both).
    If no member is linked, the nearest one stays: one kernel replaced by one, a swap."""
    if len(g.members) < 2:
        return []
    linked = {x for p, c, _ in flow_edges(b_rows, g.members) for x in (p, c)}
    loose = [m for m in g.members if g.evidence[m] == _POSITION and m not in linked]
    if len(loose) == len(g.members):
        loose.remove(min(loose, key=lambda m: (abs(m - coord), m)))
    return loose


def _nearest(i: int, coords: list[float], js: list[int]) -> int | None:
    """The candidate of one gap nearest to base position i (ties: the later one), or None beyond
    MAX_CLAIM_DISTANCE. coords increase strictly with js, so the nearest is a neighbour of i's insertion point."""
    p = bisect.bisect_left(coords, i)
    best = None
    for x in range(max(0, p - 2), min(len(coords), p + 2)):
        d = abs(i - coords[x])
        if d <= MAX_CLAIM_DISTANCE and (best is None or (d, -js[x]) < best[0]):
            best = ((d, -js[x]), js[x])
    return None if best is None else best[1]


def _kernel_choices(b_rows: list, c_rows: list, al: Alignment) -> tuple[list[Group], set[int], set[int]]:
    """Pair op instances (kernels sharing one launching aten op call) that have the same op and shapes on both
    sides but different kernels, within EXTRA_ANCHORS gaps of each other."""

    def instances(rows, positions):
        inst: dict[tuple, list[int]] = {}
        for p in positions:
            r = rows[p]
            if r.op_index >= 0 and str(r.op_name).startswith("aten::") and r.io.inputs:
                # an attention call by its problem (align's key), whatever K / V layout it was handed
                what = r.key[3:] if r.attn is not None else r.dims
                inst.setdefault((r.op_index, r.op_name, what), []).append(p)
        return [(k[1], k[2], v) for k, v in inst.items()]

    b_inst = instances(b_rows, al.unmatched_b)
    # per (op, shapes): the candidate instances in order, their gap (non-decreasing along the list) and a "next
    # still free" pointer, so the first free instance within EXTRA_ANCHORS gaps is a bisection, not a scan (an op
    # repeated in every layer has as many instances as layers)
    by_sig: dict[tuple, _Queue] = {}
    for cop, cdims, cpos in instances(c_rows, al.unmatched_c):
        by_sig.setdefault((cop, cdims), _Queue()).add(bisect.bisect_left(al.anchors_c, cpos[0]), cpos)
    groups: list[Group] = []
    taken_b: set[int] = set()
    taken_c: set[int] = set()
    for op, dims, bpos in b_inst:
        queue = by_sig.get((op, dims))
        if queue is None:
            continue
        kb = bisect.bisect_left(al.anchors_b, bpos[0])
        cpos = queue.take_first(kb - EXTRA_ANCHORS, kb + EXTRA_ANCHORS)
        if cpos is None:
            continue
        g = Group(fused=list(cpos), members=list(bpos), kind="kernel choice")
        for m in bpos:
            g.evidence[m] = f"same op {op} with the same shapes ({dims}) runs other kernels"
        groups.append(g)
        taken_b.update(bpos)
        taken_c.update(cpos)
    return groups, taken_b, taken_c


class _Queue:
    """Items with non-decreasing keys; take_first(lo, hi) removes and returns the first item still there whose key
    is within [lo, hi]. Removed slots are skipped through path-compressed "next free" pointers."""

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.items: list = []
        self.next: list[int] = []

    def add(self, key: int, item) -> None:
        self.keys.append(key)
        self.items.append(item)
        self.next.append(len(self.next))

    def _free(self, x: int) -> int:
        nxt = self.next
        root = x
        while root < len(nxt) and nxt[root] != root:
            root = nxt[root]
        while x < len(nxt) and nxt[x] != x:  # compress the path
            nxt[x], x = root, nxt[x]
        return root

    def take_first(self, lo: int, hi: int):
        x = self._free(bisect.bisect_left(self.keys, lo))
        if x >= len(self.keys) or self.keys[x] > hi:
            return None
        self.next[x] = x + 1
        return self.items[x]


def is_vendor_kernel(row) -> bool:
    """A kernel from a vendor library (ATen, cuBLAS, cuDNN, CUTLASS, CUB, NCCL, Tensile, …): it does what its
    library call does. Triton kernels (Inductor, templates, Liger, FuseLens, a user's) and unknown names are not."""
    lib = str(row.library or "")
    return bool(lib) and not lib.startswith("Triton")


def _claim_cap(row, base_names: frozenset[str]) -> int | None:
    """How many baseline kernels one candidate kernel may replace: none if the baseline runs a kernel of that name
    too (an extra copy of old work, not new work); a vendor kernel computes its library call and nothing more (an
    eager aten::mul kernel replaces one mul kernel: a swap; cuBLAS 'gemm_relu' replaces mm + relu); a memcpy/memset
    one op; Triton kernels have no cap."""
    if row.name in base_names:
        # two ranks of one job run the same kernels, a few more or fewer per step (HTA trace_filter: 577 vs 552):
        # their left-over copies are added and removed work. Claiming let them "replace" their neighbours: 78 swaps,
        # and a user kernel's extra copy fused the two GEMMs of its gap
        return 0
    if row.kind != "kernel":
        return 1
    op = str(row.op_name or "")
    if op.startswith("aten::"):
        return max(1, len(canonical_ops(op)))
    if is_vendor_kernel(row):
        return max(1, len(row.name_ops))
    return None


def _ops_free(spent: dict[str, int], ops: frozenset[str], call: int) -> bool:
    """May a capped candidate kernel take one more baseline kernel computing `ops` (of op call `call`)? Each op it
    computes replaces one op call: cuBLAS 'gemm_relu' takes an mm and a relu, but an addmm kernel never takes two
    addmm calls (two ranks of one job: 2 of 6 spurious fusions were that) nor an mm and an addmm. Kernels of one op
    call share its ops (an eager layer_norm's two kernels)."""
    return all(op not in spent or (call >= 0 and spent[op] == call) for op in ops)


def _epilogue_ops(c_row, b_gemm) -> frozenset[str]:
    """Ops a candidate GEMM kernel names beyond the baseline GEMM it is paired with, source by source (kernel name,
    launching op, classifier): what its epilogue may have absorbed ('…gemm_bf16…_gelu_bias' for an addmm: gelu; an
    addmm for an mm: add). A GEMM paired with its own twin absorbs nothing: on two ranks of one job, 4 of 6 spurious
    fusions were a matched GEMM "absorbing" the next GEMM its output fed, and a Tensile '…_Bias_…' kernel names an
    add whatever its call does."""
    c_ops = c_row.name_ops | c_row.op_ops
    if "mm" not in c_ops:
        return frozenset()
    extra = (c_row.name_ops - b_gemm.name_ops) | (c_row.op_ops - b_gemm.op_ops)
    return extra - {"mm"}


def _intermediates(g: Group, b_rows: list, c_rows: list) -> None:
    edges = g.edges if g.edges is not None else flow_edges(b_rows, g.members)
    # a fused GEMM kernel that saves its GEMM outputs for the backward (classify.name_facts) still writes them
    saves = len(g.fused) == 1 and name_facts(str(c_rows[g.fused[0]].name)).saves_gemm_outputs
    by_p: dict[int, Intermediate] = {}
    for p, cpos, t in edges:
        by_p.setdefault(p, Intermediate(t, p, [], saves and bool(b_rows[p].is_gemm))).consumers.append(cpos)
    g.intermediates = [by_p[p] for p in sorted(by_p)]
    shared = merged_operand(g, b_rows)  # a GEMM merge reads its shared operand once: the other reads avoided
    if shared is not None:
        g.intermediates.append(Intermediate(shared[0], g.members[0], shared[1], shared_operand=True))
    # the tensors that could pass inside the group known: every member's output but the last's (nothing in the group
    # runs after it to read it: an Inductor kernel ending the group, whose args do not say which it wrote) and every
    # member's inputs but the first's. An output of unknown dtype (a cat over a TensorList) is fine once every
    # intermediate it passes on took its reader's dtype (the finite check below)
    known = all(
        (b_rows[m].io.inputs or k == 0) and (b_rows[m].io.output is not None or k == len(g.members) - 1)
        for k, m in enumerate(g.members)
    )
    # one kernel replaced by one kernel: no tensor passes between replaced kernels, 0 bytes avoided by the rule
    g.bytes_complete = len(g.members) == 1 or (bool(known) and all(not math.isnan(i.nbytes) for i in g.intermediates))


def member_bytes(row) -> float:
    """Estimated HBM bytes one kernel moves: the cost model's figure (analyzer.cost), the one every surface shows;
    NaN when it has none (unknown is never filled in from another model)."""
    v = float(row.bytes) if row.bytes is not None else float("nan")
    return v if np.isfinite(v) else float("nan")
