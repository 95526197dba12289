"""Data flow between the kernels of one step, and the HBM round trips a run still makes.

Kernels record no tensor identities, so a tensor passes from a producer to a reader when the producer's output
has the reader's input's element count and dtype and lies within FLOW_LOOKBACK kernels before it (flow_edges).
The matcher (analyzer.diff.match) reads these edges for a group's intermediates and its data-flow claims;
`remaining_round_trips` reads them for what a run still writes to HBM and reads straight back (the diff's "what
is left", and analyzer.opportunities' chains).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from analyzer.diff.align import RunSeq
from analyzer.diff.attention import attention_chains
from analyzer.fmt import finite
from analyzer.opinfo.names import POINTWISE_OPS
from analyzer.opinfo.tensors import Tensor

SIDE_ROLES = ("memop", "helper")  # not the work of an op call: never a fusion member on their own evidence
FRESH_SCAN = 8  # same-sized producers looked at for one not read yet, before the latest one is taken
FLOW_LOOKBACK = 8  # kernels between a producer and its reader; HF GEGLU eager: gelu -> mul is 2 apart


def feeds(producer, reader) -> bool:
    """Can the producer kernel's output be one of the reader's inputs? Same element count (views and reshapes are
    free) and dtype, and not two kernels of one op call (an op's kernels share its shapes, not a tensor)."""
    out = producer.io.output
    if out is None or siblings(producer, reader):
        return False
    return any(same_tensor(out, t) for t in reader.io.linkable)


def siblings(a, b) -> bool:
    """Two kernels of one op call share its shapes, not a tensor; two op calls of one derivative formula's autograd
    node (MulBackward0: grad·other and grad·self) compute separate gradients and do not feed each other. The kernels
    of a compiled backward graph or a custom op's backward (one node each) do (align.formula_node)."""
    return (a.op_index >= 0 and a.op_index == b.op_index) or (a.formula_node >= 0 and a.formula_node == b.formula_node)


def same_tensor(a: Tensor, b: Tensor) -> bool:
    return a.numel == b.numel and (a.dtype == b.dtype or None in (a.dtype, b.dtype))


def flow_edges(
    rows: list, order: list[int], lookback: int | None = None, consumers: set[int] | None = None
) -> list[tuple[int, int, Tensor]]:
    """(producer, consumer, tensor) edges among `order` (positions, increasing): each input of a consumer comes from
    the latest earlier producer whose output has its element count and dtype and that no earlier consumer read
    (else the latest such producer; each producer once per consumer).
    lookback: producers at most that many places earlier in `order`; consumers: only edges into these positions.

    Producers are indexed by element count, so each input walks back over same-sized outputs only, not over every
    earlier member of a 1000-kernel group."""
    by_numel: dict[int, list[int]] = {}  # element count -> places in `order` of producers with a known output
    for ci, ppos in enumerate(order):
        out = rows[ppos].io.output
        if out is not None:
            by_numel.setdefault(out.numel, []).append(ci)
    edges = []
    read: set[int] = set()  # producers whose output an earlier consumer already took
    for ci, cpos in enumerate(order):
        if consumers is not None and cpos not in consumers:
            continue
        reader = rows[cpos]
        start = 0 if lookback is None else max(0, ci - lookback)
        used: set[int] = set()
        for t in reader.io.linkable:
            places = by_numel.get(t.numel)
            if not places:
                continue
            hits = []  # matching producers, latest first; the first one nobody read yet wins (RoPE's add reads
            for x in range(bisect.bisect_left(places, ci) - 1, -1, -1):  # q·cos, not the cat that mul already read)
                pi = places[x]
                if pi < start or len(hits) >= FRESH_SCAN:
                    break
                ppos = order[pi]
                if ppos in used or siblings(rows[ppos], reader) or not same_tensor(rows[ppos].io.output, t):
                    continue
                hits.append(ppos)
                if ppos not in read:
                    break
            fresh = next((p for p in hits if p not in read), None)
            # a second reader of a tensor only for a reader whose op says what it reads (an aten op): an Inductor
            # kernel's recorded args mix its inputs with its outputs (the residual x beside the o_proj output)
            if fresh is not None or (hits and str(reader.op_name or "").startswith("aten::")):
                ppos = fresh if fresh is not None else hits[0]
                out = rows[ppos].io.output
                edges.append((ppos, cpos, out if out.dtype or not t.dtype else t))  # a cat's: its reader's dtype
                used.add(ppos)
        read |= used
    return edges


# --- what is left: round trips a run still makes --------------------------------------------------------------------


@dataclass
class RoundTrip:
    producer: int
    consumers: list[int]
    tensor: Tensor
    kind: str  # 'attention scores' | 'GEMM epilogue' | 'GEMM prologue' | 'pointwise chain'

    @property
    def bytes(self) -> float:
        return self.tensor.nbytes * (1 + len(self.consumers))


# what would keep each kind of round trip on chip (shown beside it)
ROUND_TRIP_FIXES = {
    "attention scores": "an attention kernel (SDPA: flash / cuDNN / memory-efficient) computes QKᵀ, mask, softmax and PV "
    "in one pass and never writes the scores",
    "GEMM epilogue": "a GEMM-epilogue fusion (GEMM + the pointwise work in one kernel) would keep this tensor on chip",
    "GEMM prologue": "fusing this kernel into the GEMM that reads its output (a prologue: e.g. RMSNorm into the QKV "
    "projections) would keep this tensor on chip",
    "pointwise chain": "fusing the two kernels would keep this tensor on chip",
}
PROLOGUE_LOOKBACK = 3  # a norm's output is read by the GEMM(s) right after it (q, k, v projections: 1-3 kernels)


def _is_pointwise(row) -> bool:
    if row.category in ("pointwise", "normalization"):
        return True
    ops = row.op_ops or row.name_ops
    return bool(ops) and ops <= POINTWISE_OPS


def _is_cast(row) -> bool:
    ops = row.op_ops or row.name_ops
    return bool(ops) and ops <= {"copy"} and not row.is_gemm


def remaining_round_trips(seq: RunSeq) -> list[RoundTrip]:
    """Tensors a run writes to HBM and reads straight back, by what would remove the round trip:
    - attention scores: inside an eager attention chain (QKᵀ GEMM … PV GEMM, analyzer.diff.attention);
    - GEMM epilogue: a GEMM output read by a pointwise / norm kernel;
    - pointwise chain: a pointwise / norm output read by another;
    - GEMM prologue: a normalization's output (or the cast that ends it) read by the GEMM(s) right after it. An
      Inductor/user norm kernel does not say which of its tensor args it wrote: the arg with the GEMM input's size
      and dtype is taken for its output (a norm writes its normalized input).
    Found by shape and order (flow_edges, FLOW_LOOKBACK); other producers whose output we cannot tell (Inductor or
    user kernels) are not counted, so this is a lower bound."""
    rows = seq.records
    order = list(range(len(rows)))
    chain_of = {m: ch for ch in attention_chains(rows, order) for m in ch.members}
    by_p = _read_back(rows, order, chain_of)
    for c in order:
        _add_prologue(rows, c, chain_of, by_p)
    return [by_p[p] for p in sorted(by_p)]


def _read_back(rows: list, order: list[int], chain_of: dict) -> dict[int, RoundTrip]:
    """Attention scores, GEMM epilogues and pointwise chains: flow edges into pointwise kernels and attention
    chain members, by producer."""
    consumers = {i for i in order if (_is_pointwise(rows[i]) or i in chain_of) and rows[i].io.inputs}
    by_p: dict[int, RoundTrip] = {}
    for p, cpos, t in flow_edges(rows, order, lookback=FLOW_LOOKBACK, consumers=consumers) if consumers else []:
        kind = _round_trip_kind(rows, p, cpos, chain_of)
        if kind is not None:
            by_p.setdefault(p, RoundTrip(p, [], t, kind)).consumers.append(cpos)
    return by_p


def _round_trip_kind(rows: list, p: int, cpos: int, chain_of: dict) -> str | None:
    """What a tensor from producer p read back by cpos is, or None when it is no round trip we name."""
    pr = rows[p]
    if p in chain_of and chain_of[p] is chain_of.get(cpos):
        return "attention scores"
    if pr.is_gemm:
        return None if rows[cpos].is_gemm else "GEMM epilogue"
    if _is_pointwise(pr):
        return "pointwise chain"
    return None


def _add_prologue(rows: list, c: int, chain_of: dict, by_p: dict[int, RoundTrip]) -> None:
    """A GEMM at c reading a normalization's output (or the cast that ends it) within PROLOGUE_LOOKBACK kernels
    before it: a GEMM prologue round trip, added to by_p."""
    r = rows[c]
    if not r.is_gemm or r.gemm is None or c in chain_of:
        return
    a = r.io.inputs[0] if r.io.inputs else None
    looked = 0
    for p in range(c - 1, -1, -1):
        pr = rows[p]
        if pr.kind != "kernel" or pr.role in SIDE_ROLES:
            continue  # a GEMM's workspace memset sits between it and the norm
        looked += 1
        if looked > PROLOGUE_LOOKBACK:
            break
        if pr.is_gemm and pr.kind == "kernel" and p != c:
            if pr.io.inputs and a is not None and same_tensor(pr.io.inputs[0], a):
                continue  # a sibling projection reading the same input (q, k, v): look past it
            break
        out = _norm_output(pr, a)
        if a is not None and out is not None and same_tensor(out, a) and p not in chain_of:
            rt = by_p.get(p)
            if rt is None:
                rt = by_p[p] = RoundTrip(p, [], out, "GEMM prologue")
            if rt.kind == "GEMM prologue":
                rt.consumers.append(c)
            break


def _norm_output(pr, a: Tensor | None) -> Tensor | None:
    """The tensor a normalization (or a cast) kernel wrote: its output, else, for a norm that does not say which
    arg it wrote, the arg with the GEMM input a's size and dtype."""
    out = pr.io.output if (pr.category == "normalization" or _is_cast(pr)) else None
    if out is None and pr.category == "normalization":
        out = next((t for t in pr.io.inputs if a is not None and same_tensor(t, a)), None)
    return out


def round_trip_json(seq: RunSeq, rt: RoundTrip, hbm_gbps: float | None = None) -> dict:
    """One round trip; time_at_roof_us: its bytes at the GPU's peak HBM bandwidth, the least time it costs (what a
    fusion removing it would save at most, if the kernels around it are memory-bound)."""

    rows = seq.records
    t = rt.tensor
    return {
        "kind": rt.kind,
        "producer": str(rows[rt.producer].name),
        "producer_op": str(rows[rt.producer].op_name),
        "readers": [str(rows[c].name) for c in rt.consumers],
        "shape": list(t.shape),
        "matrix": t.matrix(),
        "dtype": t.dtype,
        "bytes": t.nbytes,
        "round_trip_bytes": rt.bytes,
        "time_at_roof_us": rt.bytes / (hbm_gbps * 1e3) if hbm_gbps else float("nan"),
        "would_avoid": ROUND_TRIP_FIXES[rt.kind],
    }


def _aggregate_round_trips(items: list[dict]) -> list[dict]:
    """The same round trip in every layer becomes one entry with count_per_step (bytes summed)."""
    out: dict[tuple, dict] = {}
    for it in items:
        key = (it["kind"], it["producer"], it["producer_op"], tuple(it["readers"]), tuple(it["shape"]), it["dtype"])
        a = out.get(key)
        if a is None:
            out[key] = {**it, "count_per_step": 1}
        else:
            a["count_per_step"] += 1
            a["round_trip_bytes"] += it["round_trip_bytes"]
            a["time_at_roof_us"] += it["time_at_roof_us"]
    # ranked by time at the bandwidth roof (the same order as bytes on one GPU; unknown bytes last)
    return sorted(
        out.values(),
        key=lambda a: (
            -(a["time_at_roof_us"] if finite(a["time_at_roof_us"]) else 0),
            -(a["round_trip_bytes"] if finite(a["round_trip_bytes"]) else 0),
        ),
    )


def round_trip_rows(seq: RunSeq, hbm_gbps: float | None = None) -> list[dict]:
    """What a run still round-trips through HBM (remaining_round_trips), one row per kind of tensor per step,
    most time at the bandwidth roof first: RunFacts.remaining."""
    return _aggregate_round_trips([round_trip_json(seq, r, hbm_gbps) for r in remaining_round_trips(seq)])
