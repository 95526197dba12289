"""`python -m analyzer diff` as a user runs it: a subprocess, real traces, exit codes, JSON keys, reports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLE_TRACES, TRACES, require_data

HF = SAMPLE_TRACES / "hf_geglu_bf16"


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", "diff", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def hf_paths():
    require_data(HF / "eager.json.gz")
    return {v: HF / f"{v}.json.gz" for v in ("eager", "compile", "liger", "fuselens")}


def test_json_one_candidate_has_the_keys_at_top_level(hf_paths):
    p = run_cli(hf_paths["eager"], hf_paths["compile"], "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # one object, nothing else on stdout
    assert doc["kernels_per_step"] == [5, 4]
    assert doc["hbm_bytes_avoided_per_step"] == 100_663_296
    assert len(doc["gpu_time_us_per_step"]) == 2 and all(t > 0 for t in doc["gpu_time_us_per_step"])
    (f,) = doc["fusions"]
    assert f["fused_kernel"] == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert len(f["replaces"]) == 2 and f["ops"] == ["gelu", "mul"]
    assert f["intermediates"][0]["shape"] == [64, 128, 3072]
    assert f["intermediates"][0]["dtype"] == "bf16" and f["intermediates"][0]["bytes"] == 50_331_648
    assert f["bytes_avoided_per_step"] == 100_663_296 and f["time_saved_us_per_step"] > 0
    assert doc["unmatched"] == {"base": [], "candidate": []}
    assert doc["labels"] == ["eager", "compile"]


def test_json_several_candidates(hf_paths):
    p = run_cli(
        hf_paths["eager"], hf_paths["compile"], hf_paths["liger"], hf_paths["fuselens"], "--json", "--labels", "E,C,L,F"
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["labels"] == ["E", "C", "L", "F"]
    assert "fusions" not in doc  # several candidates: per candidate only
    got = {c["label"]: (c["kernels_per_step"], c["hbm_bytes_avoided_per_step"]) for c in doc["candidates"]}
    assert got == {"C": ([5, 4], 100_663_296), "L": ([5, 4], 100_663_296), "F": ([5, 2], 301_989_888)}
    for c in doc["candidates"]:
        assert {
            "kernels_per_step",
            "gpu_time_us_per_step",
            "hbm_bytes_avoided_per_step",
            "fusions",
            "unmatched",
        } <= set(c)
    assert [r["label"] for r in doc["runs"]] == ["E", "C", "L", "F"]


def test_text_output(hf_paths):
    p = run_cli(hf_paths["eager"], hf_paths["fuselens"])
    assert p.returncode == 0, p.stderr
    assert "kernels/step 5 → 2" in p.stdout
    assert "302.0 MB logical, ≈" in p.stdout and "DRAM predicted" in p.stdout and "logical: 301,989,888 B" in p.stdout
    assert "fuselens_dual_gemm_glu_kernel" in p.stdout


@pytest.mark.parametrize("suffix", [".html", ".md"])
def test_report_files(hf_paths, tmp_path, suffix):
    out = tmp_path / f"review{suffix}"
    p = run_cli(hf_paths["eager"], hf_paths["compile"], "--report", out)
    assert p.returncode == 0, p.stderr
    text = out.read_text(encoding="utf-8")
    assert "100.7 MB" in text and "5 → 4" in text
    if suffix == ".html":
        assert "<script src" not in text.lower()


def test_public_pair_exit_0():
    p = run_cli(TRACES["legacy_resnet"], TRACES["legacy_resnet_w4"], "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["fusions"] == [] and doc["hbm_bytes_avoided_per_step"] == 0


def test_two_ranks_of_one_job_show_no_fusion():
    """Rank 0 vs rank 1 of one job (HTA trace_filter): the same program, so nothing fused. It printed 6 fusions and
    734,134,272 B avoided; the kernels one rank ran more of are unmatched work."""
    p = run_cli(TRACES["hta_filter_rank0"], TRACES["hta_filter_rank1"], "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["kernels_per_step"] == [577, 552]
    assert doc["fusions"] == [] and doc["n_fusions"] == 0 and doc["hbm_bytes_avoided_per_step"] == 0
    assert doc["unmatched"]["base"] and doc["unmatched"]["candidate"]
    text = run_cli(TRACES["hta_filter_rank0"], TRACES["hta_filter_rank1"]).stdout
    assert "fusion:" not in text and "HBM traffic avoided per step: 0 B logical" in text


def _one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert p.stdout == ""
    return lines[0]


def test_missing_file_exit_2(tmp_path):
    line = _one_line_error(run_cli(TRACES["h100_bert"], tmp_path / "nope.json.gz"))
    assert "nope.json.gz" in line


def test_not_a_trace_exit_2(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    line = _one_line_error(run_cli(TRACES["h100_bert"], bad))
    assert "notes.json" in line


def test_bad_labels_exit_2():
    line = _one_line_error(run_cli(TRACES["h100_bert"], TRACES["h100_bert"], "--labels", "a,b,c"))
    assert "--labels" in line and "3 labels for 2 traces" in line


def test_bad_report_suffix_exit_2(tmp_path):
    line = _one_line_error(run_cli(TRACES["h100_bert"], TRACES["h100_bert"], "--report", tmp_path / "r.pdf"))
    assert "r.pdf" in line and ".html or .md" in line


def test_unwritable_report_exit_2(tmp_path):
    line = _one_line_error(
        run_cli(TRACES["h100_bert"], TRACES["h100_bert"], "--report", tmp_path / "no" / "dir" / "r.md")
    )
    assert "cannot write the report" in line


def test_json_states_which_time_its_change_uses(hf_paths, capsys):
    """The change % names its time; busy and span changes sit beside it, with the same per-step
    spreads as `summary --json`'s step table."""
    from analyzer.cli import main  # in process: the same code path as the subprocess tests above, no interpreter start

    assert main(["diff", str(hf_paths["eager"]), str(hf_paths["liger"]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "raw_gpu_time_change_pct compares gpu_time_us_per_step AS RECORDED" in doc["change_pct_basis"]
    for key, pct in (("gpu_busy_us_per_step", "gpu_busy_change_pct"), ("span_us_per_step", "span_change_pct")):
        b, c = doc[key]
        assert doc[pct] == pytest.approx(100.0 * (c - b) / b)
    assert main(["summary", "--json", str(hf_paths["liger"])]) == 0
    summ = json.loads(capsys.readouterr().out)
    assert doc["span_us_per_step"][1] == pytest.approx(summ["per_step"]["span_us"])
    assert doc["spread"]["span_us_per_step"][1] == pytest.approx(summ["per_step"]["spread"]["span_us"])
    assert doc["spread"]["gpu_busy_us_per_step"][1] == pytest.approx(summ["per_step"]["spread"]["gpu_busy_us"])
