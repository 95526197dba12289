"""The runner's interleaved recording (kernels.runner.interleave, kernels.runner.conditions, kernels.runner.record):
round-robin order, one profiler session split into one trace per variant, the clock/power/temperature record."""

from __future__ import annotations

import argparse
import gzip
import json

import pytest

from analyzer import summarize
from analyzer.pipeline import load_trace
from analyzer.runmeta import conditions_text, recorded_conditions
from kernels.runner.conditions import Sampler
from kernels.runner.control import probe_times as control_probe_times
from kernels.runner.interleave import round_orders, split_trace
from tests.conftest import DATA

# real H100 runner traces (3 ProfilerSteps each; tests/data/ATTRIBUTION.md)
RECORDED = {
    "hf_forward": DATA / "comparability" / "h100_hf_geglu_run10" / "eager.json.gz",
    "train_step": DATA / "comparability" / "h100_geglu_train_run10" / "eager.json.gz",
}


def test_round_orders_rotate():
    assert round_orders(["a", "b", "c"], 4) == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert round_orders([], 2) == [[], []]


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_split_keeps_each_variants_steps_and_their_gpu_ops(case, tmp_path):
    """A real H100 runner trace (3 ProfilerSteps) split as if steps 2 and 4 were one variant and 3 another: every
    GPU op lands with the step that launched it, the forward's and the backward's (autograd thread) alike."""
    src = RECORDED[case]
    with gzip.open(src) as fh:
        doc = json.load(fh)
    whole = summarize(load_trace(src)).trace
    parts = split_trace(doc, {2: "a", 3: "b", 4: "a"})
    assert set(parts) == {"a", "b"}
    got = {}
    for v, part in parts.items():
        p = tmp_path / f"{v}.json"
        p.write_text(json.dumps(part))
        got[v] = load_trace(p)
    assert got["a"].steps["step"].tolist() == [2, 4] and got["b"].steps["step"].tolist() == [3]
    per_step = whole.gpu_ops.groupby("step").size()
    for t in got.values():
        for step, n in t.gpu_ops.groupby("step").size().items():
            assert n == per_step[step]  # the same GPU ops per step as in the unsplit trace
        assert (t.gpu_ops["step"] >= 0).all()
        assert len(t.cpu_ops) > 0 and t.meta.gpu_name == whole.meta.gpu_name
    assert len(got["a"].gpu_ops) + len(got["b"].gpu_ops) == int((whole.gpu_ops["step"] >= 0).sum())
    # durations survive byte for byte
    k = whole.gpu_ops[whole.gpu_ops["step"] == 3]["dur_us"].sum()
    assert got["b"].gpu_ops["dur_us"].sum() == pytest.approx(k)


def test_profile_rounds_on_cpu_interleaves_and_splits(tmp_path):
    """The runner's own profiling loop (CPU activity only, since this machine has no GPU): three variants take turns
    over 3 rounds of 2 steps; each variant's trace holds exactly its 6 steps and only its own ops."""
    torch = pytest.importorskip("torch")
    from kernels.runner import record

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    live = [
        record.Live("mm", lambda: torch.mm(a, b), 0.0),
        record.Live("add", lambda: torch.add(a, b), 0.0),
        record.Live("relu", lambda: torch.relu(a), 0.0),
    ]
    sampler = Sampler()
    msgs = []
    docs = record.profile_rounds(live, argparse.Namespace(rounds=3, steps_per_turn=2), tmp_path, sampler, msgs.append)
    assert msgs == [f"profiling, round {r}/3" for r in (1, 2, 3)]
    assert not list(tmp_path.iterdir())  # the combined session file is removed
    steps = {}
    for v, doc in docs.items():
        steps[v] = sorted(
            int(e["name"].split("#")[1]) for e in doc["traceEvents"] if "ProfilerStep#" in e.get("name", "")
        )
        ops = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op"}
        want = {"mm": "aten::mm", "add": "aten::add", "relu": "aten::relu"}[v]
        assert want in ops and not ({"aten::mm", "aten::add", "aten::relu"} - {want}) & ops
    assert all(len(s) == 6 for s in steps.values())
    # first turn: mm add relu, second: add relu mm, third: relu mm add (2 steps per turn, after 3 warm-up steps)
    assert steps["mm"] == [3, 4, 13, 14, 17, 18]
    assert steps["add"] == [5, 6, 9, 10, 19, 20]
    assert [m[0] for m in sampler.marks] == ["mm", "add", "relu", "add", "relu", "mm", "relu", "mm", "add"]


def test_control_probe_runs_before_every_turn_in_steps_cut_from_the_variants_traces(tmp_path, monkeypatch):
    """The control probe (kernels.runner.control) runs before each turn in a profiler step of its own: every variant's
    trace still holds exactly its own 6 steps and no probe op, and the probe's steps come back per variant."""
    torch = pytest.importorskip("torch")
    from kernels.runner import control, record

    for name, value in (("SETTLE_BYTES", 1 << 16), ("COPY_BYTES", 1 << 14), ("GEMM_MNK", (32, 32, 32))):
        monkeypatch.setattr(control, name, value)  # the sizes only: a CPU has no L2 worth settling
    a = torch.randn(64, 64)
    live = [record.Live("mm", lambda: torch.mm(a, a), 0.0), record.Live("relu", lambda: torch.relu(a), 0.0)]
    ns = argparse.Namespace(rounds=3, steps_per_turn=2)
    docs = record.profile_rounds(live, ns, tmp_path, Sampler(), lambda m: None, probe=control.Probe("cpu"))
    assert set(docs) == {"mm", "relu", control.OWNER_PREFIX + "mm", control.OWNER_PREFIX + "relu"}
    for v in ("mm", "relu"):
        evs = docs[v]["traceEvents"]
        assert len([e for e in evs if "ProfilerStep#" in e.get("name", "")]) == 6
        assert not [e for e in evs if e.get("name") in (control.PROBE_LABEL, "aten::zero_", "aten::copy_")]
        probe_evs = docs[control.OWNER_PREFIX + v]["traceEvents"]
        assert len([e for e in probe_evs if e.get("name") == control.PROBE_LABEL]) == 3  # one per turn
        assert "error" in control.probe_times(docs[control.OWNER_PREFIX + v])  # a CPU launches no kernels


def test_probe_times_reads_each_roles_gpu_time_per_turn():
    """probe_times on the shape of a Kineto trace: role ranges on the CPU, launches with correlation ids inside them,
    GPU ops carrying those ids (a role's memset counts with its kernel)."""
    from kernels.runner.control import PROBE_LABEL

    evs, corr = [], iter(range(1, 100))

    def turn(t0, durs, gemm="nvjet_gemm"):
        evs.append({"ph": "X", "cat": "user_annotation", "name": PROBE_LABEL, "ts": t0, "dur": 90, "tid": 1})
        for i, (role, kernel) in enumerate((("settle", "fill"), ("gemm", gemm), ("copy", "neg"))):
            c = next(corr)
            ts = t0 + 1 + 30 * i
            evs.append(
                {"ph": "X", "cat": "user_annotation", "name": f"{PROBE_LABEL}::{role}", "ts": ts, "dur": 20, "tid": 1}
            )
            evs.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "ts": ts + 5,
                    "dur": 3,
                    "tid": 1,
                    "args": {"correlation": c},
                }
            )
            evs.append(
                {"ph": "X", "cat": "kernel", "name": kernel, "ts": 1e6 + ts, "dur": durs[i], "args": {"correlation": c}}
            )
            if role == "gemm":
                c = next(corr)
                evs.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaMemsetAsync",
                        "ts": ts + 1,
                        "dur": 1,
                        "tid": 1,
                        "args": {"correlation": c},
                    }
                )
                evs.append(
                    {
                        "ph": "X",
                        "cat": "gpu_memset",
                        "name": "Memset (Device)",
                        "ts": 1e6 + ts - 2,
                        "dur": 0.5,
                        "args": {"correlation": c},
                    }
                )

    turn(0, (90.0, 30.0, 45.0))
    turn(1000, (91.0, 30.5, 44.0))
    got = control_probe_times({"traceEvents": evs})
    assert got == {
        "kernels": ["fill", "Memset (Device) + nvjet_gemm", "neg"],
        "us": [[90.0, 30.5, 45.0], [91.0, 31.0, 44.0]],
    }
    turn(2000, (90.0, 30.0, 45.0), gemm="other_gemm")
    assert control_probe_times({"traceEvents": evs}) == {"error": "the probe's kernels differ between turns"}
    assert "error" in control_probe_times({"traceEvents": []})


def test_sampler_gives_each_variant_the_samples_of_its_turns():
    s = Sampler(interval_s=0.02)
    s.samples = [(t / 100, 1980.0 - (t >= 50) * 300, 400.0 + t, 40.0) for t in range(100)]  # 10 ms apart
    s.marks = [("a", "profiled", 0.10, 0.30), ("b", "profiled", 0.60, 0.80), ("a", "profiled", 0.905, 0.906)]
    got = s.per_variant("profiled")
    assert got["a"]["sm_clock_mhz"]["median"] == 1980.0 and got["b"]["sm_clock_mhz"]["median"] == 1680.0
    assert got["a"]["n_samples"] == 21 + 1  # 21 inside its first turn, the nearest one for the 1 ms turn
    assert got["b"]["how"] == "samples taken while its steps ran"
    assert s.per_variant("timed") == {}


def test_recorded_conditions_read_back_and_text():
    entry = {
        "conditions": {
            "profiled": {
                "sm_clock_mhz": {"median": 1980.0, "min": 1755.0, "max": 1980.0},
                "power_w": {"median": 512.3, "min": 400.0, "max": 690.0},
                "temperature_c": {"median": "hot"},  # hand-edited damage: left out, never shown
                "n_samples": 37,
            }
        }
    }
    c = recorded_conditions(entry)
    assert set(c) == {"sm_clock_mhz", "power_w", "n_samples"}
    assert conditions_text(c) == "SM 1,980 MHz (1,755–1,980) · 512 W"
    assert recorded_conditions({"conditions": "x"}) is None and conditions_text(None) is None


def test_runner_manifest_carries_clocks_power_temperature_per_variant():
    """The interleaving runner's manifests from the H100 (tests/data/prewindow_h100_round1): every variant's conditions while profiled and
    timed, and the sampler that took them; under a concurrent matmul load the card draws 3x the power."""
    skew = DATA / "comparability" / "h100_hf_geglu_skew_round1"
    power = {}
    for case in ("normal", "loaded"):
        m = json.loads((skew / case / "manifest.json").read_text())
        assert m["profiler"]["interleaved"] and m["profiler"]["active_steps_per_variant"] == 16
        assert m["conditions"]["sampler"]["source"].startswith("nvml") and m["conditions"]["sampler"]["n_samples"] > 100
        assert m["conditions"]["limits"]["max_sm_clock_mhz"] == 1980.0
        for v in m["variants"]:
            for phase in ("profiled", "timed"):
                c = v["conditions"][phase]
                assert (
                    1000 <= c["sm_clock_mhz"]["min"] <= c["sm_clock_mhz"]["median"] <= c["sm_clock_mhz"]["max"] <= 1980
                )
                assert 50 < c["power_w"]["median"] <= 700 and 20 < c["temperature_c"]["median"] < 95
            power[case, v["name"]] = v["conditions"]["profiled"]["power_w"]["median"]
            assert conditions_text(recorded_conditions(v)).startswith("SM 1,9")
            trace = load_trace(skew / case / v["trace"])
            assert len(trace.steps) == 16  # the variant's 8 turns × 2 steps, cut from one session
    assert min(power["loaded", v] for v in ("eager", "compile")) > 3 * max(
        power["normal", v] for v in ("eager", "compile")
    )
