"""Hostile runner side files (manifest.json, <variant>.ncu.json): one line naming the file and the field, and every
command and page goes on without that side file (analyzer.runmeta). Real traces; the CLI as a subprocess; the
dashboard through AppTest's real uploader."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys

import pytest

from analyzer import runmeta
from analyzer.runmeta import manifest_beside, manifest_doc_facts, recorded_conditions, recorded_probe
from tests.conftest import ROOT, SAMPLE_TRACES

HF = SAMPLE_TRACES / "hf_geglu_bf16"
PROBE = SAMPLE_TRACES / "plain_8192tok_h8192_bf16"
pytestmark = pytest.mark.needs_data(HF / "eager.json.gz")

DEEP = b'{"schema": "fuselens.profile/1", "variants": [], "profiler": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"


def _doc(path=PROBE / "manifest.json") -> dict:
    return json.loads(path.read_text())


def _entry(doc, name="eager") -> dict:
    return next(v for v in doc["variants"] if v["name"] == name)


def hostile_manifests() -> dict[str, tuple[bytes, str]]:
    """case -> (manifest bytes, the field its one line must name): the cases that crashed the dashboard or ended
    `diff` in a traceback, plus their neighbours."""
    out = {}

    def put(case, field, edit):
        doc = _doc()
        edit(doc)
        out[case] = (json.dumps(doc).encode(), field)

    put("roles_holds_a_list", "control_probe.roles[0]", lambda d: d["control_probe"].update(roles=[["settle"], "x"]))
    put("variant_name_object", "variants[0].name", lambda d: d["variants"][0].update(name={"a": 1}))
    put("shapes_batch_object", "shapes.batch", lambda d: d["shapes"].update(batch={"n": 64}))
    put("gpu_name_list", "gpu.name", lambda d: d["gpu"].update(name=["H100"]))
    put("variants_is_1", "variants", lambda d: d.update(variants=1))
    put("variants_is_true", "variants", lambda d: d.update(variants=True))
    put("shapes_negative", "shapes.seq", lambda d: d["shapes"].update(seq=-4))
    put("shapes_batch_null", "shapes.batch", lambda d: d["shapes"].update(batch=None, tokens=None))
    put(
        "probe_us_row_object",
        "variants[0].control_probe.us[0]",
        lambda d: d["variants"][0]["control_probe"].update(us=[{"a": 1}]),
    )
    put("huge_integer", "variants[0].n_iter", lambda d: d["variants"][0].update(n_iter=10**30))
    put("top_level_list", "the top level", lambda d: d.clear())
    out["top_level_list"] = (b"[1, 2, 3]", "the top level")
    out["deep_200k"] = (DEEP, "nested deeper")
    out["deep_40"] = (
        json.dumps({**_doc(), "profiler": json.loads("[" * 40 + "]" * 40)}).encode(),
        "profiler",
    )
    out["not_json"] = (b'{"schema": "fuselens.profile/1", "variants": [', "not valid JSON")
    out["not_utf8"] = (b'{"schema": "fuselens.profile/1", "torch": "\xff\xfe", "variants": []}', "not valid JSON")
    return out


HOSTILE = hostile_manifests()


# ------------------------------------------------------------------------------------------------ the boundary
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_off_schema_manifest_is_one_line_naming_file_and_field(case):
    data, field = HOSTILE[case]
    with pytest.raises(runmeta.SideFileError) as err:
        runmeta.load_manifest(data, "run/manifest.json")
    line = str(err.value)
    assert "\n" not in line and line.startswith("run/manifest.json: ") and field in line, line
    assert len(line) < 320


def test_every_recorded_manifest_and_ncu_file_passes_unchanged():
    files = sorted(SAMPLE_TRACES.glob("**/manifest.json")) + sorted((ROOT / "tests" / "data").glob("**/manifest.json"))
    assert len(files) >= 10
    for f in files:
        assert runmeta.load_manifest(f.read_bytes(), f) == json.loads(f.read_text())  # the same plain document
    for f in sorted(SAMPLE_TRACES.glob("**/*.ncu.json")):
        assert runmeta.load_ncu(f.read_bytes(), f) == json.loads(f.read_text())


def test_ncu_off_schema_and_figures_that_are_not_numbers():
    good = json.loads((HF / "compile.ncu.json").read_text())
    bad = copy.deepcopy(good)
    bad["kernels"][1]["kernel"] = {"x": 1}
    with pytest.raises(runmeta.SideFileError, match=r"^c\.ncu\.json: kernels\[1\]\.kernel: expected `str`"):
        runmeta.load_ncu(json.dumps(bad).encode(), "c.ncu.json")
    with pytest.raises(runmeta.SideFileError, match=r"kernels: expected `array`"):
        runmeta.load_ncu(b'{"kernels": 3, "metrics": []}', "c.ncu.json")


def test_the_functions_on_plain_documents_never_raise_on_the_crash_cases():
    """Defence in depth: facts read straight from a document (tests, the old upload path) never raise either."""
    doc = _doc()
    doc["control_probe"]["roles"] = [["settle"], "gemm", "copy"]
    assert recorded_probe(doc, _entry(doc)) is None  # was: TypeError unhashable list
    e = copy.deepcopy(_entry(_doc()))
    e["conditions"]["profiled"]["n_samples"] = 1e308
    assert "n_samples" not in recorded_conditions(e)  # was: a 1e308 int that --json could not print
    assert manifest_doc_facts({"variants": 1}, "eager.json.gz") is None


def test_a_fifo_or_a_symlink_loop_as_manifest_is_one_line_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "manifest.json")
    doc, note = manifest_beside(tmp_path / "eager.json.gz")
    assert doc is None and "FIFO" in note and "manifest.json" in note
    (tmp_path / "manifest.json").unlink()
    os.symlink("manifest.json", tmp_path / "manifest.json")
    doc, note = manifest_beside(tmp_path / "eager.json.gz")
    assert doc is None and "symbolic link loop" in note


# ------------------------------------------------------------------------------------------------ the CLI
def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


CLI_CASES = ["roles_holds_a_list", "variant_name_object", "shapes_batch_object", "gpu_name_list", "variants_is_1"]


@pytest.mark.slow
@pytest.mark.parametrize("case", [*CLI_CASES, "deep_200k", "variants_is_true"])
def test_diff_and_report_go_on_without_an_off_schema_manifest(tmp_path, case):
    for v in ("eager", "fuselens"):
        shutil.copy(PROBE / f"{v}.json.gz", tmp_path / f"{v}.json.gz")
    data, field = HOSTILE[case]
    (tmp_path / "manifest.json").write_bytes(data)
    p = cli("diff", tmp_path / "eager.json.gz", tmp_path / "fuselens.json.gz", "--report", tmp_path / "r.md", "--json")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "manifest.json" in lines[0], lines
    assert field in lines[0] and "run context left out" in lines[0]
    out = json.loads(p.stdout)
    assert out["runs"][0]["facts"].get("workload") is None  # the manifest was left out, not half-read
    assert (tmp_path / "r.md").is_file()


@pytest.mark.slow
def test_n_samples_1e308_prints_json(tmp_path):
    """Item 2: `n_samples: 1e308` once ended `diff --json` in 'Integer exceeds 64-bit range'."""
    doc = _doc()
    for v in doc["variants"]:
        v["conditions"]["profiled"]["n_samples"] = 1e308
    for v in ("eager", "fuselens"):
        shutil.copy(PROBE / f"{v}.json.gz", tmp_path / f"{v}.json.gz")
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    p = cli("diff", tmp_path / "eager.json.gz", tmp_path / "fuselens.json.gz", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    facts = json.loads(p.stdout)["runs"][0]["facts"]
    assert facts["workload"] == doc["workload"] and "n_samples" not in facts["conditions"]


# ------------------------------------------------------------------------------------------------ the dashboard
DASH_CASES = [*CLI_CASES, "deep_200k", "variants_is_true"]


@pytest.mark.slow
@pytest.mark.parametrize("case", DASH_CASES)
def test_uploaded_off_schema_manifest_is_one_line_and_the_session_goes_on(case):
    from tests.support import app_support as s

    at = s.app()
    for r in list(s.runs(at)):
        at.sidebar.button(key=f"fl_rm_{r.key}").click().run()
    data, field = HOSTILE[case]
    s.upload(at, PROBE / "eager.json.gz", PROBE / "fuselens.json.gz", ("manifest.json", data))
    errs = s.texts(at, "error")
    assert any(e.startswith("manifest.json: ") and field in e for e in errs), errs
    assert s.labels(at) == ["eager", "fuselens"]
    for page in ("overview", "compare", "kernels", "roofline", "timeline"):
        s.goto(at, page)  # asserts no exception
        at.run()  # and once more: a broken side file must not break every rerun
        assert not at.exception
    assert all(not r.context for r in s.runs(at))  # left out, not half-attached
