"""analyzer.phases on real traces: forward, backward and optimizer from the CPU side of the trace."""

from __future__ import annotations

import pytest

from analyzer.opportunities.cli import load_plan
from analyzer.phases import is_training, phase_of_rows, phase_times_us
from tests.conftest import TRACES, require_data


def test_a_trace_without_autograd_nodes_finds_its_backward_by_op_name():
    """Kineto's tb_plugin ResNet-50 sample (PyTorch 1.8, V100) records no autograd engine ranges, yet 407 of its
    step's 1,516 kernels run under backward ops (cudnn_convolution_backward_*, nll_loss_backward, …): a training
    step, its backward from the loss's backward kernel on. Before, it read as an inference step that listed
    backward opportunities."""
    require_data(TRACES["legacy_resnet"])
    p = load_plan(TRACES["legacy_resnet"])
    rows = p.seq.rows
    assert (rows["node"] < 0).all()  # no autograd node anywhere: the op names decide
    phase = phase_of_rows(rows)
    assert p.training and is_training(phase)
    first = int((phase == "backward").argmax())
    assert "backward" in str(rows["op_name"].iloc[first])
    assert (phase[first:] == "backward").all() and (phase[:first] == "forward").all()
    t = phase_times_us(rows, phase)
    assert t["backward"] == pytest.approx(65_673.0) and t["forward"] == pytest.approx(34_829.0)


def test_an_inference_trace_stays_inference():
    """TraceLens's H100 BERT sample runs the forward only: no autograd node, no backward op, no optimizer."""
    require_data(TRACES["h100_bert"])
    p = load_plan(TRACES["h100_bert"])
    assert not p.training and not is_training(phase_of_rows(p.seq.rows))


def test_a_spread_is_shown_in_its_medians_unit():
    """'100.6 ms (100.5–100.7)', never a range in µs beside a median in ms ('(100,527.0–100,650.0)'), which read as
    100 seconds; below 10 ms both stay in µs."""
    from analyzer.fmt import fmt_us_spread

    assert fmt_us_spread(100_600.0, [100_527.0, 100_650.0]) == "100.6 ms (100.5–100.7)"
    assert fmt_us_spread(226.7, [226.5, 226.9]) == "226.7 µs (226.5–226.9)"
    assert fmt_us_spread(20_000.0, [9_000.0, 31_000.0], what="p10–p90") == "20.0 ms (p10–p90 9.0–31.0)"
    assert fmt_us_spread(float("nan"), [1.0, 2.0]) == "unknown"
