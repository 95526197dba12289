"""GEMM merges: one candidate GEMM that computes what several baseline GEMMs computed side by side.

Two GEMMs that share an operand run as one over the other operands stacked: the gate and up weight gradients
dWg = dgᵀ·x and dWu = duᵀ·x ([3072, 8192]·[8192, 768] each) as [dWg; dWu] = [dg | du]ᵀ·x ([6144, 8192]·[8192, 768],
FuseLens' training backward), or q, k and v projections of one input as one QKV GEMM. The evidence is the
algebra, never the position: the merged GEMM has the members' shared dimensions and the sum of their stacked one,

    M-stacked: every member (M_i, N, K), the candidate (ΣM_i, N, K): B [K, N] shared;
    N-stacked: every member (M, N_i, K), the candidate (M, ΣN_i, K): A [M, K] shared,

so its FLOPs (2·M·N·K) are exactly the members' sum; same dtype and batch, no bias on either side (an addmm adds
work a plain GEMM does not), at least two members, each within the candidate's stretch of the program (its gap
between anchors, analyzer.diff.match) and MAX_CLAIM_DISTANCE kernels of it. Members are taken nearest first while
they fit; a claim needs the sum to come out exact, else nothing is claimed. K-stacked sums (dX = dg·Wg + du·Wu as
one GEMM over [dg | du]) add the two products: not a merge this rule claims.

No tensor passes between the merged GEMMs, so a merge avoids no intermediate; it avoids re-reads: the shared
operand is read once instead of once per GEMM (merged_operand). [dWg; dWu] reads x [8192, 768] bf16 once
where the two GEMMs read it twice: 8192 × 768 × 2 B = 12,582,912 B avoided. The shared operand is the one whose
shape every member has (B [K, N] when stacked along M, A [M, K] along N), so the figure comes from the shapes.
"""

from __future__ import annotations

import bisect

from analyzer.opinfo.gemm import Gemm
from analyzer.opinfo.tensors import Tensor

MERGE_EVIDENCE = "GEMM merge"


def _stacked(c: Gemm, b: Gemm) -> str | None:
    """'m' or 'n': the dimension along which baseline GEMM b can be one block of candidate GEMM c, else None."""
    if b.dtype != c.dtype or b.batch != c.batch or b.bias is not None or c.bias is not None:
        return None
    if (b.n, b.k) == (c.n, c.k) and 0 < b.m < c.m:
        return "m"
    if (b.m, b.k) == (c.m, c.k) and 0 < b.n < c.n:
        return "n"
    return None


def _pick(c: Gemm, found: list[tuple[float, int, Gemm, str]]) -> tuple[str, list[int]] | None:
    """Members nearest first while they fit, per stacked dimension; the first dimension whose sum comes out exact
    with two or more members."""
    for dim in ("m", "n"):
        want = getattr(c, dim)
        total, picked = 0, []
        for _, i, g, d in sorted(x for x in found if x[3] == dim):
            size = getattr(g, d)
            if total + size <= want:
                total += size
                picked.append(i)
            if total == want:
                break
        if total == want and len(picked) >= 2:
            return dim, sorted(picked)
    return None


def merged_operand(g, b_rows: list) -> tuple[Tensor, list[int]] | None:
    """A merge group's shared operand and the members that read it again (all but the first: the merged GEMM reads
    it once), or None for a group that is no merge. g: a matcher group (analyzer.diff.match.Group)."""
    if len(g.members) < 2 or not all(g.evidence.get(m, "").startswith(MERGE_EVIDENCE) for m in g.members):
        return None
    gs = [b_rows[m].gemm for m in g.members]
    a = gs[0]
    if all((x.n, x.k) == (a.n, a.k) for x in gs):  # stacked along M: B [K, N] shared
        shape, rec = (a.k, a.n), a.b
    elif all((x.m, x.k) == (a.m, a.k) for x in gs):  # stacked along N: A [M, K] shared
        shape, rec = (a.m, a.k), a.a
    else:
        return None
    if a.batch > 1:
        shape = (a.batch, *shape)
    # the recorded operand when its elements are the shape's (it knows a broadcast batch stored once), else the shape
    t = rec if rec is not None and rec.dtype and rec.numel == Tensor(shape, a.dtype).numel else Tensor(shape, a.dtype)
    return t, g.members[1:]


def claim_gemm_merges(st, max_distance: int) -> None:
    """Claims for every left-over candidate GEMM that merges left-over baseline GEMMs (module doc). st: the
    matcher's claims (analyzer.diff.match._Claims)."""
    b_rows, c_rows, left_b = st.b_rows, st.c_rows, st.left_b
    for j in st.left_c:
        cg = c_rows[j].gemm
        if not isinstance(cg, Gemm) or c_rows[j].kind != "kernel" or st.caps[j] == 0 or st.n_claims[j]:
            continue  # a kernel the baseline also runs (cap 0) is no new implementation of anything
        cj = st.coord[j]
        first = bisect.bisect_left(left_b, cj - max_distance - 1)
        last = bisect.bisect_right(left_b, cj + max_distance + 1)
        found = []
        for i in left_b[first:last]:
            bg = b_rows[i].gemm
            if i in st.claim or not isinstance(bg, Gemm) or i in st.chain_of or (i, j) in st.banned:
                continue
            if abs(i - cj) > max_distance or not st.in_stretch(j, i):
                continue
            dim = _stacked(cg, bg)
            if dim is not None:
                found.append((abs(i - cj), i, bg, dim))
        pick = _pick(cg, found)
        if pick is None:
            continue
        dim, members = pick
        parts = " + ".join(str(getattr(b_rows[i].gemm, dim)) for i in members)
        shared = "B" if dim == "m" else "A"
        how = (
            f"{MERGE_EVIDENCE}: {len(members)} GEMMs sharing {shared} computed as one, "
            f"{dim.upper()} = {parts} = {getattr(cg, dim)} ({cg.dims()} {cg.dtype}: the FLOPs add up)"
        )
        for i in members:
            st.take(i, j, how)
