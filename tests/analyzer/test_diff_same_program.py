"""Two runs of the same program never show a fusion: nothing was fused between them, so every kernel left over after
the alignment is added or removed work (listed under `unmatched`), not a group of baseline kernels one candidate
kernel "replaced".

* The real case: rank 0 and rank 1 of one distributed job (HTA trace_filter, 577 and 552 kernels in their
  representative steps). Before the rule below, 4-7 "fusion groups" and up to 734,134,272 B "avoided", under both
  alignments: a matched GEMM "absorbing" the next GEMM its output fed (its epilogue test counted the GEMM's own mm as
  an epilogue op), and one cuTLASS addmm kernel taking two addmm calls (its cap counted addmm's ops, mm and add).
* The same real step repeated as layers, with another seeded share of its kernels dropped on each side (what ranks,
  step boundaries and sampling do): the same zero. Before: GEMMs absorbing GEMMs again, a Tensile '…_Bias_…' GEMM
  paired with its twin absorbing an add, an mm paired with an addmm from elsewhere in the step absorbing the
  residual add, and a user kernel's extra copy fusing the two GEMMs of its gap.
* A vendor kernel replaces one op call per op it computes; a kernel claimed by position alone must pass a tensor to
  or from another member of its group.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from analyzer.diff import blocks as diff_blocks
from analyzer.diff import diff_runs
from analyzer.diff.align import RunSeq, align, sequence
from analyzer.diff.match import GroupResult, group_kernels
from analyzer.opinfo.classify import classify_names
from analyzer.summary import summarize
from tests.analyzer.test_diff import _renamed, summary_of
from tests.conftest import TRACES, loaded_trace

RANKS = ("hta_filter_rank0", "hta_filter_rank1")


@pytest.mark.parametrize("exact_work", [0, float("inf")], ids=["windowed", "difflib"])
@pytest.mark.parametrize("order", [RANKS, RANKS[::-1]], ids=["rank0-vs-rank1", "rank1-vs-rank0"])
def test_two_ranks_of_one_job_claim_no_fusion_and_avoid_no_bytes(order, exact_work, monkeypatch):
    monkeypatch.setattr(diff_blocks, "EXACT_WORK", exact_work)  # inf: difflib's matching blocks, as first written
    base, cand = (summary_of(str(TRACES[name])) for name in order)
    cd = diff_runs(base, [cand]).candidates[0]
    assert sorted(cd.kernels_per_step) == [552, 577]
    assert cd.fusions == []
    assert cd.hbm_bytes_avoided_per_step == 0
    assert all(len(s.replaces) == 1 for s in cd.swaps + cd.kernel_choices)
    # the kernels one rank ran more or fewer of are named, not hidden
    assert sum(k["count_per_step"] for k in cd.unmatched_base) > 50
    assert sum(k["count_per_step"] for k in cd.unmatched_candidate) > 50


def test_a_left_over_copy_of_a_baseline_kernel_replaces_nothing():
    """rank 0 as baseline: every kernel rank 1 runs, rank 0 runs too (names), so none of rank 1's left-over copies
    replaced anything — before, 75 of them were 'swaps' of their neighbours and 6 were 'fusions'."""
    base, cand = (summary_of(str(TRACES[name])) for name in RANKS)
    cd = diff_runs(base, [cand]).candidates[0]
    assert cd.fusions == [] and cd.swaps == []


def _edited(name: str, rename: Callable[[str], str], drop: str | None = None, ops: dict | None = None):
    """A real trace with kernels renamed (re-classified), kernels dropped (name contains `drop`) and launching ops
    renamed: the input changes, the code under test does not."""
    trace = copy.copy(loaded_trace(TRACES[name]))
    g = trace.gpu_ops.copy()
    g["name"] = g["name"].astype(str).map(rename)
    if drop:
        g = g[~g["name"].str.contains(drop, regex=False)]
    if ops:
        g["op_name"] = g["op_name"].map(lambda o: ops.get(o, o))
    cls = classify_names(g["name"])
    for col in ("category", "library", "ops"):
        g[col] = cls[col].to_numpy()
    trace.gpu_ops = g
    return summarize(trace)


@pytest.mark.parametrize("order", [RANKS, RANKS[::-1]], ids=["rank0-vs-rank1", "rank1-vs-rank0"])
def test_one_gemm_kernel_replaces_one_op_call_per_op(order):
    """The same two ranks, the candidate's cuTLASS / cuBLAS GEMM kernels renamed (another library build): GEMMs still
    pair by M, N, K, and the left-over ones are no baseline kernel's twin. An addmm kernel computes mm and add once:
    before, 3 'fusions' each way of one addmm kernel taking two addmm calls, an addmm and a bmm, an addmm and an add."""
    base = summary_of(str(TRACES[order[0]]))
    cand = _edited(
        order[1], lambda n: n.replace("s1688gemm_", "s1688gemm_v2_").replace("ampere_sgemm_", "ampere_sgemm_v2_")
    )
    cd = diff_runs(base, [cand]).candidates[0]
    assert len(cd.matched_gemms) > 100
    assert cd.fusions == [] and cd.hbm_bytes_avoided_per_step == 0


def test_kernels_that_only_share_a_gap_are_not_one_fusion():
    """Qwen H100: the embedding's index_select kernel replaced by a new kernel whose names say nothing, and the
    position ids' arange kernel beside it gone. Both left-over baseline kernels sit in the new kernel's gap, but no
    tensor passes between them: the nearer one is a swap, the other is removed work (before: a 2-kernel fusion)."""
    cand = _edited(
        "h100_qwen",
        lambda n: "user_kernel_0" if "indexSelectLargeIndex" in n else n,
        drop="elementwise_kernel_with_index",
        ops={"aten::index_select": ""},
    )
    cd = diff_runs(summary_of(str(TRACES["h100_qwen"])), [cand]).candidates[0]
    assert cd.fusions == []
    (swap,) = cd.swaps
    assert swap.replaced_ops == ["aten::index_select"] and "position" in swap.evidence[0]
    assert [k["op"] for k in cd.unmatched_base] == ["aten::arange"]


@functools.cache
def _step(name: str) -> pd.DataFrame:
    return sequence(summary_of(str(TRACES[name])), name).rows


def _layers(rows: pd.DataFrame, layers: int, seed: int, drop: float) -> RunSeq:
    """A real step repeated `layers` times (as layers repeat), with a seeded random `drop` share of its GPU ops gone."""
    r = pd.concat([rows] * layers, ignore_index=True)
    keep = np.random.default_rng(seed).random(len(r)) >= drop
    r = r[keep].reset_index(drop=True)
    r["pos"] = np.arange(len(r))
    return RunSeq("x", r, [], [0], 0)


def _groups(base: RunSeq, cand: RunSeq) -> GroupResult:
    return group_kernels(base, cand, align(base.rows, cand.rows))


def _fusions(res: GroupResult) -> list:
    return [g for g in res.groups if g.kind == "fusion"]


# (trace, seed): a seed that made the old rules claim a fusion; the share dropped is 10% on each side
@pytest.mark.parametrize(
    ("name", "seed"),
    [
        ("h100_qwen", 25),  # an mm paired with an addmm from elsewhere (same M, N, K) absorbed the residual add
        ("mi300_triton", 36),  # a matched Tensile GEMM absorbed the next GEMM its output fed: 268 MB
        ("mi300_triton", 2),  # ... and Inductor's residual add: '_Bias_' in both twins' names is no epilogue op
        ("hta_amd", 1),  # MI250: the same, the next addmm (with GEMMs excluded: an ATen add)
        ("hta_filter_rank0", 3),  # 18 groups of a GEMM absorbing the next GEMM, up to 786 MB each
    ],
)
def test_the_same_step_with_other_kernels_dropped_on_each_side_claims_no_fusion(name, seed):
    rows = _step(name)
    base, cand = _layers(rows, 6, seed, 0.10), _layers(rows, 6, 1000 + seed, 0.10)
    res = _groups(base, cand)
    assert _fusions(res) == []
    assert res.unmatched_b and res.unmatched_c  # the dropped kernels' twins, listed


def test_an_extra_copy_of_a_user_kernel_does_not_fuse_the_gemms_of_its_gap():
    """The FuseLens gating kernel renamed 'user_kernel_0' and launched bare (its name says nothing: evidence by
    position), six layers. The baseline lacks one layer's user kernel, the candidate that layer's up and down GEMMs:
    the candidate's copy sits alone in the gap where two baseline GEMMs are left — before, a 'fusion' of both."""
    summary = _renamed(
        "hf_geglu_bf16",
        "fuselens-gating",
        {"fuselens_glu_gating_kernel": "user_kernel_0"},
        ops={"fuselens::glu_gating": ""},
    )
    rows = sequence(summary, "gating").rows
    assert rows["name"].str.startswith(("Memset", "nvjet", "user_kernel_0")).all()
    layers = pd.concat([rows] * 6, ignore_index=True)
    layer3 = layers.index[3 * len(rows) : 4 * len(rows)]
    names = layers["name"]
    user = [i for i in layer3 if names[i] == "user_kernel_0"]
    gemms = [i for i in layer3 if names[i].startswith("nvjet")][1:]  # the up and down GEMMs around the user kernel

    def without(drop: list[int]) -> RunSeq:
        r = layers.drop(index=drop).reset_index(drop=True)
        r["pos"] = np.arange(len(r))
        return RunSeq("x", r, [], [0], 0)

    base, cand = without(user), without(gemms)
    res = _groups(base, cand)
    assert res.groups == []
    assert [base.records[i].name[:5] for i in res.unmatched_b] == ["nvjet", "nvjet"]
    assert [cand.records[j].name for j in res.unmatched_c] == ["user_kernel_0"]
