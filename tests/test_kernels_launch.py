"""The op plans of kernels.ops.launch (an op call replayed as its recorded launches), on the CPU: the Triton kernel
is replaced by a stand-in whose "launch" computes x @ w'^T + c into out in torch, so what is checked is the
recording, the argument substitution and the validity rules, not a kernel."""

import unittest.mock as mock

import pytest

from tests._kernels_env import torch

# isort: split
import triton  # noqa: E402

from kernels.ops import launch  # noqa: E402


class _Compiled:
    function = 0
    packed_metadata = None

    def __init__(self, fired):
        self.fired = fired

    def run(self, g0, g1, g2, stream, fn, meta, launch_meta, enter, exit_, x, w, out, c, *tail):
        out.copy_(x @ (w.base if hasattr(w, "base") else w).T + c)
        self.fired.append(out)


class _Kernel:
    arg_names = ["x", "w", "out", "c", "FLAG"]

    def __init__(self):
        self.fired = []

    def run(self, *a, grid, warmup, **kw):
        c = _Compiled(self.fired)
        c.run(*grid, 0, 0, None, None, None, None, *a)
        return c


@pytest.fixture
def gpu_like():
    """The launcher as on a GPU (no interpreter, no hooks, no capture), with a stand-in stream."""
    with (
        mock.patch.object(launch, "INTERPRETING", False),
        mock.patch.object(launch, "_hooks_set", lambda: False),
        mock.patch.object(launch, "_raw_plan", lambda compiled, a, tail, grid: None),
        mock.patch.object(torch.cuda, "is_current_stream_capturing", lambda: False),
        mock.patch.object(torch._C, "_cuda_getCurrentRawStream", lambda i: 0, create=True),
    ):
        yield


def _op(temporary: bool):
    """A wrapper like the shipped ones: a cached weight copy (2 w, per weight version), a fresh output, one launch
    (x, (copy, block), out, 1.0); with `temporary` x goes through a per-call copy first."""
    kernel = _Kernel()
    tuned = launch.Tuned(kernel, [triton.Config({})], "stand-in")
    copies = {}

    def impl(x, w, act):
        wt = copies.setdefault((id(w), w._version), w * 2)
        xx = x.clone() if temporary else x
        out = x.new_empty((x.shape[0], w.shape[0]))
        tuned.launch(
            ("spec", tuple(x.shape), tuple(w.shape)),
            lambda: "key",
            lambda cfg: (xx, (wt, (4, 4)), out, 1.0),
            lambda cfg: {"FLAG": True},
            lambda cfg: (1, 1, 1),
            0,
        )
        return out

    return impl, kernel, tuned


def test_plans_replay_recorded_launches(gpu_like):
    impl, kernel, tuned = _op(temporary=False)
    plans = launch.Plans("stand-in")
    w = torch.randn(5, 8)
    for i in range(7):
        x = torch.randn(4, 8)
        if i == 4:
            with torch.no_grad():
                w.mul_(-3)  # a new version: a new key, recorded again, never the old copy
        out = plans.call((tuple(x.shape), id(w), w._version), impl, (x, w), ("act",))
        torch.testing.assert_close(out, x @ (2 * w).T + 1.0)
    assert plans.replays == 3 and len(kernel.fired) == 7  # calls 2, 3, 6 replayed; every call launched once
    tuned.cache.clear()  # a tool forcing another config: the plan's launcher entry is stale, the call runs in full
    x = torch.randn(4, 8)
    torch.testing.assert_close(plans.call((tuple(x.shape), id(w), w._version), impl, (x, w), ("a",)), x @ (2 * w).T + 1)
    assert plans.replays == 3


def test_plans_refuse_calls_with_per_call_temporaries(gpu_like):
    """A launch argument that is neither an input nor the output and is dead after the call (here a copy of x)
    cannot be replayed: the key is marked not plannable and every call runs the wrapper."""
    impl, kernel, _ = _op(temporary=True)
    plans = launch.Plans("stand-in")
    w = torch.randn(5, 8)
    for _ in range(5):
        x = torch.randn(4, 8)
        torch.testing.assert_close(plans.call((tuple(x.shape),), impl, (x, w), ("a",)), x @ (2 * w).T + 1.0)
    assert plans.replays == 0 and list(plans.plans.values()) == [None]


def test_plans_refuse_a_tensor_passed_twice(gpu_like):
    """Recorded from op(w, w), a plan could not tell which argument a launch read: such calls are not planned (a
    later op(x, w) with the same key must compute with x)."""
    impl, _, _ = _op(temporary=False)
    plans = launch.Plans("stand-in")
    w = torch.randn(8, 8)
    for _ in range(3):
        plans.call(("k",), impl, (w, w), ("a",))
    x = torch.randn(8, 8)
    torch.testing.assert_close(plans.call(("k",), impl, (x, w), ("a",)), x @ (2 * w).T + 1.0)
    assert plans.replays == 0
