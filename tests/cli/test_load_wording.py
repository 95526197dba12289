"""A file that is not a trace is told what it actually is (CLI: one line, exit 2; real trace bytes)."""

from __future__ import annotations

import bz2
import gzip
import io
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import ROOT, SAMPLE_TRACES

HF = SAMPLE_TRACES / "hf_geglu_bf16" / "eager.json.gz"
pytestmark = pytest.mark.needs_data(HF)


def _zip(raw: bytes) -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("eager.json", raw)
    return b.getvalue()


CASES = {
    "n42.json": (lambda raw: b"42", "valid JSON, but a number (42), not a trace"),
    "null.json": (lambda raw: b" null ", "valid JSON, but null (null), not a trace"),
    "twice.json.gz": (lambda raw: gzip.compress(gzip.compress(raw)), "gzip data inside the gzip (compressed twice)"),
    "zipped.json.gz": (_zip, "named .gz but not gzip-compressed: a zip archive"),
    "zipped.json": (_zip, "not JSON: a zip archive"),
    "bz.json.gz": (lambda raw: bz2.compress(raw[:200_000]), "named .gz but not gzip-compressed: bzip2"),
    "log.gz": (lambda raw: b"ERROR something went wrong\n" * 20, "named .gz but not gzip-compressed, and not JSON"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wording(tmp_path, name):
    make, expected = CASES[name]
    path = tmp_path / name
    path.write_bytes(make(gzip.decompress(HF.read_bytes())))
    p = subprocess.run(
        [sys.executable, "-m", "analyzer", "summary", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {name}: "), p.stderr
    assert expected in lines[0], lines[0]


def test_plain_json_named_gz_still_loads(tmp_path):
    """A trace that is JSON text under a .gz name is read (the content decides, not the name)."""
    path = tmp_path / "plain.json.gz"
    path.write_bytes(gzip.decompress(HF.read_bytes()))
    p = subprocess.run(
        [sys.executable, "-m", "analyzer", "summary", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
