"""Fusible work in one run's representative step: groups of kernels one fused kernel could replace.

Reads the step the diff reads (analyzer.diff.align.sequence: kernels in launch order, median durations, the cost
model's bytes, tensors from analyzer.opinfo.dataflow) and finds, in this order (a kernel joins one group at most):

* **explicit attention**: QKᵀ GEMM … softmax … PV GEMM (analyzer.diff.attention.attention_chains, by shapes);
* **memory-bound groups**: pointwise / reduction / normalization kernels joined by the tensors they pass
  (analyzer.diff.flow.flow_edges: same element count and dtype, latest producer), between compute anchors (GEMMs,
  attention, collectives). A group may reach across an anchor that neither reads from it nor feeds it (HF GEGLU:
  GELU, then the up GEMM, then the gated product), never across one that does both (RMSNorm → q projection →
  RoPE). Each group is named by what it computes (norm, norm + residual, RoPE, gated activation, cross-entropy,
  optimizer, pointwise chain);
* **GEMM epilogues**: a lone activation / bias / residual kernel reading a GEMM's output;
* **GEMM pairs sharing an input** whose outputs meet in a gated product (act(x·W_gate) · (x·W_up)): one dual GEMM
  computes both and writes only the product. It overlaps the gated-activation group; both are kept, and a plan
  takes one of them.

Position alone is never evidence: every member is tied to another by a tensor or, for attention, by shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzer.diff.align import RunSeq
from analyzer.diff.attention import attention_chains
from analyzer.diff.flow import FLOW_LOOKBACK, flow_edges
from analyzer.opinfo import names
from analyzer.opinfo.tensors import Tensor

# kernels a fused memory-bound kernel can absorb
FUSIBLE_CATEGORIES = frozenset(["pointwise", "reduction", "normalization"])
# work that stays a kernel of its own: the anchors memory-bound groups sit between
ANCHOR_CATEGORIES = frozenset(["gemm", "attention", "communication"])
ACTIVATIONS = frozenset(["gelu", "silu", "relu", "sigmoid", "tanh", "mish", "hardswish", "leaky_relu", "elu"])
EPILOGUE_OPS = ACTIVATIONS | {"add", "mul", "copy", "to", "_to_copy", "clamp"}
OPTIMIZER_WORDS = ("Optimizer.step", "_foreach_", "_fused_adam", "_fused_sgd", "adamw", "Adam.step", "SGD.step")
CROSS_ENTROPY_OPS = frozenset(["log_softmax", "_log_softmax", "nll_loss", "cross_entropy", "nll_loss_forward"])


@dataclass
class Group:
    """Kernels one fused kernel could replace (positions in the step, increasing)."""

    pattern: str  # 'attention', 'dual GEMM', 'GEMM epilogue', 'RMSNorm', 'RoPE', 'pointwise chain', …
    kind: str  # 'attention' | 'dual_gemm' | 'epilogue' | 'memory'
    members: list[int]
    edges: list[tuple[int, int, Tensor]] = field(default_factory=list)  # tensors passed inside the group
    gemms: list[int] = field(default_factory=list)  # GEMM members (attention, dual GEMM, the epilogue's GEMM)
    evidence: list[str] = field(default_factory=list)
    backward: bool = False
    causal_known: bool | None = None  # attention: None = whether the mask is causal is not recorded


def _ops(row) -> frozenset[str]:
    return row.op_ops or row.name_ops or frozenset()


def _is_anchor(row) -> bool:
    return row.kind == "kernel" and (row.is_gemm or row.category in ANCHOR_CATEGORIES)


def _fusible(row) -> bool:
    return (
        row.kind == "kernel"
        and row.category in FUSIBLE_CATEGORIES
        and not row.is_gemm
        and row.role != "helper"
        and names.is_fusible(_ops(row))
    )


def _optimizer(row) -> bool:
    text = " ".join([str(row.op_name or ""), *(str(c) for c in (row.context or ()))])
    return any(w.lower() in text.lower() for w in OPTIMIZER_WORDS)


def _components(nodes: list[int], edges: list[tuple[int, int, Tensor]]) -> list[list[int]]:
    parent = {n: n for n in nodes}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p, c, _ in edges:
        if p in parent and c in parent:
            a, b = find(p), find(c)
            if a != b:
                parent[max(a, b)] = min(a, b)
    out: dict[int, list[int]] = {}
    for n in nodes:
        out.setdefault(find(n), []).append(n)
    return [sorted(v) for v in out.values()]


def _stages(comp: list[int], edges_in: dict[int, list[int]], upto: int) -> list[list[int]]:
    """Split a group where a member depends, through kernels outside the group, on another member: one kernel cannot
    run both before and after the GEMM between them (RMSNorm → q projection → RoPE; the residual sum read again
    after the MLP). stage(member) = max(stage of a member it reads, 1 + the deepest stage a non-member it reads
    depends on); a group is one stage."""
    members = set(comp)
    stage: dict[int, int] = {}
    after: dict[int, int] = {}  # non-member -> deepest member stage it depends on (absent: none)
    for i in range(comp[0], upto + 1):
        deps = edges_in.get(i, ())
        if i in members:
            s = 0
            for p in deps:
                if p in members:
                    s = max(s, stage.get(p, 0))
                elif p in after:
                    s = max(s, after[p] + 1)
            stage[i] = s
        else:
            d = [stage[p] for p in deps if p in members and p in stage] + [after[p] for p in deps if p in after]
            if d:
                after[i] = max(d)
    out: dict[int, list[int]] = {}
    for m in comp:
        out.setdefault(stage[m], []).append(m)
    return [out[k] for k in sorted(out)]


def _siblings(rows: list, nodes: list[int]) -> list[tuple[int, int]]:
    first: dict[int, int] = {}
    pairs = []
    for n in nodes:
        node = rows[n].node
        if node is not None and node >= 0:
            if node in first:
                pairs.append((first[node], n))
            else:
                first[node] = n
    return pairs


def _label(rows: list, members: list[int]) -> tuple[str, bool]:
    ops: set[str] = set()
    n_bwd = 0
    for m in members:
        ops |= _ops(rows[m])
        node = rows[m].node
        n_bwd += bool(
            (node is not None and node >= 0)
            or names.is_backward_text(rows[m].op_name)
            or any("backward" in o for o in _ops(rows[m]))
        )
    backward = n_bwd > 0
    if any(_optimizer(rows[m]) for m in members):
        return "optimizer step", backward
    if ops & CROSS_ENTROPY_OPS:
        return "cross-entropy", backward
    base = names.fusion_pattern(ops)
    if base in ("RMSNorm", "LayerNorm"):
        first = rows[members[0]]
        if "add" in _ops(first) and len(first.io.inputs) >= 2 and first.io.inputs[0].numel == first.io.inputs[1].numel:
            return f"residual add + {base}", backward
        return base, backward
    acts = {o.removesuffix("_backward") for o in ops} & ACTIVATIONS
    if base.endswith("gating") or (acts and "mul" in ops):
        act = sorted(acts)
        label = base or f"{'/'.join(act)} gating"
        return ("gated activation backward" if backward else label), backward
    if base:
        return base, backward
    if "softmax" in ops or "_softmax" in ops:
        return "softmax", backward
    if not backward:
        return "pointwise chain", False
    return ("pointwise chain (backward)" if n_bwd == len(members) else "pointwise chain (forward + backward)"), True


def find_groups(seq: RunSeq) -> list[Group]:
    """Every fusible group of the step (see the module doc); members of one group never appear in another, except
    a dual GEMM, which overlaps the gated activation it would absorb."""
    rows = seq.records
    kernels = [i for i, r in enumerate(rows) if r.kind == "kernel"]
    groups, taken = _whole_region_groups(rows, kernels)
    edges = flow_edges(rows, kernels, lookback=FLOW_LOOKBACK)
    groups += _memory_groups(rows, kernels, taken, edges)
    groups.extend(_dual_gemms(rows, groups, edges))
    return groups


def _whole_region_groups(rows: list, kernels: list[int]) -> tuple[list[Group], set[int]]:
    """(groups, their kernels): explicit attention, eager attention backward and the optimizer step, found first so
    their kernels join no pointwise group."""
    groups: list[Group] = []
    taken: set[int] = set()
    for ch in attention_chains(rows, kernels):
        groups.append(
            Group(
                "explicit attention (QKᵀ, mask, softmax, PV)",
                "attention",
                list(ch.members),
                list(ch.edges),
                [ch.qk, ch.pv],
                [ch.evidence[m] for m in ch.members if m in ch.evidence],
            )
        )
        taken.update(ch.members)

    for g in _attention_backward(rows, kernels, taken):
        groups.append(g)
        taken.update(g.members)
    opt = _optimizer_step(rows, kernels, taken)
    if opt is not None:
        groups.append(opt)
        taken.update(opt.members)
    return groups, taken


def _memory_groups(rows: list, kernels: list[int], taken: set[int], edges: list) -> list[Group]:
    """Connected fusible kernels not taken, cut into stages: each piece of two or more a memory-bound group, a lone
    kernel a GEMM epilogue when it reads a GEMM's output."""
    nodes = [i for i in kernels if i not in taken and _fusible(rows[i]) and rows[i].io.inputs]
    node_set = set(nodes)
    inner = [(p, c, t) for p, c, t in edges if p in node_set and c in node_set]
    for a, b in _siblings(rows, nodes):
        inner.append((a, b, None))  # kernels of one autograd node (MulBackward0's two muls) read one gradient
    edges_in: dict[int, list[int]] = {}
    for p, c, _ in edges:
        edges_in.setdefault(c, []).append(p)
    pieces = []
    for comp in _components(nodes, inner):
        pieces.extend(_stages(comp, edges_in, comp[-1]))
    # each edge to the piece holding both its ends (one pass: a 100k-kernel step has tens of thousands of pieces)
    piece_of = {m: i for i, piece in enumerate(pieces) for m in piece}
    by_piece: dict[int, list] = {}
    for e in inner:
        i = piece_of.get(e[0])
        if i is not None and i == piece_of.get(e[1]):
            by_piece.setdefault(i, []).append(e)
    tensor_of = {(p, c): t for p, c, t in edges}
    groups: list[Group] = []
    for i, piece in enumerate(pieces):
        sub = by_piece.get(i, [])
        for comp in _components(piece, sub):
            cs = set(comp)
            g_edges = [(p, c, t) for p, c, t in sub if p in cs and c in cs and t is not None]
            if len(comp) >= 2:
                label, backward = _label(rows, comp)
                groups.append(Group(label, "memory", comp, g_edges, backward=backward))
            else:
                epi = _epilogue(rows, comp[0], edges_in, tensor_of)
                if epi is not None:
                    groups.append(epi)
    return groups


BWD_SPAN = 10  # kernels either side of a softmax backward that an eager attention backward spans (HF Llama: 5)


def _attention_backward(rows: list, kernels: list[int], taken: set[int]) -> list[Group]:
    """Eager attention backward: around a softmax backward over [B, H, S_q, S_k] scores, the batched GEMMs that read or
    write a tensor of the score size (dP = dO·Vᵀ, dV = Pᵀ·dO before it; dQ = dS·K, dK = dSᵀ·Q after it) and the
    kernels between them that move scores (casts, the scale's gradient). A flash / cuDNN backward computes them in one
    kernel and writes no score tensor."""
    out = []
    pos = {k: i for i, k in enumerate(kernels)}
    for s in kernels:
        r = rows[s]
        if s in taken or "softmax_backward" not in _ops(r) or not r.io.inputs:
            continue
        score = r.io.inputs[0].numel
        lo, hi = pos[s] - BWD_SPAN, pos[s] + BWD_SPAN
        window = [k for k in kernels[max(lo, 0) : hi + 1] if k not in taken]

        def moves_scores(k, score=score) -> bool:
            io = rows[k].io
            return any(t.numel == score for t in (*io.inputs, *([io.output] if io.output is not None else ())))

        gemms = [k for k in window if rows[k].is_gemm and rows[k].gemm is not None and rows[k].gemm.batch > 1]
        gemms = [k for k in gemms if moves_scores(k)]
        before, after = [k for k in gemms if k < s], [k for k in gemms if k > s]
        if len(before) < 1 or len(after) < 2:
            continue
        first, last = before[-2] if len(before) >= 2 else before[-1], after[1]
        members = sorted(
            {k for k in window if first <= k <= last and (k in gemms or (_fusible(rows[k]) and moves_scores(k)))}
        )
        g = [k for k in members if k in gemms]
        out.append(
            Group(
                "explicit attention backward (dP, softmax, dQ, dK, dV)",
                "attention_backward",
                members,
                [],
                g,
                [
                    f"softmax backward over [{_shape(r.io.inputs[0])}] scores with {len(g)} batched GEMMs of that size "
                    "around it: an eager attention's backward"
                ],  # fmt: skip
                backward=True,
            )
        )
        taken.update(members)
    return out


def _optimizer_step(rows: list, kernels: list[int], taken: set[int]) -> Group | None:
    """The multi-tensor (`_foreach_`) kernels of an optimizer step: one fused optimizer kernel replaces them."""
    members = [
        k
        for k in kernels
        if k not in taken and _optimizer(rows[k]) and any(o.startswith("_foreach_") for o in _ops(rows[k]))
    ]
    if len(members) < 2:
        return None
    return Group(
        "optimizer step (foreach)",
        "optimizer",
        members,
        evidence=[f"{len(members)} multi-tensor (_foreach_) kernels under the optimizer's step"],
    )


def _epilogue(rows: list, k: int, edges_in: dict[int, list[int]], tensor_of: dict) -> Group | None:
    """A lone activation / bias / residual-add kernel whose large input is a GEMM's output written just before."""
    r = rows[k]
    ops = _ops(r)
    if not ops or not ops <= EPILOGUE_OPS or names.is_backward_text(r.op_name):
        return None
    src = [p for p in edges_in.get(k, ()) if rows[p].is_gemm and rows[p].kind == "kernel"]
    if not src:
        return None
    g = src[-1]
    what = "activation" if ops & ACTIVATIONS else ("residual add" if "add" in ops else "pointwise")
    return Group(
        f"GEMM epilogue ({'+'.join(sorted(ops))})",
        "epilogue",
        [g, k],
        [(g, k, tensor_of[(g, k)])],
        [g],
        [f"{what} reads the GEMM's [{_shape(rows[g].io.output)}] output straight back"],
    )


def _shape(t: Tensor | None) -> str:
    return "?" if t is None else ", ".join(map(str, t.shape))


def _dual_gemms(rows: list, groups: list[Group], edges) -> list[Group]:
    """GEMM pairs with one input (x·W_gate, x·W_up: same M, K, N, dtype, and x from the same producer) whose outputs
    meet in a gated product, directly or through an activation."""
    src: dict[int, list[int]] = {}
    for p, c, _ in edges:
        src.setdefault(c, []).append(p)
    out = []
    for g in groups:
        if g.kind != "memory":
            continue
        for m in g.members:
            if "mul" not in _ops(rows[m]):
                continue
            ins = src.get(m, [])
            direct = [p for p in ins if rows[p].is_gemm]
            via_act = [
                (a, q)
                for a in ins
                if a in g.members and _ops(rows[a]) & ACTIVATIONS
                for q in src.get(a, [])
                if rows[q].is_gemm
            ]
            for up in direct:
                for act, gate in via_act:
                    if gate == up or not _same_problem(rows[gate], rows[up]):
                        continue
                    if not _same_input(rows[gate], rows[up]):
                        continue
                    members = sorted({gate, up, act, m})
                    gm = rows[gate].gemm
                    out.append(
                        Group(
                            "dual GEMM (gate + up GEMMs, gating)",
                            "dual_gemm",
                            members,
                            [e for e in edges if e[0] in members and e[1] in members],
                            [gate, up],
                            [
                                f"two GEMMs read one input (M={gm.m}, K={gm.k}, N={gm.n}, {gm.dtype}) and their "
                                "outputs meet in the gated product: one dual GEMM computes both and writes only "
                                "the product"
                            ],
                        )
                    )
    return out


def _same_problem(a, b) -> bool:
    ga, gb = a.gemm, b.gemm
    return (
        ga is not None
        and gb is not None
        and (ga.batch, ga.m, ga.n, ga.k, ga.dtype) == (gb.batch, gb.m, gb.n, gb.k, gb.dtype)
    )


def _same_input(a, b) -> bool:
    """Both GEMMs read an activation of one shape and dtype (the producer is not asked: shape-based data flow hands
    a second reader of x the latest unread tensor of x's size, e.g. the residual sum beside the normed x)."""
    ta = a.io.inputs[0] if a.io.inputs else None
    tb = b.io.inputs[0] if b.io.inputs else None
    return ta is not None and tb is not None and ta.shape == tb.shape and ta.dtype == tb.dtype
