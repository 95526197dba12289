"""Full accounting of a diff: every GPU op of both representative steps lands in exactly one bucket.

Baseline ops:
  matched      the same work runs in the candidate: an alignment pair (same kernel, or a GEMM of the same M, N, K),
               a kernel choice (the same aten op and shapes on other kernels), or a helper / memset of a matched call
  fused        a member (or side work) of a group whose replacing kernel is a Triton kernel (Inductor, Liger,
               FuseLens, a user's): fused into a named kernel
  replaced     a member of a group whose replacing kernel is a library kernel (cuDNN / flash attention, a cuBLAS
               epilogue GEMM, an ATen kernel of another op)
  removed      work the candidate does not do at all: copies and casts, fills, mask and index building, memcpy /
               memset (REMOVABLE_OPS), left over with no claim
  unexplained  everything else: listed by kernel, never hidden
Candidate ops: matched, fused (a group's replacing kernel) or new.

`explained_time_share` = the baseline step's GPU time in the first four buckets / its whole GPU time: the diff's
own measure of how much of the baseline it can account for. Below RELIABLE_SHARE its groups are flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzer.diff.align import RunSeq
from analyzer.diff.match import GroupResult, is_vendor_kernel
from analyzer.fmt import clean_json
from analyzer.opinfo.names import COMPARISON_OPS

BASE_BUCKETS = ("matched", "fused", "replaced", "removed", "unexplained")
CAND_BUCKETS = ("matched", "fused", "new")
# Ops that only move, fill or index data, or build masks (comparisons, where, triu/tril, arange): a fused program
# can drop them entirely (Inductor folds a cast or a contiguous copy into the next kernel's loads, builds a causal
# mask from indices, never materialises an expanded tensor).
REMOVABLE_OPS = frozenset(
    {"copy", "fill", "arange", "triu", "tril", "where", "masked_fill", "expand", "index", "full", "zeros", "ones",
     "empty", "view", "slice", "select", "cat", "stack", "zero", "_index_put_impl", "index_put", "lift_fresh",
     # host-side checks (HF's mask code asks `.all()` and reads the answer back): a compiled graph folds them
     "all", "any", "_local_scalar_dense", "item", "is_nonzero"}
    | COMPARISON_OPS
)  # fmt: skip
# Under this share of the baseline's time explained, the groups rest on too little to be reported as facts.
RELIABLE_SHARE = 0.80


@dataclass
class Accounting:
    base_bucket: list[str]  # one per baseline op of the representative step (launch order)
    cand_bucket: list[str]  # one per candidate op
    base_time_us: dict[str, float]  # bucket -> GPU time per step
    cand_time_us: dict[str, float]
    base_count: dict[str, int]
    cand_count: dict[str, int]
    unexplained: list[dict] = field(default_factory=list)  # baseline kernels in no bucket but 'unexplained'
    removed: list[dict] = field(default_factory=list)
    new: list[dict] = field(default_factory=list)

    @property
    def explained_time_share(self) -> float:
        total = sum(self.base_time_us.values())
        if total <= 0:
            return 1.0
        return 1.0 - self.base_time_us["unexplained"] / total

    def base_shares(self) -> dict[str, float]:
        """Each baseline bucket's share of the baseline's GPU time per step (all 0 when it has none)."""
        total = sum(self.base_time_us.values()) or 1.0
        return {b: self.base_time_us[b] / total for b in BASE_BUCKETS}

    @property
    def reliable(self) -> bool:
        return self.explained_time_share >= RELIABLE_SHARE

    def text(self) -> str:
        """One line: where the baseline's time went, bucket by bucket (the same words on every surface)."""
        total = sum(self.base_time_us.values())
        parts = [
            f"{b} {self.base_time_us[b] / total:.0%}" for b in BASE_BUCKETS if total > 0 and self.base_count[b] > 0
        ]
        return f"explained {self.explained_time_share:.1%} of the baseline's GPU time per step ({', '.join(parts)})"

    def to_json(self) -> dict:
        return clean_json(
            {
                "explained_time_share": self.explained_time_share,
                "reliable": self.reliable,
                "base": {b: {"count": self.base_count[b], "time_us": self.base_time_us[b]} for b in BASE_BUCKETS},
                "candidate": {b: {"count": self.cand_count[b], "time_us": self.cand_time_us[b]} for b in CAND_BUCKETS},
                "unexplained": self.unexplained,
                "removed": self.removed,
                "new": self.new,
            }
        )


def _removable(row) -> bool:
    if row.kind != "kernel":
        return True  # a memcpy / memset the candidate does not issue
    ops = row.op_ops or row.name_ops
    return bool(ops) and ops <= REMOVABLE_OPS and not row.is_gemm


def kernel_list(rows: list) -> list[dict]:
    """The diff's one way of listing kernels: by name, op and shapes, with count and time per step, most time
    first (unmatched, unexplained, removed and new kernels alike)."""
    agg: dict[tuple, dict] = {}
    for r in rows:
        key = (str(r.name), str(r.op_name), r.dims)
        a = agg.get(key)
        if a is None:
            a = agg[key] = {
                "name": str(r.name),
                "category": str(r.category),
                "op": str(r.op_name),
                "shapes": key[2],
                "count_per_step": 0,
                "time_us_per_step": 0.0,
            }
        a["count_per_step"] += 1
        a["time_us_per_step"] += float(r.dur_us)
    return sorted(agg.values(), key=lambda a: -a["time_us_per_step"])


def account(bseq: RunSeq, cseq: RunSeq, res: GroupResult) -> Accounting:
    """The buckets of both steps from the matcher's result (analyzer.diff.match.group_kernels)."""
    b_rows, c_rows = bseq.records, cseq.records
    bb, cb = _claimed_buckets(res, c_rows, len(b_rows))
    _fill_base_buckets(bb, b_rows, res)
    _fill_candidate_buckets(cb, c_rows, res)
    bt, bn = _tally(b_rows, bb, BASE_BUCKETS)
    ct, cn = _tally(c_rows, cb, CAND_BUCKETS)
    return Accounting(
        base_bucket=bb,
        cand_bucket=cb,
        base_time_us=bt,
        cand_time_us=ct,
        base_count=bn,
        cand_count=cn,
        unexplained=kernel_list([r for r, b in zip(b_rows, bb, strict=True) if b == "unexplained"]),
        removed=kernel_list([r for r, b in zip(b_rows, bb, strict=True) if b == "removed"]),
        new=kernel_list([r for r, b in zip(c_rows, cb, strict=True) if b == "new"]),
    )


def _claimed_buckets(res: GroupResult, c_rows: list, n_base: int) -> tuple[list[str], list[str]]:
    """Both steps' buckets from the alignment's pairs and the groups ('' where neither placed a kernel)."""
    bb = ["" for _ in range(n_base)]
    cb = ["" for _ in c_rows]
    for i, j, _ in res.pairs:
        bb[i], cb[j] = "matched", "matched"
    for g in res.groups:
        if g.kind == "kernel choice":
            for m in g.members:
                bb[m] = "matched"
            for j in g.fused:
                cb[j] = "matched"
            continue
        library = all(is_vendor_kernel(c_rows[j]) for j in g.fused)
        for m in [*g.members, *g.side]:
            bb[m] = "replaced" if library else "fused"
        for j in g.fused:
            cb[j] = "fused"
    return bb, cb


def _fill_base_buckets(bb: list[str], b_rows: list, res: GroupResult) -> None:
    """Baseline kernels no pair or group placed: a helper of a matched call, removed work, or unexplained."""
    matched_calls = {b_rows[i].op_index for i, _, _ in res.pairs if b_rows[i].op_index >= 0}
    for i, r in enumerate(b_rows):
        if bb[i]:
            continue
        if r.role in ("helper", "memop") and r.op_index >= 0 and r.op_index in matched_calls:
            bb[i] = "matched"  # a cuBLAS workspace memset or split-K reduction of a GEMM call that still runs
        elif _removable(r):
            bb[i] = "removed"
        else:
            bb[i] = "unexplained"


def _fill_candidate_buckets(cb: list[str], c_rows: list, res: GroupResult) -> None:
    """Candidate kernels no pair or group placed: a helper of a matched call, else new."""
    c_matched_calls = {c_rows[j].op_index for _, j, _ in res.pairs if c_rows[j].op_index >= 0}
    for j, r in enumerate(c_rows):
        if not cb[j] and r.role in ("helper", "memop") and r.op_index >= 0 and r.op_index in c_matched_calls:
            cb[j] = "matched"  # the candidate's split-K reduce or workspace memset of a GEMM call that pairs
        cb[j] = cb[j] or "new"


def _tally(rows: list, buckets: list[str], names: tuple[str, ...]) -> tuple[dict[str, float], dict[str, int]]:
    """Time and count per bucket."""
    t = dict.fromkeys(names, 0.0)
    n = dict.fromkeys(names, 0)
    for r, b in zip(rows, buckets, strict=True):
        t[b] += float(r.dur_us)
        n[b] += 1
    return t, n
