"""The runner side files' JSON Schema (analyzer.runmeta.json_schemas, committed as docs/schemas/*.schema.json):
generated from the typed structs, and every bundled runner manifest and Nsight Compute file validates against it
with an independent validator (jsonschema), agreeing with runmeta's own check."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import jsonschema
import pytest

from analyzer import runmeta
from tests.conftest import DATA, ROOT

MANIFESTS = sorted([*(ROOT / "sample_traces").glob("*/manifest.json"), *DATA.rglob("manifest.json")])
NCU_FILES = sorted([*(ROOT / "sample_traces").rglob("*.ncu.json"), *DATA.rglob("*.ncu.json")])


def _validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((ROOT / runmeta.SCHEMA_FILES[kind]).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("kind", ["manifest", "ncu"])
def test_committed_schema_is_the_generated_one(kind):
    """The file on disk is what the structs generate: regenerate with `python -m analyzer schema KIND`."""
    assert (ROOT / runmeta.SCHEMA_FILES[kind]).read_text() == runmeta.schema_text(kind)
    out = subprocess.run(
        [sys.executable, "-m", "analyzer", "schema", kind], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout == runmeta.schema_text(kind)


def test_bundled_runner_manifests_validate():
    assert len(MANIFESTS) >= 20  # sample_traces/*/manifest.json and tests/data/**/manifest.json: none may go missing
    validator = _validator("manifest")
    runner = [p for p in MANIFESTS if json.loads(p.read_text()).get("schema") == runmeta.MANIFEST_SCHEMA]
    assert len(runner) >= 20  # the others are hand recordings that name their file manifest.json: every key optional
    for path in MANIFESTS:
        doc = json.loads(path.read_text())
        errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, (path, errors[:3])
        assert runmeta.read_manifest(path) == doc  # runmeta agrees: the same document, checked


def test_bundled_ncu_files_validate():
    assert NCU_FILES
    validator = _validator("ncu")
    for path in NCU_FILES:
        doc = json.loads(path.read_text())
        errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, (path, errors[:3])
        assert runmeta.read_ncu(path) == doc and runmeta.ncu_problem(doc) is None


@pytest.mark.parametrize(
    ("where", "value"),
    [(("variants", 0, "name"), {"a": 1}), (("shapes", "tokens"), -5), (("gpu",), "H100"), (("variants",), {})],
)
def test_schema_and_runmeta_refuse_the_same_damage(where, value):
    """A field of the wrong type in a real manifest: the JSON Schema and runmeta's structs both refuse it."""
    doc = copy.deepcopy(json.loads(MANIFESTS[0].read_text()))
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    assert list(_validator("manifest").iter_errors(doc))
    with pytest.raises(runmeta.SideFileError):
        runmeta.check_manifest(doc)


def test_the_runners_manifest_writer_matches_the_schema(tmp_path):
    """What kernels.runner.manifest writes (its header on this CPU machine, a recorded variant's entry and a failed
    one, as kernels.runner.run puts them together) is accepted by the JSON Schema and by runmeta, and reads back
    as the facts a diff states."""
    from kernels.runner import manifest as runner_manifest
    from kernels.runner import options
    from kernels.runner.record import Live

    ns = options.build_parser().parse_args(["--out", str(tmp_path)])
    options.validate(ns)  # fills the workload's default sizes, as the runner does before it writes anything
    doc = runner_manifest.header(ns)
    assert doc["schema"] == runmeta.MANIFEST_SCHEMA
    live = Live("eager", None, 1.5, times_us=[100.0 + i for i in range(20)], launch_us=[110.0 + i for i in range(20)])
    cond = {"profiled": {"sm_clock_mhz": {"median": 1980, "min": 1965, "max": 1980}, "n_samples": 12}}
    recorded = {"name": "eager", **runner_manifest.recorded_entry(live, "eager.json.gz", cond, None, False)}
    doc["variants"] = [recorded, {"name": "liger", "status": "failed", "message": "liger-kernel is not installed"}]
    doc = json.loads(json.dumps(doc, indent=1))  # as written to manifest.json
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in _validator("manifest").iter_errors(doc)]
    assert not errors, errors[:3]
    assert runmeta.load_manifest(json.dumps(doc).encode()) == doc
    facts = runmeta.manifest_entry_facts(doc, recorded)
    assert facts["median_us"] == recorded["median_us"] and facts["conditions"]["sm_clock_mhz"]["median"] == 1980
    assert facts["workload"] == ns.workload and facts["shapes"]["tokens"] == ns.batch * ns.seq
