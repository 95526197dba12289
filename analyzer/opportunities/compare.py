"""Closing the loop: each opportunity of the baseline's plan against what a fused run actually did.

For a candidate run, the diff's own grouping (analyzer.diff.align.align + analyzer.diff.match.group_kernels on the
same representative steps) says which candidate kernel replaced which baseline kernels. An opportunity is

* **taken** when every non-GEMM kernel it names was replaced by a fused kernel (or removed),
* **partly taken** when some were,
* **left on the table** when none were.

Achieved µs = the baseline time of its kernels − the candidate time standing in for them: a paired kernel's own
time, a fused kernel's time shared among the baseline kernels it replaced in proportion to their baseline time (one
Inductor kernel can absorb two opportunities: the residual add and the next RMSNorm), 0 for a kernel with no
counterpart.
"""

from __future__ import annotations

from analyzer.diff.align import align, sequence
from analyzer.diff.match import group_kernels
from analyzer.fmt import short_name
from analyzer.opportunities.predict import Plan, plan_opportunities


def predicted_vs_achieved(base_summary, cand_summary, plan: Plan | None = None, label: str = "candidate") -> dict:
    """{'label', 'rows': [{id, pattern, predicted_saved_us, achieved_saved_us, status, by, takers}], 'predicted_
    busy_us', 'achieved_busy_us', 'left_us'} for one candidate against the baseline's plan."""
    plan = plan if plan is not None else plan_opportunities(base_summary)
    bseq = plan.seq
    cseq = sequence(cand_summary, label)
    res = group_kernels(bseq, cseq, align(bseq.rows, cseq.rows))
    b_rows, c_rows = bseq.records, cseq.records
    stand = _StandIns(res, b_rows, c_rows)
    rows = [_row(o, stand, b_rows, c_rows) for o in plan.opportunities]
    return {
        "label": label,
        "rows": rows,
        "gpu_busy_us": plan.gpu_busy_us,
        "predicted_busy_us": plan.predicted_busy_us(),
        "achieved_busy_us": float(cand_summary.per_step.get("gpu_busy_us", float("nan"))),
    }


class _StandIns:
    """What the diff's grouping says of each baseline kernel (by position): its paired candidate kernel, the share of
    a fused kernel's time standing in for it, the fused kernel's name, whether it is in a group of several, and the
    kernels with no counterpart."""

    def __init__(self, res, b_rows, c_rows):
        self.paired = {i: j for i, j, _ in res.pairs}
        self.share: dict[int, float] = {}  # base pos -> candidate µs standing in for it
        self.fused_by: dict[int, str] = {}
        self.in_group: set[int] = set()
        for g in res.groups:
            if g.kind == "kernel choice":
                for m, j in zip(g.members, g.fused, strict=False):
                    self.paired.setdefault(m, j)
                continue
            base_t = sum(float(b_rows[m].dur_us) for m in g.members) or 1.0
            cand_t = sum(float(c_rows[j].dur_us) for j in g.fused)
            names = " + ".join(short_name(c_rows[j].name, 48) for j in g.fused)
            for m in g.members:
                self.share[m] = cand_t * float(b_rows[m].dur_us) / base_t
                self.fused_by[m] = names
                if len(g.members) > 1:
                    self.in_group.add(m)
        self.unmatched = set(res.unmatched_b)


def _row(o, stand: _StandIns, b_rows, c_rows) -> dict:
    """One opportunity: its predicted saving against the baseline time less what stands in for its kernels now."""
    now = sum(float(b_rows[m].dur_us) for m in o.members)
    stand_in = 0.0
    for m in o.members:
        if m in stand.share:
            stand_in += stand.share[m]
        elif m in stand.paired:
            stand_in += float(c_rows[stand.paired[m]].dur_us)
    # a dual GEMM, an attention kernel or an epilogue replaces its GEMMs too; a memory-bound group only itself
    whole = o.kind in ("dual_gemm", "attention", "epilogue")
    work = list(o.members) if whole else [m for m in o.members if not b_rows[m].is_gemm] or list(o.members)
    done = [
        m
        for m in work
        if m in stand.in_group or m in stand.unmatched or (o.kind == "dual_gemm" and m in stand.fused_by)
    ]
    status = "taken" if len(done) == len(work) else ("partly taken" if done else "left on the table")
    by = sorted({stand.fused_by[m] for m in o.members if m in stand.fused_by and m in stand.in_group})
    return {
        "id": o.id,
        "pattern": o.pattern,
        "alternative_to": o.alternative_to,
        "predicted_saved_us": o.saved_us,
        "achieved_saved_us": now - stand_in,
        "status": status,
        "by": by,
        "takers": list(o.takers),
    }


def table_rows(res: dict) -> list[dict]:
    """predicted_vs_achieved's rows as a table (the Fusion plan page and Compare show the same)."""
    out = []
    for r in res["rows"]:
        out.append(
            {
                "#": r["id"],
                "what": r["pattern"] + (f" (or #{r['alternative_to']})" if r["alternative_to"] else ""),
                "predicted saves (µs)": round(r["predicted_saved_us"], 1),
                "achieved (µs)": round(r["achieved_saved_us"], 1),
                "status": r["status"],
                "by": ", ".join(r["by"]) or "—",
                "who could": ", ".join(r["takers"]) or "nobody today",
            }
        )
    return out
