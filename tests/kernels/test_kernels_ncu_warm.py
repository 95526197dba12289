"""The in-sequence ("warm") Nsight Compute measurement's bookkeeping (kernels.runner.ncu): steps split by launch position,
medians per kernel, the warm figures merged beside the flushed ones, on a real ncu CSV of the HF eager forward."""

from pathlib import Path

import pytest

from kernels.runner import ncu

CSV = Path(__file__).resolve().parents[2] / "sample_traces" / "hf_geglu_bf16" / "eager.ncu.csv"


def _kernels():
    return ncu.parse_csv(CSV.read_text())


def test_warm_summary_medians_by_position_and_step_totals():
    one = _kernels()
    assert len(one) == 5
    # three steps in a row; the middle one moves every count, so the median is the outer steps' figure
    bumped = [{**k, "dram_bytes_read": k["dram_bytes_read"] * 2, "dram_bytes_write": 0} for k in one]
    per_kernel, block = ncu.warm_summary(one + bumped + one, 3)
    assert [k["warm_dram_bytes_read"] for k in per_kernel] == [k["dram_bytes_read"] for k in one]
    assert [k["warm_dram_bytes_write"] for k in per_kernel] == [k["dram_bytes_write"] for k in one]
    assert block["steps"] == 3 and len(block["per_step"]) == 3
    assert block["step_dram_bytes_read"] == sum(k["dram_bytes_read"] for k in one)
    assert block["per_step"][1]["dram_bytes_write"] == 0
    assert block["max_replay_passes"] is None  # this CSV predates the pass-count metric: absent, not 0
    assert "--cache-control none" in block["method"]


def test_steps_that_differ_are_refused():
    one = _kernels()
    with pytest.raises(RuntimeError, match="differ in length"):
        ncu.split_steps(one + one[:4], 2)
    with pytest.raises(RuntimeError, match="different kernels"):
        ncu.split_steps(one + one[::-1], 2)


def test_merge_puts_warm_beside_flushed_only_when_the_kernels_agree():
    one = _kernels()
    warm, _ = ncu.warm_summary(one * 2, 2)
    merged = ncu.merge_warm(one, warm)
    assert all(m["dram_bytes_read"] == k["dram_bytes_read"] for m, k in zip(merged, one, strict=True))
    assert all("warm_dram_bytes_write" in m for m in merged)
    assert ncu.merge_warm(one[:4], warm) is not None and "warm_dram_bytes_read" not in ncu.merge_warm(one[:4], warm)[0]
