"""The op plans of kernels.ops.launch (an op call replayed as its recorded launches), on the CPU: the Triton kernel
is replaced by a stand-in whose "launch" computes x @ w'^T + c into out in torch, so what is checked is the
recording, the argument substitution and the validity rules, not a kernel."""

import unittest.mock as mock

import pytest

from tests.kernels._kernels_env import torch

# isort: split
import triton  # noqa: E402

from kernels.ops import launch, launch_triton  # noqa: E402


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


FIRE_SOURCE = """\
def fire(a, stream):
    _fn(_g[0], _g[1], _g[2], stream, _f, *_h, _m, None, None, None, *_d0(a[0]), *_d1(a[1]), *_d2(a[2]), a[3].data_ptr(), a[4], a[5], a[6], *_tail)
"""
# the op plan of test_raw_launch_and_plans_pass_the_same_c_arguments: output allocated, launcher entry checked, the
# weight copy dereferenced, then the C call with the descriptors' encodings looked up by data pointer
REPLAY_SOURCE = """\
def replay(inputs):
    o = inputs[0].new_empty(128, 256)
    stream = _stream(_dev)
    if _t0._launchers.get(_s0) is not _h0 or _t0.cache.get(_k0) is not _c0:
        return None
    w0_1 = _w0_1()
    if w0_1 is None:
        return None
    try:
        _fn0(132, 1, 1, stream, 11, *_hd0, _m0, None, None, None, *_e0_0(inputs[0]), *_e0_1(w0_1), *_e0_2(o), inputs[0].data_ptr(), _v0_4, _v0_5, _v0_6, *_tl0)
    except TypeError:
        _slow(_h0, ((inputs[0], _b0_0), (w0_1, _b0_1), (o, _b0_2), inputs[0], _v0_4, _v0_5, _v0_6,), _dev)
    return o
"""


def test_raw_launch_and_plans_pass_the_same_c_arguments():
    """The generated raw launch (a launcher entry's `fire`) and an op plan's written-out C call hand Triton's C launch
    function the same arguments: the 13 leading ones (grid, stream, function, cooperative, pdl, scratch, metadata,
    hooks), each TMA descriptor as its encoding, each other tensor as its data pointer, then the sizes and the
    constexpr tail. Triton 3.6's launcher object is mimicked (its `inner` wrapper and the C function's place); the
    encoding stands in for cuTensorMapEncodeTiled."""
    import types as _types

    from triton.backends.nvidia import driver as nv

    calls = []

    class CLaunch:  # stands in for the generated C function
        def __call__(self, *args):
            calls.append(args)

    c_launch = CLaunch()

    def wrap_handle_tensordesc(launcher, tensordesc_indices, tensordesc_meta):  # the shape of Triton 3.6's wrapper
        def inner(*args):
            return launcher(*args, tensordesc_indices, tensordesc_meta)

        return inner

    class CudaLauncher:
        global_scratch_size = profile_scratch_size = 0
        launch_cooperative_grid = launch_pdl = False

        def __init__(self, launch):
            self.launch = launch

        def __call__(self, gridX, gridY, gridZ, stream, function, *args):
            raise AssertionError("the raw launch bypasses the launcher object")

    class Compiled:
        function = 11
        packed_metadata = (8, 1, 0)

        def __init__(self):
            self.run = CudaLauncher(wrap_handle_tensordesc(c_launch, {0, 1, 2}, [{}, {}, {}]))

    class Kernel:
        arg_names = ["x", "w", "out", "b", "M", "N", "K", "FLAG"]

        def run(self, *a, grid, warmup, **kw):
            return Compiled()

    def encode(arg, meta, _=None):
        return ["MAP", arg.base.data_ptr(), *arg.shape, *arg.strides]

    with (
        mock.patch.object(launch_triton, "types", _types.SimpleNamespace(BuiltinFunctionType=CLaunch)),
        mock.patch.object(launch_triton, "RAW_SUPPORTED", True),  # the stand-in is Triton 3.6's launcher
        mock.patch.object(launch, "RAW_LAUNCH", True),
        mock.patch.object(nv, "make_tensordesc_arg", encode),
        mock.patch.object(launch, "INTERPRETING", False),
        mock.patch.object(launch, "_hooks_set", lambda: False),
        mock.patch.object(torch.cuda, "is_current_stream_capturing", lambda: False),
        mock.patch.object(torch._C, "_cuda_getCurrentRawStream", lambda i: 7, create=True),
    ):
        tuned = launch.Tuned(Kernel(), [triton.Config({})], "stand-in")
        copies = {}

        def impl(x, w, act):
            wt = copies.setdefault(id(w), w * 2)
            out = x.new_empty((x.shape[0], w.shape[0]))
            tuned.launch(
                ("spec",),
                lambda: "key",
                lambda cfg: ((x, (16, 16)), (wt, (32, 16)), (out, (16, 32)), x, 128, 256, 64),
                lambda cfg: {"FLAG": True},
                lambda cfg: (132, 1, 1),
                0,
            )
            return out

        plans = launch.Plans("stand-in")
        w = torch.randn(256, 64, dtype=torch.bfloat16)
        for i in range(4):  # 0: full path (Triton's own launch), 1: recorded through fire, 2-3: replayed
            x = torch.randn(128, 64, dtype=torch.bfloat16)
            calls.clear()
            out = plans.call(("key",), impl, (x, w), ("act",))
            if i == 0:
                continue
            (c,) = calls
            assert c[:13] == (132, 1, 1, 7, 11, False, False, None, None, (8, 1, 0), None, None, None)
            wt = copies[id(w)]
            assert c[13:] == (
                "MAP", x.data_ptr(), 128, 64, 64, 1,
                "MAP", wt.data_ptr(), 256, 64, 64, 1,
                "MAP", out.data_ptr(), 128, 256, 256, 1,
                x.data_ptr(), 128, 256, 64, True,
            )  # fmt: skip
        assert plans.replays == 2
        # the generated sources, as they are: a change here changes what every launch on the GPU runs
        fire = tuned._launchers[("spec",)][5]
        assert fire.source == FIRE_SOURCE
        assert plans.plans[("key",)].source == REPLAY_SOURCE.format(w=id(w))


def test_a_measurement_inside_a_recorded_call_stays_out_of_its_plan():
    """launch.not_recorded: launches a measurement makes while an op plan is being recorded (hopper_gemm._measure_ws
    times ~47 launches) are not the call's work; the record holds only what runs outside the block."""
    from threading import get_ident

    from kernels.ops import launch

    rec = launch._RECORDING[get_ident()] = []
    try:
        launch._record("tuner", "spec-before", "hit", ())
        with launch.not_recorded():
            launch._record("tuner", "spec-timing", "hit", ())
            assert get_ident() not in launch._RECORDING
        launch._record("tuner", "spec-after", "hit", ())
    finally:
        launch._RECORDING.pop(get_ident(), None)
    assert [r[1] for r in rec] == ["spec-before", "spec-after"]


def test_a_forced_config_keeps_the_triton_dual_gemm(monkeypatch):
    """While a tool forces a Triton config (launch.forced), persistent_gated runs the Triton kernel even where the
    Gluon one applies and was chosen: check_configs and the sweeps must time what they name."""
    from kernels.ops import hopper_gemm, ws_gemm
    from kernels.ops.activations import act_id
    from kernels.ops.launch import forced

    dev = "cuda" if torch.cuda.is_available() else "cpu"  # on a GPU the forced Triton kernel really runs
    x = torch.randn(1024, 40, dtype=torch.bfloat16, device=dev)
    wg, wu = (torch.randn(16, 40, dtype=torch.bfloat16, device=dev) for _ in range(2))
    monkeypatch.setattr(hopper_gemm, "WS_MIN_FLOP", 0)
    monkeypatch.setattr(ws_gemm, "applies", lambda t: True)
    ran = []
    monkeypatch.setattr(hopper_gemm, "_measure_ws", lambda *a: ran.append("measured") or True)
    monkeypatch.setattr(ws_gemm, "ws_gated", lambda *a: ran.append("gluon") or a[3])
    cfg = hopper_gemm.GATED_CONFIGS[0]
    forced(((hopper_gemm._gated_tuned, cfg),), lambda: hopper_gemm.persistent_gated(x, wg, wu, act_id("silu")))
    assert ran == []
    hopper_gemm.persistent_gated(x, wg, wu, act_id("silu"))  # not forced: measured, and the chosen kernel runs
    assert ran == ["measured", "gluon"]


def test_the_gluon_dual_gemm_is_a_candidate_only_up_to_k_2048(monkeypatch):
    """persistent_gated measures the Gluon kernel against the Triton one only where K <= WS_MAX_K (2048): at K 4096
    its 64-row tiles' doubled weight traffic lost on both cards (hopper_gemm's comment has the figures)."""
    from kernels.ops import hopper_gemm, ws_gemm
    from kernels.ops.activations import act_id

    monkeypatch.setattr(hopper_gemm, "WS_MIN_FLOP", 0)
    monkeypatch.setattr(ws_gemm, "applies", lambda t: True)
    ran = []
    monkeypatch.setattr(hopper_gemm, "_measure_ws", lambda *a: ran.append("measured") or True)
    monkeypatch.setattr(ws_gemm, "ws_gated", lambda *a: ran.append("gluon") or a[3])
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # on a GPU the Triton kernel really runs at K > 2048
    for k in (hopper_gemm.WS_MAX_K + 64, hopper_gemm.WS_MAX_K):
        x = torch.randn(1024, k, dtype=torch.bfloat16, device=dev)
        wg, wu = (torch.randn(16, k, dtype=torch.bfloat16, device=dev) for _ in range(2))
        ran.append(k)
        hopper_gemm.persistent_gated(x, wg, wu, act_id("silu"))
    assert ran == [hopper_gemm.WS_MAX_K + 64, hopper_gemm.WS_MAX_K, "measured", "gluon"]


def test_the_raw_launch_is_gated_to_the_triton_releases_it_reads():
    """The generated C call is written against Triton 3.5-3.6's launcher; any other release (this machine's 3.9
    included) keeps Triton's launcher object, whatever the launcher looks like."""
    assert launch_triton.triton_version("3.6.0") == (3, 6)
    assert launch_triton.triton_version("3.5.1+git4a3a1b2") == (3, 5)
    assert launch_triton.triton_version("nightly") == (0, 0)
    assert [launch_triton.raw_supported(v) for v in ((3, 4), (3, 5), (3, 6), (3, 7), (4, 0))] == [
        False, True, True, False, False,
    ]  # fmt: skip
    with mock.patch.object(launch_triton, "RAW_SUPPORTED", False):
        assert launch_triton.raw_plan(object(), (), (), (1, 1, 1)) is None


@pytest.mark.parametrize(
    ("value", "mode"), [("", "raw"), ("raw", "raw"), ("fast", "fast"), (" JIT ", "jit"), ("turbo", None)]
)
def test_one_launch_switch(monkeypatch, value, mode):
    """FUSELENS_LAUNCH=jit|fast|raw (default raw) is the one switch; anything else is refused, naming the choices."""
    from fuselens import settings

    monkeypatch.setenv("FUSELENS_LAUNCH", value)
    if mode is None:
        with pytest.raises(ValueError, match="jit, fast, raw"):
            settings.launch_mode()
    else:
        assert settings.launch_mode() == mode
