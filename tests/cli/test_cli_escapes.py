"""Terminal escapes: ANSI CSI, OSC 8 links, OSC titles, BEL, 8-bit C1 and U+202E in kernel names,
op names, labels and file names never reach a terminal, a Markdown report or a CSV raw.

Inputs are the REAL HF GEGLU eager / torch.compile recordings (sample_traces/, H100) whose kernel and CPU-op names
are rewritten to carry the sequences, saved under file names that carry them too. The CLI runs as a user runs it (a
subprocess), so what is checked is the bytes that reach stdout / stderr and the files written.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLE_TRACES, require_data

HF = SAMPLE_TRACES / "hf_geglu_bf16"
SEQS = (
    "\x1b[31m",  # SGR red
    "\x1b]8;;http://evil.example/\x07",  # OSC 8 hyperlink, BEL-terminated
    "\x1b]0;pwned\x1b\\",  # OSC window title, ST-terminated
    "\x07",  # BEL
    "\u202e",  # right-to-left override
    "\x9b2J",  # 8-bit CSI: clear screen
)
# What must never appear raw: C0 (except the line ends of text and CSV), DEL, C1, bidi controls.
RAW = re.compile(r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
RESIDUE = ("[31m", "]8;;", "evil.example", "pwned", "[2J")
FILE_PREFIX = "run\x1b[31m\u202e\x07"


def _hostile(path: Path) -> bytes:
    """Every kernel and CPU-op name carries every sequence: in front of vendor names, behind Inductor names (whose
    `^triton_` prefix the classifier anchors on)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    seqs = "".join(SEQS)
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "cpu_op") and isinstance(e.get("name"), str):
            n = e["name"]
            e["name"] = f"{n}{seqs}x\x1b[0m" if n.startswith("triton_") else f"{seqs}{n}\x1b]8;;\x07"
    return gzip.compress(json.dumps(doc).encode())


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    require_data(HF / "eager.json.gz")
    d = tmp_path_factory.mktemp("esc")
    out = {}
    for v in ("eager", "compile"):
        p = d / f"{FILE_PREFIX}{v}.json.gz"
        p.write_bytes(_hostile(HF / f"{v}.json.gz"))
        out[v] = p
    bad = d / f"{FILE_PREFIX}\x1b]8;;https:evil.example\x07broken.json"
    bad.write_bytes(b'{"traceEvents": [\x1b[31m')
    out["broken"] = bad
    out["dir"] = d
    return out


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *map(str, args)], cwd=ROOT, capture_output=True, timeout=300
    )


def _assert_clean(text: str, where: str, json_data: bool = False) -> None:
    """No raw control/bidi character; outside JSON (where names are data, their sequences \\u-escaped) also no
    leftover of a sequence."""
    m = RAW.search(text)
    assert m is None, f"{where}: raw {m.group()!r} at {m.start()}: {text[max(0, m.start() - 40) : m.start() + 40]!r}"
    for r in () if json_data else RESIDUE:
        assert r not in text, f"{where}: residue {r!r} of an escape sequence"


def test_the_fixture_really_is_hostile(hostile):
    from analyzer import load_trace

    names = " ".join(load_trace(hostile["compile"]).kernels["name"])
    for s in SEQS:
        assert s in names, repr(s)
    assert "\x1b" in str(hostile["eager"])


def test_summary_text_and_json(hostile):
    p = _cli("summary", hostile["compile"])
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    _assert_clean(out, "summary stdout")
    _assert_clean(p.stderr.decode(), "summary stderr")
    assert "triton_poi_fused" in out and "runcompile" in out  # names still shown, minus the sequences

    p = _cli("summary", "--json", hostile["compile"])
    assert p.returncode == 0, p.stderr
    _assert_clean(p.stdout.decode(), "summary --json stdout", json_data=True)
    doc = json.loads(p.stdout)
    assert any("\x1b[31m" in k["name"] or "\u202e" in k["name"] for k in doc["kernels"])  # JSON keeps data verbatim


def test_diff_text_json_reports_and_labels(hostile):
    md, html = hostile["dir"] / f"{FILE_PREFIX}r.md", hostile["dir"] / "r.html"
    labels = "base\x1b[31m,cand\u202e\x07"
    p = _cli("diff", hostile["eager"], hostile["compile"], "--report", md, "--labels", labels)
    assert p.returncode == 0, p.stderr
    _assert_clean(p.stdout.decode(), "diff stdout")
    _assert_clean(p.stderr.decode(), "diff stderr")
    assert "report: " in p.stdout.decode()
    text = md.read_text(encoding="utf-8")
    _assert_clean(text, "diff .md report")
    assert "triton\\_poi\\_fused" in text  # the fused kernel still named (Markdown-escaped)

    p = _cli("diff", hostile["eager"], hostile["compile"], "--json", "--report", html)
    assert p.returncode == 0, p.stderr
    _assert_clean(p.stdout.decode(), "diff --json stdout", json_data=True)
    doc = json.loads(p.stdout)
    assert doc["kernels_per_step"] == [5, 4]
    assert doc["labels"] == ["runeager", "runcompile"]  # default labels from file names, made safe
    page = re.sub(r"<script\b.*?</script>", "", html.read_text(encoding="utf-8"), flags=re.S)  # plotly.js: binary-ish
    _assert_clean(page, "diff .html report outside scripts")


def test_trace_error_line_and_exit_code(hostile):
    p = _cli("summary", hostile["broken"])
    assert p.returncode == 2
    err = p.stderr.decode()
    assert err.startswith("error: ") and err.count("\n") == 1, err
    _assert_clean(err, "TraceError line")
    assert "broken.json" in err
    p = _cli("diff", hostile["eager"], hostile["broken"], "--report", hostile["dir"] / "x.md")
    assert p.returncode == 2
    _assert_clean(p.stderr.decode(), "diff TraceError line")


def test_ranks_text_and_json(hostile, tmp_path):
    import shutil

    d = tmp_path / "set\x1b[31m"
    d.mkdir()
    for i in range(2):
        shutil.copy(hostile["compile"], d / f"rank{i}\u202e\x07.json.gz")
    for extra in ((), ("--json",)):
        p = _cli("ranks", d, "--workers", "1", *extra)
        assert p.returncode in (0, 2), p.stderr
        _assert_clean(p.stdout.decode(), f"ranks {extra} stdout", json_data=bool(extra))
        _assert_clean(p.stderr.decode(), f"ranks {extra} stderr")


def test_csv_exports(hostile):
    """The fusion-groups CSV (report.fusions_csv) and the kernels CSV (figures.kernels_table.csv_bytes)."""
    from analyzer import diff_runs, load_trace, summarize
    from analyzer.figures.kernels_table import csv_bytes, kernels_view
    from analyzer.report import fusions_csv

    base, cand = summarize(load_trace(hostile["eager"])), summarize(load_trace(hostile["compile"]))
    d = diff_runs(base, [cand], labels=["base\x1b[31m", "cand\u202e"])
    text = fusions_csv(d)
    assert len(list(csv.reader(io.StringIO(text)))) >= 2  # header + the gelu/mul fusion
    _assert_clean(text.replace("\r\n", "\n"), "fusion-groups CSV")
    k = csv_bytes(kernels_view([(f"{FILE_PREFIX}compile", cand.kernels)])).decode("utf-8-sig")
    _assert_clean(k.replace("\r\n", "\n"), "kernels CSV")
    assert "triton_poi_fused" in k
