"""What a fused GEMM kernel's own name and op let it claim (analyzer.diff.match reads these while claiming).

A FuseLens kernel spells its work out (analyzer.opinfo.classify.name_facts): how many GEMMs it runs, that its other
ops are an epilogue (no prologue), whether it also writes its GEMM outputs. Its dispatcher op's recorded shapes say
which GEMMs (analyzer.opinfo.gemm.fused_gemm_problems). So it replaces only baseline GEMMs of those (M, N, K), and
no kernel whose output one of its GEMM members reads: the H200 Llama SwiGLU pair's dual GEMM had taken the down
projection's GEMM (the gating mul's output feeds it), and the compiled Llama's the RMSNorm's weight mul before the
gate and up projections.
"""

from __future__ import annotations

from analyzer.diff.flow import flow_edges
from analyzer.opinfo.classify import name_facts
from analyzer.opinfo.gemm import fused_gemm_problems


def fused_problems(row) -> list[tuple[int, int, int]] | None:
    """The GEMMs (M, N, K) a fused GEMM kernel runs by its op's shapes (gemm.fused_gemm_problems), for a kernel whose
    name says how many GEMMs it runs; None: no constraint."""
    if row.kind != "kernel" or name_facts(str(row.name)).gemms is None:
        return None
    probs = fused_gemm_problems(row.op_name, row.io.inputs)
    return list(probs) if probs else None


def problem_at(left: list | None, g) -> int | None:
    """Where baseline GEMM g is among a candidate's GEMMs still free (either orientation: Cᵀ = Bᵀ·Aᵀ is the same
    work); -1 when the candidate's GEMMs are not known (no constraint); None when g is none of them."""
    if left is None:
        return -1
    if g is None or g.batch != 1:
        return None
    for x, (m, n, k) in enumerate(left):
        if g.k == k and (g.m, g.n) in ((m, n), (n, m)):
            return x
    return None


def prologues(groups_by_c: dict, b_rows: list, c_rows: list) -> set[tuple[int, int]]:
    """(member, candidate) pairs where the candidate is a GEMM kernel with no prologue (classify.name_facts: its
    other ops run after its GEMMs, as the FuseLens kernels' names say) and the member is work before one of its GEMMs:
    a non-GEMM member whose output a GEMM member of the group reads (an RMSNorm's weight mul before the gate and up
    projections is no part of the dual GEMM)."""
    out = set()
    for j, g in groups_by_c.items():
        if len(g.members) < 2 or not name_facts(str(c_rows[j].name)).epilogue_only:
            continue
        for p, c, _ in flow_edges(b_rows, g.members):
            if b_rows[c].is_gemm and not b_rows[p].is_gemm:
                out.add((p, j))
    return out
