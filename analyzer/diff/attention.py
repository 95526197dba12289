"""Eager attention chains in a baseline step, and which attention kernel replaced one.

An eager attention (HF `attn_implementation="eager"`, a hand-written softmax(QKᵀ)V) runs, per layer:

    [repeat_kv copies of K and V]  QKᵀ GEMM  ·scale  +mask  softmax(fp32)  cast  PV GEMM  [layout copy of O]

Every tensor between the two GEMMs is a [B, H, S_q, S_k] score or probability tensor that goes to HBM and back. A
flash / cuDNN / memory-efficient kernel computes the same chain in one pass and never writes them. Its launching SDPA
op records Q, K, V (analyzer.opinfo.attention), so a chain is recognised by SHAPES: a QKᵀ GEMM of batch B·H, M = S_q,
N = S_k, K = D and a PV GEMM of batch B·H, M = S_q, K = S_k, N = D_v. Position is never evidence: a chain's members
may only go to an attention kernel of those shapes, or to a kernel that itself moves a tensor of the score size
(Inductor's fused softmax over an eager attention), never to a neighbour whose op names merely overlap (an RMSNorm
kernel's add and mul).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzer.opinfo import names
from analyzer.opinfo.tensors import Tensor

CHAIN_SPAN = 16  # kernels from the QKᵀ GEMM to the PV GEMM (eager HF: 5; with dropout, masked_fill, casts: < 10)
COPY_LOOKBACK = 8  # the K/V head-repeat copies sit just before the QKᵀ GEMM (HF repeat_kv: 2 and 1 kernels before)
COPY_OPS = frozenset(["copy"])


@dataclass
class Chain:
    qk: int  # base position of the QKᵀ GEMM
    pv: int  # base position of the PV GEMM
    batch_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    v_head_dim: int
    members: list[int]  # base positions, increasing
    evidence: dict[int, str]
    edges: list[tuple[int, int, Tensor]] = field(default_factory=list)  # (producer, consumer, tensor) inside it
    taken: bool = False
    backward: bool = False  # the gradient of an eager attention (four GEMMs around softmax_backward)

    @property
    def score_numel(self) -> int:
        return self.batch_heads * self.q_len * self.kv_len

    def fits(self, att) -> bool:
        """Does this chain compute attention call `att` (analyzer.opinfo.attention.Attention)?"""
        return (
            att.batch * att.heads == self.batch_heads
            and att.q_len == self.q_len
            and att.kv_len == self.kv_len
            and att.head_dim == self.head_dim
            and att.v_head_dim == self.v_head_dim
        )

    def label(self) -> str:
        return f"B·H={self.batch_heads} S_q={self.q_len} S_k={self.kv_len} D={self.head_dim}"

    def matches(self, att) -> bool:
        """Does attention call `att` (forward or backward) compute this chain?"""
        return att.backward == self.backward and self.fits(att)


def _is_copy(row) -> bool:
    ops = row.op_ops or row.name_ops
    return bool(ops) and ops <= COPY_OPS and not row.is_gemm


def _same(a: Tensor | None, b: Tensor | None) -> bool:
    return a is not None and b is not None and a.numel == b.numel and (a.dtype == b.dtype or None in (a.dtype, b.dtype))


def _batched(row) -> bool:
    """A batched GEMM (bmm, baddbmm, a matmul of 3-D+ tensors): attention's per-head products."""
    return row.gemm.batch > 1 or names.op_base(row.op_name or "") in ("bmm", "baddbmm")


def attention_chains(rows: list, left: list[int]) -> list[Chain]:
    """Eager attention chains among the left-over baseline kernels `left` (increasing positions)."""
    left_set = set(left)
    gemms = [i for i in left if rows[i].is_gemm and rows[i].gemm is not None and rows[i].role == "main"]
    chains: list[Chain] = []
    used: set[int] = set()
    for qk in gemms:
        g1 = rows[qk].gemm
        if qk in used or not _batched(rows[qk]):
            continue
        pv = next(
            (
                p
                for p in gemms
                if qk < p <= qk + CHAIN_SPAN
                and p not in used
                and _batched(rows[p])
                and rows[p].gemm.batch == g1.batch
                and rows[p].gemm.m == g1.m
                and rows[p].gemm.k == g1.n
            ),
            None,
        )
        if pv is None:
            continue
        chain = _build(rows, left_set, qk, pv)
        if chain is not None:
            chains.append(chain)
            used.update(chain.members)
    return chains


def backward_chains(rows: list, left: list[int]) -> list[Chain]:
    """Eager attention backward chains among the left-over baseline kernels: around a softmax_backward over
    [B·H, S_q, S_k] scores, the batched GEMMs of the gradient (dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q: each
    with batch B·H and two of S_q, S_k, D as M, N, K), the score-sized kernels between the first and the last of
    them (casts, the scale's gradient), and the head sums of GQA's repeat_kv backward right after. A flash / cuDNN
    backward kernel of those shapes computes them in one pass and never writes dP or dS."""
    left_set = set(left)
    chains: list[Chain] = []
    used: set[int] = set()
    for sm in left:
        r = rows[sm]
        if "softmax_backward" not in (r.op_ops | r.name_ops) or r.io.output is None or sm in used:
            continue
        chain = _backward_chain(rows, left_set, used, sm)
        if chain is not None:
            chains.append(chain)
            used.update(chain.members)
    return chains


def _backward_chain(rows: list, left_set: set[int], used: set[int], sm: int) -> Chain | None:
    """The backward chain around the softmax_backward at sm, or None with fewer than two gradient GEMMs."""
    score = rows[sm].io.output.numel
    grads = _gradient_gemms(rows, left_set, used, sm, score)
    if len(grads) < 2:
        return None
    bh = rows[grads[0]].gemm.batch
    plane = score // bh
    dims = sorted({d for i in grads for d in (rows[i].gemm.m, rows[i].gemm.n, rows[i].gemm.k)})
    head_dim = min(dims)
    qk = [d for d in dims if d != head_dim] or [head_dim]
    q_len, kv_len = (qk[0], qk[-1]) if len(qk) > 1 else (qk[0], plane // qk[0])
    lo, hi = min(grads[0], sm), max(grads[-1], sm)
    members = set(grads) | {sm}
    evidence = {sm: f"softmax_backward over the B·H={bh} S_q={q_len} S_k={kv_len} scores"}
    for i in grads:
        evidence[i] = f"attention-gradient GEMM B·H={bh} ({rows[i].gemm.label()}): the attention's shapes"
    for i in range(lo + 1, hi):
        t = rows[i]
        if i in left_set and i not in members and not t.is_gemm and t.kind == "kernel" and (
            (t.io.output is not None and t.io.output.numel == score) or any(x.numel == score for x in t.io.inputs)
        ):  # fmt: skip
            members.add(i)
            evidence[i] = "works on the score-sized gradient between the attention-gradient GEMMs"
    # GQA: repeat_kv's backward sums dK and dV over each KV head's query heads, right after the last GEMM
    qkv = bh * q_len * head_dim
    for i in range(hi + 1, min(len(rows), hi + 4)):
        t = rows[i]
        if i in left_set and "sum" in (t.op_ops | t.name_ops) and any(x.numel == qkv for x in t.io.inputs):
            members.add(i)
            evidence[i] = "sums dK / dV over the query heads sharing a KV head (repeat_kv's backward)"
    return Chain(grads[0], grads[-1], bh, q_len, kv_len, head_dim, head_dim, sorted(members), evidence,
                 backward=True)  # fmt: skip


def _gradient_gemms(rows: list, left_set: set[int], used: set[int], sm: int, score: int) -> list[int]:
    """Batched GEMMs within CHAIN_SPAN of sm whose batch divides the score size and whose two of M, N, K span one
    [S_q, S_k] plane of it: the attention's gradient GEMMs."""
    near = [
        i
        for i in range(max(0, sm - CHAIN_SPAN), min(len(rows), sm + CHAIN_SPAN + 1))
        if i in left_set and i not in used and rows[i].is_gemm and rows[i].gemm is not None
        and rows[i].role == "main" and _batched(rows[i])
    ]  # fmt: skip
    grads = []
    for i in near:
        g = rows[i].gemm
        if g.batch > 1 and score % g.batch == 0 and {g.m * g.n, g.m * g.k, g.n * g.k} & {score // g.batch}:
            grads.append(i)
    return grads


def _build(rows: list, left: set[int], qk: int, pv: int) -> Chain | None:
    g1, g2 = rows[qk].gemm, rows[pv].gemm
    score = g1.batch * g1.m * g1.n
    shapes = f"B·H={g1.batch} S_q={g1.m} S_k={g1.n}"
    evidence = {
        qk: f"QKᵀ GEMM {shapes} D={g1.k}: the attention's Q and K shapes",
        pv: f"PV GEMM {shapes} D_v={g2.n}: the attention's P and V shapes",
    }
    scores = []
    for i in range(qk + 1, pv):
        r = rows[i]
        if i not in left or r.is_gemm or r.kind != "kernel":
            continue
        out = r.io.output
        if (out is not None and out.numel == score) or any(t.numel == score for t in r.io.inputs):
            scores.append(i)
            evidence[i] = f"works on the {shapes} scores between the QKᵀ and PV GEMMs"
    if not any("softmax" in (rows[i].op_ops | rows[i].name_ops) for i in scores):
        return None  # two GEMMs with no softmax over the scores between them (an MLP's up and down GEMM): no attention
    chained = [qk, *scores, pv]
    edges = _score_edges(rows, chained, score)
    members = set(chained)
    # K / V head repeats (GQA: repeat_kv) feeding the GEMMs: the attention kernel reads each KV head once
    for gemm_pos, what in ((qk, "K"), (pv, "V")):
        want = rows[gemm_pos].io.inputs[1:2]
        for i in range(qk - 1, max(-1, qk - COPY_LOOKBACK - 1), -1):
            r = rows[i]
            if i in left and i not in members and _is_copy(r) and want and _same(r.io.output, want[0]):
                members.add(i)
                edges.append((i, gemm_pos, r.io.output))
                evidence[i] = f"copies {what} to every query head for the {'QKᵀ' if what == 'K' else 'PV'} GEMM"
                break
    # the layout copy of the PV output ([B, H, S, D_v] -> [B, S, H, D_v]): the attention kernel writes O that way
    o = rows[pv].io.output
    for i in range(pv + 1, min(len(rows), pv + 3)):
        r = rows[i]
        if i in left and _is_copy(r) and o is not None and any(_same(t, o) for t in r.io.inputs):
            members.add(i)
            edges.append((pv, i, o))
            evidence[i] = "layout copy of the PV GEMM's output (the attention kernel writes O in that layout)"
            break
    return Chain(qk, pv, g1.batch, g1.m, g1.n, g1.k, g2.n, sorted(members), evidence, edges)


def _score_edges(rows: list, chained: list[int], score: int) -> list[tuple[int, int, Tensor]]:
    """Score tensors passed along the chain: each reader takes the latest earlier member's output of the score size
    and its dtype (the mask, [1, 1, S_q, S_k], is read from outside)."""
    edges = []
    for ci, c in enumerate(chained[1:], start=1):
        for t in rows[c].io.linkable:
            if t.numel != score:
                continue
            for p in reversed(chained[:ci]):
                out = rows[p].io.output
                if out is not None and out.numel == score and _same(out, t):
                    edges.append((p, c, out))
                    break
    return edges


def moves_scores(c_row, chain: Chain) -> bool:
    """May candidate kernel c_row take a member of `chain` by another rule? Only if one of its own tensors has the
    chain's score size (a fused softmax over the same scores); an attention kernel takes chains by shape alone."""
    io = c_row.io
    tensors = [*io.inputs, *([io.output] if io.output is not None else [])]
    return any(t.numel == chain.score_numel for t in tensors)
