"""The same per-rank analysis on Ray gives byte-identical `--json` to the local process pool.

Runs the real 2-rank HTA set (tests/data/ranks/hta_trace_filter) through `python -m analyzer ranks … --json` with
--engine local and --engine ray (a private local Ray: no address), then once more in-process with ship="bytes" (the
path for workers that cannot see the driver's disk) on a zip of the set. ~25-40 s on 2 cores, most of it Ray start.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray is not installed: pip install 'ray[default]' (requirements-dev.txt)")

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "tests" / "data" / "ranks" / "hta_trace_filter"


def _cli(*extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "analyzer", "ranks", str(SET), "--json", "--workers", "2", *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ray_and_local_json_are_identical(tmp_path):
    local = _cli("--engine", "local")
    assert local.returncode == 0, local.stderr
    ray_run = _cli("--engine", "ray")
    assert ray_run.returncode == 0, ray_run.stderr
    assert ray_run.stdout == local.stdout  # byte for byte: sorted keys, rank order, no pids/hosts/timings
    doc = json.loads(local.stdout)
    assert [e["rank"] for e in doc["sets"][0]["ranks"]] == [0, 1]
    assert "Traceback" not in ray_run.stderr

    # Bytes shipped through the object store, from a zip read in memory: still the same result.
    from analyzer.ranks import analyze_ranks

    z = tmp_path / "hta_trace_filter.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for f in sorted(SET.glob("*.json.gz")):
            zf.write(f, f.name)
    shipped = analyze_ranks(z, engine="ray", workers=2, ship="bytes")
    assert shipped.engine == "ray"
    assert json.dumps(shipped.to_json(), sort_keys=True) == json.dumps(json.loads(local.stdout), sort_keys=True)
