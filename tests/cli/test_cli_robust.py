"""On the command line: malformed runner side files and implausible durations (real traces, subprocess)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLE_TRACES

HF = SAMPLE_TRACES / "hf_geglu_bf16"
pytestmark = pytest.mark.needs_data(HF / "eager.json.gz")


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=180
    )


def _folder(tmp_path, **entry):
    for v in ("eager", "compile"):
        shutil.copy(HF / f"{v}.json.gz", tmp_path / f"{v}.json.gz")
    man = json.loads((HF / "manifest.json").read_text())
    for v in man["variants"]:
        if v["name"] == "eager":
            v.update(entry)
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    return tmp_path


@pytest.mark.parametrize("report", ["x.html", "x.md"])
@pytest.mark.parametrize("bad", [{"median_us": "abc"}, {"dram_bytes_read": "abc"}, {"median_us": -3}])
def test_malformed_manifest_is_one_line_and_exit_2(tmp_path, report, bad):
    d = _folder(tmp_path, **bad)
    p = cli("diff", d / "eager.json.gz", d / "compile.json.gz", "--report", d / report)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    (key,) = bad
    assert "manifest.json" in lines[0] and f"{key} is" in lines[0] and 'variant "eager"' in lines[0]
    assert not (d / report).exists()


def test_well_formed_manifest_still_reports(tmp_path):
    d = _folder(tmp_path)
    p = cli("diff", d / "eager.json.gz", d / "compile.json.gz", "--report", d / "x.md")
    assert p.returncode == 0, p.stderr
    assert (d / "x.md").read_text().count("263.3") >= 1  # the eager CUDA-event median (263.26), from the manifest


def test_implausible_duration_is_refused_not_summed(tmp_path):
    """Item 10: `dur = 1e18` on every kernel of one step once gave a GPU time of 5e18 µs with no warning."""
    doc = json.loads(gzip.decompress((HF / "eager.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = 1e18
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(doc))
    p = cli("summary", path, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert any("implausible duration" in w and "1e+18" in w for w in out["warnings"]), out["warnings"]

    def numbers(x):
        if isinstance(x, dict):
            return [n for v in x.values() for n in numbers(v)]
        if isinstance(x, list):
            return [n for v in x for n in numbers(v)]
        return [x] if isinstance(x, (int, float)) and not isinstance(x, bool) else []

    assert max(numbers(out)) < 1e12  # no figure carries the damaged duration (byte estimates are ~1e8)
    per = out.get("per_step") or {}
    assert per.get("gpu_time_us") is None  # unknown, never 5e18
