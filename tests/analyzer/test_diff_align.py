"""analyzer.diff.align on real traces.

* The alignment (landmarks + windowed longest common subsequences) gives the same pairs, and the same Diff, as
  difflib's longest-block-first matching it replaced, on every recorded case and the public same-model pairs; the
  metered reimplementation of difflib's search (kept as reference and fallback) gives difflib's blocks.
* Why it was replaced: a real Qwen step with 5% of its kernels dropped — difflib's method pairs 402 of 1,142, this
  one all; and a 100k-op step of real kernels with 5-10% dropped is re-paired (>= 99%) in about a second.
* The vectorised interval look-ups (autograd node, record_function ranges around a launch) equal a per-kernel scan.
* group_kernels on two long unrelated real steps (16k vs 25k ops, thousands left over on each side) stays fast;
  pairing every left-over kernel with every other took 21 s.
"""

from __future__ import annotations

import difflib
import functools
import time

import numpy as np
import pandas as pd
import pytest

from analyzer.diff import align as diff_align
from analyzer.diff import blocks as diff_blocks
from analyzer.diff import diff_runs
from analyzer.diff.align import RunSeq, _autograd_nodes, _enclosing_ranges, align, sequence
from analyzer.diff.blocks import _blocks_exact, _lcs, match_blocks
from analyzer.diff.flow import remaining_round_trips
from analyzer.diff.match import group_kernels
from tests.analyzer.test_diff import sample_summary, summary_of
from tests.conftest import TRACES, loaded_trace


@functools.cache
def seq_of(name: str) -> RunSeq:
    return sequence(summary_of(str(TRACES[name])), name)


def codes(*seqs: RunSeq) -> list[list[int]]:
    table: dict = {}
    return [[table.setdefault(k, len(table)) for k in s.rows["key"]] for s in seqs]


def difflib_pairs(a: list, b: list) -> list[tuple[int, int]]:
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(m.a + t, m.b + t) for m in sm.get_matching_blocks() for t in range(m.size)]


def positions(b: list) -> dict:
    b2j: dict = {}
    for j, x in enumerate(b):
        b2j.setdefault(x, []).append(j)
    return b2j


def assert_valid(a: list, b: list, ia: list, ib: list) -> None:
    """An alignment: equal keys, both sides strictly increasing."""
    assert all(a[i] == b[j] for i, j in zip(ia, ib, strict=True))
    assert (np.diff(ia) > 0).all() and (np.diff(ib) > 0).all()


# (baseline, candidate, same model: the alignment must equal difflib's pairs; else it must pair at least as many)
REAL_PAIRS = [
    ("legacy_resnet", "legacy_resnet_w4", True),
    ("h100_qwen", "mi300_qwen", True),  # H100 vs MI300X: GEMMs pair across cuBLAS / Tensile names
    ("h100_bert", "mi300_bert", True),
    ("hta_diff_control", "hta_diff_test", False),  # A100 vs V100, other models
    ("hta_filter_rank0", "hta_filter_rank1", False),  # two ranks' sampled kernels
    ("hta_df_index", "hta_ns", False),
]


@pytest.mark.parametrize(("base", "cand", "same_model"), REAL_PAIRS)
@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_alignment_against_difflib(base, cand, same_model):
    a, b = codes(seq_of(base), seq_of(cand))
    want = difflib_pairs(a, b)
    blocks = _blocks_exact(a, positions(b), 0, len(a), 0, len(b), float("inf"))
    assert sorted((i + t, j + t) for i, j, size in blocks for t in range(size)) == want  # the reference is difflib's
    ia, ib = match_blocks(a, b, exact_work=float("inf"))  # the switch back to difflib's method
    assert list(zip(ia, ib, strict=True)) == want
    ia, ib = match_blocks(a, b)
    assert_valid(a, b, ia, ib)
    # a longest common subsequence over the keys both runs have pairs at least what difflib's blocks pair (ResNet-50
    # workers 0 vs 4: 1,503 vs 1,501; control vs test: 624 vs 587; df_index vs ns: 235 vs 185)
    assert len(ia) >= len(want)
    if same_model:  # and where difflib's pairs were already longest, the same count
        assert len(ia) - len(want) <= 0.01 * len(want)


def _lcs_length(a: list, b: list) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


@pytest.mark.parametrize(("base", "cand"), [("hta_diff_control", "hta_diff_test"), ("h100_qwen", "mi300_qwen")])
def test_windowed_lcs_is_a_longest_common_subsequence(base, cand):
    a, b = codes(seq_of(base), seq_of(cand))
    for start in (0, 300, 900):
        wa, wb = a[start : start + 200], b[start : start + 240]
        pairs = _lcs(wa, 0, len(wa), wb, 0, len(wb), 10**6)
        assert_valid(wa, wb, [p for p, _ in pairs], [q for _, q in pairs])
        assert len(pairs) == _lcs_length(wa, wb)
    assert _lcs(a[:200], 0, 200, b[:240], 0, 240, 0) is None or a[:200] == b[:200]  # over its edit budget: gives up


SAME_MODEL = [
    ("hf_geglu_bf16", ("compile", "liger", "fuselens-gating", "fuselens")),
    ("plain_8192tok_bf16", ("compile", "fuselens")),
    ("plain_1tok_bf16", ("compile", "fuselens")),
    ("swiglu_fp16", ("compile", "liger", "fuselens")),
    ("geglu_train_bf16", ("compile", "liger")),
]


@pytest.mark.parametrize(("case", "variants"), SAME_MODEL)
@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_every_recorded_figure_is_the_one_difflibs_alignment_gives(case, variants, monkeypatch):
    base = sample_summary(case, "eager")
    cands = [sample_summary(case, v) for v in variants]
    now = diff_runs(base, cands).to_json()
    monkeypatch.setattr(diff_blocks, "EXACT_WORK", float("inf"))  # difflib's matching blocks, as first written
    assert diff_runs(base, cands).to_json() == now


@pytest.mark.parametrize(("base", "cand"), [("legacy_resnet", "legacy_resnet_w4"), ("h100_qwen", "mi300_qwen")])
def test_public_same_model_diffs_pair_at_least_what_difflibs_alignment_gives(base, cand, monkeypatch):
    """A longest common subsequence pairs at least as many kernels as difflib's longest-block-first matching, and
    every pair it makes is of equal keys in order. (ResNet-50 workers 0 vs 4: 1,503 against difflib's 1,501.)"""
    b, c = summary_of(str(TRACES[base])), summary_of(str(TRACES[cand]))
    now = diff_runs(b, [c], labels=["b", "c"]).to_json()
    monkeypatch.setattr(diff_blocks, "EXACT_WORK", float("inf"))
    old = diff_runs(b, [c], labels=["b", "c"]).to_json()
    assert (
        now["candidates"][0]["accounting"]["base"]["matched"]["count"]
        >= (old["candidates"][0]["accounting"]["base"]["matched"]["count"])
    )
    assert now["candidates"][0]["hbm_bytes_avoided_per_step"] == old["candidates"][0]["hbm_bytes_avoided_per_step"]


def _dropped(step: list[int], n: int, drop: float) -> tuple[list[int], list[int]]:
    """A real step's kernel list repeated to n ops (layers repeat just so), and a copy with a seeded random `drop`
    share of them gone (a fusion here and there): every kept kernel has its twin, so the best alignment pairs all."""
    a = (step * (n // len(step) + 1))[:n]
    keep = np.random.default_rng(0).random(len(a)) >= drop
    return a, [x for x, k in zip(a, keep, strict=True) if k]


def test_repeated_layers_with_kernels_dropped_stay_aligned():
    """difflib's longest block can pair layer k of one run with layer k+n of the other; everything after inherits
    the shift. The real 1,198-op Qwen step with 5% of its kernels dropped: difflib's method pairs 402 of 1,142."""
    (step,) = codes(seq_of("h100_qwen"))
    a, b = _dropped(step, len(step), 0.05)
    ia, ib = match_blocks(a, b)
    assert_valid(a, b, ia, ib)
    assert len(ib) == len(b) == 1142
    assert len(match_blocks(a, b, exact_work=float("inf"))[0]) == 402


@pytest.mark.parametrize(("name", "drop"), [("h100_qwen", 0.05), ("hta_diff_control", 0.10), ("hta_df_index", 0.10)])
def test_100k_op_step_with_dropped_kernels_is_re_paired_in_about_a_second(name, drop):
    """Near-linear: difflib's search would visit ~1e9+ pairs here (the dashboard measured 432 s at 116k ops)."""
    (step,) = codes(seq_of(name))
    a, b = _dropped(step, 100_000, drop)
    t0 = time.perf_counter()
    ia, ib = match_blocks(a, b)
    elapsed = time.perf_counter() - t0
    assert_valid(a, b, ia, ib)
    assert len(ib) >= 0.99 * len(b)
    assert elapsed < 20, f"{elapsed:.1f} s"  # ~0.2-0.5 s on the 2-core dev box


# --- interval look-ups -----------------------------------------------------------------------------------------------


def _nodes_brute(rows: pd.DataFrame, trace) -> list[int]:
    """The per-kernel scan _autograd_nodes replaced: innermost evaluate_function on the op's thread."""
    cpu = trace.cpu_ops
    ev = cpu[cpu["name"].astype(str).str.startswith("autograd::engine::evaluate_function")]
    by_tid = {tid: (g["ts_us"].to_numpy(), g["end_us"].to_numpy(), g.index.to_numpy()) for tid, g in ev.groupby("tid")}
    out = []
    for oi in rows["op_index"].tolist():
        hit = by_tid.get(cpu["tid"].at[oi]) if oi >= 0 and oi in cpu.index else None
        if hit is None:
            out.append(-1)
            continue
        ts, end, idx = hit
        t = cpu["ts_us"].at[oi]
        inside = np.flatnonzero((ts <= t) & (end >= t))
        out.append(int(idx[inside[np.argmax(ts[inside])]]) if len(inside) else -1)
    return out


def _ranges_brute(rows: pd.DataFrame, trace) -> list[tuple[str, ...]]:
    ann = trace.annotations
    ann = ann[~ann["on_gpu"].astype(bool)]
    ann = ann[~ann["name"].astype(str).str.startswith(diff_align._GENERIC_RANGE_PREFIXES)]
    tid_of = dict(zip(trace.launches["correlation"].tolist(), trace.launches["tid"].tolist(), strict=True))
    a_tid, a_ts, a_end = ann["tid"].to_numpy(), ann["ts_us"].to_numpy(), ann["end_us"].to_numpy()
    a_name = ann["name"].astype(str).to_numpy()
    out = []
    for corr, lts in zip(rows["correlation"].tolist(), rows["launch_ts_us"].tolist(), strict=True):
        tid = tid_of.get(corr)
        if tid is None or not np.isfinite(lts):
            out.append(())
            continue
        idx = np.flatnonzero((a_tid == tid) & (a_ts <= lts) & (a_end >= lts))
        out.append(tuple(a_name[idx[np.argsort(a_ts[idx], kind="stable")]].tolist()))
    return out


@pytest.mark.parametrize("name", ["hta_diff_control", "hta_ns", "mi300_norm", "hta_filter_rank0"])
def test_interval_lookups_equal_a_per_kernel_scan(name):
    trace = loaded_trace(TRACES[name])
    rows = trace.gpu_ops
    nodes = _autograd_nodes(rows, trace)
    assert nodes == _nodes_brute(rows, trace)
    assert sum(n >= 0 for n in nodes) > 0  # backward kernels found their node
    ranges = _enclosing_ranges(rows, trace)
    assert ranges == _ranges_brute(rows, trace)
    assert any(len(r) > 0 for r in ranges)


# --- group_kernels on long steps ---------------------------------------------------------------------------------------


def _long_step(name: str, copies: int) -> RunSeq:
    """Every steady step of a real trace, end to end, `copies` times: one long step of real kernels."""
    summary = summary_of(str(TRACES[name]))
    parts = [sequence(summary, name, step=s).rows for s in summary.steps_used]
    rows = pd.concat(parts * copies, ignore_index=True)
    rows["pos"] = np.arange(len(rows))
    return RunSeq(name, rows, [], list(summary.steps_used), int(summary.steps_used[0]))


@pytest.mark.slow  # the slow tier (README): a sweep or a heavy check, several seconds
def test_grouping_two_long_unrelated_steps_is_fast_and_accounts_for_every_kernel():
    b, c = _long_step("hta_diff_control", 2), _long_step("hta_diff_test", 2)
    assert len(b.rows) > 5_000 and len(c.rows) > 10_000
    t0 = time.perf_counter()
    al = align(b.rows, c.rows)
    res = group_kernels(b, c, al)
    remaining_round_trips(b)
    elapsed = time.perf_counter() - t0
    assert elapsed < 8, f"{elapsed:.1f} s"  # ~1 s on the 2-core dev box; all-pairs grouping took 21 s (23 s in all)
    in_groups = [m for g in res.groups for m in g.members + g.side]
    accounted = sorted([p[0] for p in res.pairs] + in_groups + res.unmatched_b)
    assert accounted == list(range(len(b.rows)))  # each baseline kernel exactly once
    assert len(res.unmatched_b) > 1_000  # unrelated models: most of it has no twin, and says so
