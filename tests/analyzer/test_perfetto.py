"""Open in Perfetto: one step of a real trace as a small Kineto JSON with its flows."""

from __future__ import annotations

import orjson
import pytest

from analyzer import load_trace
from analyzer.perfetto import step_trace_bytes
from tests.conftest import SAMPLE_TRACES, TRACES, require_data

HF = SAMPLE_TRACES / "hf_geglu_bf16"


@pytest.mark.parametrize("path", [HF / "compile.json.gz", TRACES["h100_bert"]])
def test_one_step_with_flows_reads_back_as_the_same_kernels(tmp_path, path):
    require_data(path)
    t = load_trace(path)
    step = int(t.steps["step"].iloc[-1])
    data = step_trace_bytes(t, step, "run")
    doc = orjson.loads(data)
    ev = doc["traceEvents"]
    g = t.gpu_ops[t.gpu_ops["step"] == step]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    assert len(gpu) == len(g)
    starts = {e["id"] for e in ev if e.get("ph") == "s"}
    ends = {e["id"] for e in ev if e.get("ph") == "f"}
    assert starts and starts == ends  # every launch → kernel arrow has both ends
    assert all(e.get("bp") == "e" for e in ev if e.get("ph") == "f")
    assert doc["fuselens"]["step"] == step
    assert len(data) < path.stat().st_size * 40  # a step, not the whole trace (gzip ~10x: still far smaller)
    # our own Kineto reader takes it back: the same kernels, linked to their launching ops
    out = tmp_path / "step.json"
    out.write_bytes(data)
    back = load_trace(out)
    assert sorted(back.gpu_ops["name"]) == sorted(g["name"])
    assert (back.gpu_ops["kind"] == "kernel").sum() == (g["kind"] == "kernel").sum()
    linked = back.gpu_ops[back.gpu_ops["kind"] == "kernel"]["op_index"] >= 0
    assert linked.mean() >= (g[g["kind"] == "kernel"]["op_index"] >= 0).mean() - 1e-9
