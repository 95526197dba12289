"""analyzer.phases on real traces: forward, backward and optimizer from the CPU side of the trace."""

from __future__ import annotations

import pytest

from analyzer.opportunities.cli import load_plan
from analyzer.phases import is_training, phase_of_rows, phase_times_us
from tests.conftest import TRACES, require_data


def test_a_trace_without_autograd_nodes_finds_its_backward_by_op_name():
    """Kineto's tb_plugin ResNet-50 sample (PyTorch 1.8, V100) records no autograd engine ranges, yet 407 of its
    step's 1,516 kernels run under backward ops (cudnn_convolution_backward_*, nll_loss_backward, …): a training
    step, its backward from the loss's backward kernel on, up to SGD's step. Before, it read as an inference step
    that listed backward opportunities."""
    require_data(TRACES["legacy_resnet"])
    p = load_plan(TRACES["legacy_resnet"])
    rows = p.seq.rows
    assert (rows["node"] < 0).all()  # no autograd node anywhere: the op names decide
    phase = phase_of_rows(rows)
    assert p.training and is_training(phase)
    first = int((phase == "backward").argmax())
    opt = int((phase == "optimizer").argmax())
    assert "backward" in str(rows["op_name"].iloc[first])
    assert (phase[:first] == "forward").all() and (phase[first:opt] == "backward").all()
    # torch.optim's step range, an operator in this old schema, holds SGD's add_ / mul_ kernels: the optimizer
    assert (phase[opt:] == "optimizer").all() and any("Optimizer.step#SGD.step" in c for c in rows["context"].iloc[opt])
    t = phase_times_us(rows, phase)
    assert t == pytest.approx({"forward": 34_829.0, "backward": 64_364.0, "optimizer": 1_309.0})


def test_an_inference_trace_stays_inference():
    """TraceLens's H100 BERT sample runs the forward only: no autograd node, no backward op, no optimizer."""
    require_data(TRACES["h100_bert"])
    p = load_plan(TRACES["h100_bert"])
    assert not p.training and not is_training(phase_of_rows(p.seq.rows))
