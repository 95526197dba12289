"""A truncated trace: its figures come from complete steps only, it says what the cut cost, and the summary CLI
never prints 'None kernels … medians over steps []' (real files: the bundled HF compile trace cut short, and
tests/data/broken/truncated_50pct.json)."""

from __future__ import annotations

import gzip

import pytest

from analyzer import load_trace, summarize
from analyzer.cli import main
from tests.conftest import ROOT

HF = ROOT / "sample_traces" / "hf_geglu_bf16"
BROKEN = ROOT / "tests" / "data" / "broken"
pytestmark = pytest.mark.needs_data(HF / "compile.json.gz")


@pytest.mark.parametrize("fraction", [0.15, 0.2, 0.6])
def test_the_last_step_before_the_cut_is_left_out(tmp_path, fraction):
    raw = gzip.decompress((HF / "compile.json.gz").read_bytes())
    path = tmp_path / "cut.json"
    path.write_bytes(raw[: int(len(raw) * fraction)])
    whole = summarize(load_trace(HF / "compile.json.gz"))
    cut = summarize(load_trace(path))
    assert cut.per_step["kernels"] == whole.per_step["kernels"]  # not 2.5 from a half-recorded step
    assert any("(the last before the file's cut) dropped" in w for w in cut.warnings), cut.warnings
    assert any("whatever was recorded after the cut is missing" in d for d in cut.doubts), cut.doubts


def test_summary_cli_says_there_are_no_per_step_figures(capsys):
    assert main(["summary", str(BROKEN / "truncated_50pct.json"), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "steps []" not in out
    assert "none holds a GPU op: no per-step figures" in out
