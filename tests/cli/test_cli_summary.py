"""`python -m analyzer summary` as a user runs it: a real subprocess, real files, exit codes and output."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, SAMPLE_TRACES, TRACES

BERT = TRACES["h100_bert"]
HF_EAGER = SAMPLE_TRACES / "hf_geglu_bf16" / "eager.json.gz"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", "summary", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_json_output():
    r = _run(str(BERT.relative_to(ROOT)), "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert r.stdout.count("\n") == 1  # one JSON object, one line
    assert j["gpu"] == "NVIDIA H100 80GB HBM3" and j["steps"] == 1
    assert j["per_step"]["kernels"] == 60
    assert j["per_step"]["by_category"]["gemm"]["count"] == 26
    times = [k["time_us_per_step"] for k in j["kernels"]]
    assert times == sorted(times, reverse=True)
    vocab = max(j["kernels"], key=lambda k: k["bytes_per_call"] or 0)  # BERT's vocab projection, 141×512→30522
    assert (
        vocab["category"] == "gemm" and vocab["bytes_per_call"] == (141 * 512 + 512 * 30522 + 30522 + 141 * 30522) * 2
    )
    assert all(k["bytes_per_call"] is not None for k in j["kernels"])  # gather / arange have byte rules now


def test_unknown_bytes_are_null_in_json():
    """A training step's foreach optimizer kernels record no tensor shapes: their bytes are null, never 0."""
    r = _run("sample_traces/llama_model_train_bf16/eager.json.gz", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    unknown = [k for k in j["kernels"] if k["bytes_per_call"] is None]
    assert unknown and all("_foreach_" in str(k.get("op", "")) or k["bytes_per_call"] is None for k in unknown)


@pytest.mark.needs_data(HF_EAGER)
def test_hf_eager_json_says_five_kernels():
    r = _run(str(HF_EAGER.relative_to(ROOT)), "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    p = j["per_step"]
    assert p["kernels"] == 5
    assert {c: v["count"] for c, v in p["by_category"].items() if c in ("gemm", "pointwise")} == {
        "gemm": 3,
        "pointwise": 2,
    }
    by_ops = {"+".join(k["ops"]): k for k in j["kernels"]}
    assert by_ops["gelu"]["bytes_per_call"] == 100_663_296
    assert by_ops["mul"]["bytes_per_call"] == 150_994_944


@pytest.mark.needs_data(HF_EAGER)
def test_step_table_every_step_with_spreads():
    """Busy, span and idle per step for EVERY step (warm-up marked), medians and spreads over the
    steady ones, the same figures as the steps table of the trace."""
    from analyzer import load_trace

    r = _run(str(HF_EAGER.relative_to(ROOT)), "--json")
    j = json.loads(r.stdout)
    table = j["step_table"]
    steps = load_trace(HF_EAGER).steps.set_index("step")
    assert (
        [row["step"] for row in table]
        == steps.index.tolist()
        == [6, 7, 33, 34, 45, 46, 57, 58, 69, 70, 81, 82, 108, 109, 120, 121]
    )
    assert [row["steady"] for row in table] == [False] + [True] * 15
    for row in table:
        assert set(row) >= {"step", "kernels", "gpu_busy_us", "span_us", "idle_us"}
        assert row["gpu_busy_us"] == pytest.approx(steps.loc[row["step"], "gpu_busy_us"])
        assert row["span_us"] == pytest.approx(steps.loc[row["step"], "gpu_span_us"])
        assert row["idle_us"] == pytest.approx(row["span_us"] - row["gpu_busy_us"])
        assert row["kernels"] == 5
    p = j["per_step"]
    steady = [row for row in table if row["steady"]]
    assert len(steady) == 15  # from 10 steps on the spread is p10–p90, so one outlier step does not set it
    for key in ("gpu_busy_us", "span_us", "idle_us", "gpu_time_us"):
        vals = [row[key] for row in steady]
        assert p["spread"][key] == pytest.approx([np.percentile(vals, 10), np.percentile(vals, 90)])
        assert min(vals) <= p[key] <= max(vals)
    assert p["spread_rule"] == "p10–p90"
    out = _run(str(HF_EAGER.relative_to(ROOT))).stdout
    assert "6 (warm-up)" in out
    busy = f"GPU busy {p['gpu_busy_us']:,.1f} µs ({p['spread']['gpu_busy_us'][0]:,.1f}–{p['spread']['gpu_busy_us'][1]:,.1f})"
    assert busy in out


def test_text_output():
    r = _run(str(BERT))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "GPU: NVIDIA H100 80GB HBM3" in out and "  60 kernels" in out and "Top kernels" in out
    assert "GPU busy " in out and "step span " in out and " idle " in out  # the headline times, each with its spread
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("µs/step"))
    assert set(lines[header + 1].strip()) <= {"-", " "}  # a rule under the header
    # columns aligned: every row of the kernel table is as wide as the rule up to the last (name) column
    rule_cols = [i for i, ch in enumerate(lines[header + 1]) if ch == " " and lines[header + 1][i - 1] == "-"]
    for row in lines[header + 2 : header + 7]:
        assert all(row[c] == " " for c in rule_cols[:5]), row


def _one_line_error(r: subprocess.CompletedProcess, name: str):
    assert r.returncode == 2
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and name in lines[0], r.stderr


def test_broken_file_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00" + BERT.read_bytes()[4:200])  # a real gzip trace, cut after 200 bytes
    _one_line_error(_run(str(bad), "--json"), "broken.json.gz")


def test_json_that_is_not_a_trace_exits_2(tmp_path):
    # a real JSON file that is not a profiler trace: Nsight Compute's per-kernel bytes beside the HF traces
    ncu = SAMPLE_TRACES / "hf_geglu_bf16" / "eager.ncu.json"
    target = ncu if ncu.exists() else tmp_path / "other.json"
    if not ncu.exists():
        target.write_text('{"kernels": []}')
    _one_line_error(_run(str(target)), target.name)


def test_missing_file_exits_2(tmp_path):
    _one_line_error(_run(str(tmp_path / "nope.json"), "--json"), "nope.json")
