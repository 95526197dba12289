"""The import contracts hold (pyproject.toml [tool.importlinter], run by `lint-imports`) and no module-level import
cycle exists in the analyzer, lazy imports included (scripts/check_import_cycles.py); .ci/run runs both too. The
cycle finder is also shown a real cycle, so that its all-clear means something."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import grimp

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("check_import_cycles", ROOT / "scripts" / "check_import_cycles.py")
check_import_cycles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_import_cycles)


def test_no_import_cycle_in_the_analyzer():
    out = subprocess.run(
        [sys.executable, "scripts/check_import_cycles.py", "analyzer"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout
    assert out.stdout.startswith("no import cycle among the")


def test_the_cycle_finder_sees_a_lazy_cycle():
    """The import that analyzer.readers.cache once made of analyzer.readers.load inside a function, put back: the
    finder names both modules and the lines that close the cycle."""
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("analyzer", cache_dir=None)
    assert check_import_cycles.cycles(graph, ["analyzer"]) == []
    graph.add_import(
        importer="analyzer.readers.cache", imported="analyzer.readers.load", line_number=1, line_contents="(lazy)"
    )
    graph.add_import(importer="analyzer.readers.load", imported="analyzer.readers.cache")
    found = check_import_cycles.cycles(graph, ["analyzer"])
    assert ["analyzer.readers.cache", "analyzer.readers.load"] in found


def test_import_contracts_are_kept():
    """import-linter is a dev requirement: missing, this fails (never a silent skip)."""
    out = subprocess.run(["lint-imports", "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "0 broken" in out.stdout
