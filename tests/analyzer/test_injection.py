"""Injection: hostile kernel, op, file and run names are inert in every analyzer output.

The inputs are REAL traces (TraceLens H100 BERT eager as base, MI300 torch.compile'd block as candidate — a diff
with real fusion groups) whose kernel and op names are rewritten to carry HTML/JS, Markdown and spreadsheet-formula
payloads (`hostile_trace`). Eager kernel names get the payload in front (classification searches anywhere in the
name, and a formula must LEAD a cell to run); Inductor names (`^triton_…`, anchored) get it behind.

What "inert" means per output:
* JSON (summary, diff, ranks): the payload is data — present verbatim, never pre-escaped (that would double-escape
  downstream), and the document is strict JSON.
* HTML report: no element, attribute or script that was not in the report of the same traces with their real names;
  no raw payload anywhere (plotly's JSON escapes < > / as \\u003c …); chart labels HTML-escaped (Plotly renders
  label text as HTML); the payload still shows, escaped, as text.
* Markdown report: no raw HTML tag, no live link, tables keep their column count; the payload still shows, escaped.
* CSV exports (report.fusions_csv, figures.kernels_table.csv_bytes): no text cell a spreadsheet would evaluate.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "tests/data/tracelens/h100_bert-small_eager.json.gz"
CAND = ROOT / "tests/data/tracelens/mi300_compiled_transformer_block_triton.json.gz"
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
BREAKOUT = "</script><script>alert(1)</script>"
MD_LINK = "[x](javascript:alert(1))"
PIPE = "a|b|c"
FORMULAS = ("=cmd|' /C calc'!A0", "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0")
PAYLOADS = (SCRIPT, IMG, MD_LINK, PIPE, *FORMULAS, BREAKOUT, "**b** _i_ `c` # h ~~s~~ <!-- x")
LABELS = [IMG + "|x", "=cmd|' /C calc'!A0"]  # base, candidate: the CSV carries the candidate's
FILE_NAME = SCRIPT + ".json"
CSV_FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # ASCII, then full-width ＝ ＋ － ＠
CSV_LEADING = ("\t", "\r", "\n")  # a cell starting with one of these is quoted whatever follows
CSV_TRIMMABLE = " \t\r\n\u00a0\u3000\u200b\ufeff"  # what an importer may trim before it looks for a formula
# Every way a text cell can start a formula (analyzer/cells.py): each ASCII starter, each full-width form, a starter
# behind leading whitespace / tab / CR / LF / invisible characters, and a bare leading tab or CR.
FORMULA_CELLS = (
    "=1+1",
    "+1+1",
    "-1+1",
    "@SUM(1,1)",
    "\uff1d1+1",
    "\uff0b1+1",
    "\uff0d1+1",
    "\uff20SUM(1,1)",
    " =1+1",
    "  \uff1d1+1",
    "\t=1+1",
    "\r=1+1",
    "\n=1+1",
    " \t\r\n@SUM(1,1)",
    "\u00a0=1+1",
    "\u3000\uff0b1+1",
    "\u200b=1+1",
    "\ufeff-1+1",
    "\tcmd",
    "\rcmd",
)


def hostile_trace(path: Path, hostile: bool = True) -> bytes:
    """The real trace with every distinct kernel name and CPU op name carrying one payload (round-robin)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    if not hostile:
        return json.dumps(doc).encode()
    kernels = sorted({e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"})
    ops = sorted({e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op"})
    knew = {
        n: (f"{n} {PAYLOADS[i % len(PAYLOADS)]}" if n.startswith("triton_") else f"{PAYLOADS[i % len(PAYLOADS)]} {n}")
        for i, n in enumerate(kernels)
    }
    onew = {n: f"{n} {PAYLOADS[(i + 3) % len(PAYLOADS)]}" for i, n in enumerate(ops)}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = knew[e["name"]]
        elif e.get("cat") == "cpu_op":
            e["name"] = onew[e["name"]]
    return json.dumps(doc).encode()


@lru_cache(maxsize=2)
def runs(hostile: bool = True):
    from analyzer import diff_runs, load_trace, summarize

    base = summarize(load_trace(hostile_trace(BASE, hostile), name=FILE_NAME if hostile else "base.json"))
    cand = summarize(load_trace(hostile_trace(CAND, hostile), name="cand.json"))
    labels = LABELS if hostile else ["base", "cand"]
    return base, cand, diff_runs(base, [cand], labels=labels)


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)


def test_the_fixture_really_is_hostile():
    """Guards every test below: the payloads reach the summary and the diff (else the tests could not fail)."""
    base, cand, diff = runs()
    names = " ".join(base.kernels["name"]) + " ".join(cand.kernels["name"])
    for p in PAYLOADS:
        assert p in names, p
    # group rows (with hostile names) exist for the CSV / tables: BERT vs an MI300 block shares no fusion (their
    # names rule it out), but their GEMMs and attention swap
    assert len(diff.candidates[0].fusions + diff.candidates[0].swaps) >= 1


# ---------------------------------------------------------------------------------------------------------- JSON


def test_json_outputs_keep_payloads_as_plain_data():
    base, _, diff = runs()
    for doc in (base.to_json(), diff.to_json()):
        text = json.dumps(doc, allow_nan=False)  # strict JSON
        strings = set(_strings(json.loads(text)))
        joined = "\n".join(strings)
        for p in (SCRIPT, IMG, MD_LINK, FORMULAS[0]):
            assert p in joined, f"payload {p!r} missing: the JSON must carry names verbatim"
        assert "&lt;" not in joined and "\\u003c" not in text, (
            "pre-escaped names in JSON: escaping belongs to renderers"
        )
    assert FILE_NAME in base.to_json()["source"]


def test_ranks_json_keeps_hostile_file_names_as_data(tmp_path):
    """A rank set whose member names carry markup: JSON and text output hold them verbatim, one line each."""
    import zipfile

    from analyzer.ranks import analyze_ranks

    z = tmp_path / "set.zip"
    data = (ROOT / "tests/data/ranks/hta_trace_filter/sampled_rank-0.json.gz").read_bytes()
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("<img src=x onerror=alert(1)>rank0.json.gz", data)
        zf.writestr("=cmd|' calc'!A0 rank1.json.gz", data)
    rep = analyze_ranks(z, workers=1, labels=[SCRIPT]).to_json()
    files = [e["file"] for e in rep["sets"][0]["ranks"]] + [f["file"] for f in rep["sets"][0]["failed"]]
    assert "<img src=x onerror=alert(1)>rank0.json.gz" in files
    assert rep["sets"][0]["label"] == SCRIPT
    json.dumps(rep, allow_nan=False)


# ---------------------------------------------------------------------------------------------------------- HTML


class _Structure(HTMLParser):
    """Start/end tags with attribute names, script bodies, attribute values and visible text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple] = []
        self.scripts: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(("start", tag, tuple(sorted(a for a, _ in attrs))))
        self.attrs += [(tag, a, v or "") for a, v in attrs]
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        self.tags.append(("end", tag))
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


def _parse(html_text: str) -> _Structure:
    p = _Structure()
    p.feed(html_text)
    p.close()
    return p


@pytest.fixture(scope="module")
def html_reports():
    from analyzer.report import report_html

    return report_html(runs(True)[2]), report_html(runs(False)[2])


def test_html_report_has_no_live_payload(html_reports):
    hostile, clean = html_reports
    for raw in (SCRIPT, IMG, BREAKOUT):
        assert raw not in hostile, f"raw {raw!r} in the HTML report"
    h, c = _parse(hostile), _parse(clean)
    # Same element structure as the report of the same traces with their real names: no injected tag, attribute
    # or script, and no script closed early by a '</script>' inside a name.
    count = lambda tags, kind, name: sum(1 for t in tags if t[0] == kind and t[1] == name)  # noqa: E731
    assert count(h.tags, "start", "script") == count(c.tags, "start", "script") == count(h.tags, "end", "script")
    assert {t[1] for t in h.tags} == {t[1] for t in c.tags}
    for tag, attr, value in h.attrs:
        assert not attr.startswith("on"), f"event handler attribute {attr} on <{tag}>"
        if attr in ("href", "src", "action", "formaction", "xlink:href"):
            assert not value.strip().lower().startswith(("javascript:", "data:text/html")), (tag, attr, value)
    visible = "\n".join(h.text) + "\n".join(v for _, a, v in h.attrs if a == "title")
    assert SCRIPT in visible and MD_LINK in visible, "payloads should show as text (escaped), not vanish"


def test_html_report_chart_labels_are_escaped(html_reports):
    """Plotly renders label text as (a subset of) HTML: labels from trace names must arrive HTML-escaped."""
    hostile, _ = html_reports
    decoded = []
    for body in _parse(hostile).scripts:
        for lit in re.findall(r'"((?:[^"\\]|\\.)*alert\(1\)(?:[^"\\]|\\.)*)"', body):
            decoded.append(json.loads(f'"{lit}"'))
    assert decoded, "no chart carried a hostile label: the test would prove nothing"
    for s in decoded:
        assert "<script" not in s.lower() and "<img" not in s.lower(), f"unescaped chart label: {s[:120]!r}"


# ------------------------------------------------------------------------------------------------------ Markdown


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_markdown_report_is_inert_and_tables_hold():
    from analyzer.report import report_markdown

    md = report_markdown(runs(True)[2])
    assert not re.search(r"<\s*(script|img|iframe|svg|a)\b", md, re.I), "raw HTML tag in the Markdown report"
    assert not re.search(r"(?<!\\)\]\((?:javascript|data):", md, re.I), "live link in the Markdown report"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "\\[x\\]" in md, "payloads should show, escaped"
    lines = md.splitlines()
    i, tables = 0, 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i + 1]):
            width = _unescaped_pipes(lines[i])
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                assert _unescaped_pipes(lines[j]) == width, f"table row broken by a name: {lines[j][:160]!r}"
                j += 1
            tables += 1
            i = j
        else:
            i += 1
    assert tables >= 3


# ----------------------------------------------------------------------------------------------------------- CSV


def _assert_csv_inert(text: str) -> int:
    rows = list(csv.reader(io.StringIO(text)))
    checked = 0
    for row in rows[1:]:
        for cell in row:
            try:
                float(cell)
                continue  # a number ("-73.6") is data, not a formula
            except ValueError:
                pass
            assert not _runnable(cell), f"CSV cell a spreadsheet would evaluate: {cell[:80]!r}"
            checked += 1
    return checked


def _runnable(cell: str) -> bool:
    """What the tests take for a cell a spreadsheet could run (written out here, not imported from analyzer.cells)."""
    return cell.startswith(CSV_LEADING) or cell.lstrip(CSV_TRIMMABLE).startswith(CSV_FORMULA_START)


@pytest.mark.parametrize("text", FORMULA_CELLS, ids=ascii)
def test_spreadsheet_safe_quotes_every_formula_start(text):
    from analyzer.cells import spreadsheet_safe

    assert _runnable(text)
    assert spreadsheet_safe(text) == "'" + text  # one apostrophe in front, the text itself kept verbatim


def test_spreadsheet_safe_leaves_text_and_numbers_alone():
    import math

    import numpy as np

    from analyzer.cells import spreadsheet_safe

    for text in ("gelu", "a=b", "x-1", "triton_poi_fused_add_0", "'=1+1", "", "   ", "[64×128] bf16 = 2 B"):
        assert spreadsheet_safe(text) == text
    for number in (-3.5, -1, 0, 2.0, np.float64(-3.5), np.int64(-7), True, None):
        assert spreadsheet_safe(number) is number  # numbers stay numbers: never turned into text
    assert math.isnan(spreadsheet_safe(float("nan")))


def test_fusions_csv_neutralises_every_formula_start():
    """The Compare page's CSV download (report.fusions_csv) with every formula start as candidate label, kind, fused
    kernel, replaced kernel and op: each cell is quoted; the real negative time saved stays a number."""
    from dataclasses import replace

    from analyzer.report import fusions_csv

    diff = runs(False)[2]
    real = diff.candidates[0]
    slower = next(f for f in real.fusions + real.swaps if f.time_saved_us_per_step < 0)  # the MI300 row is slower
    cands = [
        replace(
            real,
            label=text,
            fusions=[replace(slower, kind=text, fused_kernel=text, replaces=[text], ops=[text])],
            swaps=[],
            kernel_choices=[],
        )
        for text in FORMULA_CELLS
    ]
    rows = list(csv.DictReader(io.StringIO(fusions_csv(replace(diff, candidates=cands)))))
    assert len(rows) == len(FORMULA_CELLS)
    for text, row in zip(FORMULA_CELLS, rows, strict=True):
        flat = " ".join(text.split())  # the report puts every cell on one line
        want = "'" + flat if _runnable(flat) else flat
        for col in ("candidate", "kind", "fused_kernel", "replaces", "ops"):
            assert row[col] == want, (col, text)
            assert not _runnable(row[col]), (col, text)
        saved = row["time_saved_us_per_step"]
        assert saved.startswith("-") and float(saved) == pytest.approx(slower.time_saved_us_per_step), saved
    assert _assert_csv_inert(fusions_csv(replace(diff, candidates=cands))) > 0


def test_kernels_csv_neutralises_every_formula_start():
    """The Kernels page's CSV export (kernels_table.csv_bytes) with every formula start as run label, kernel and op
    name: each cell is quoted, verbatim; negative numbers stay numbers, also in a column of Python objects."""
    import pandas as pd

    from analyzer.cells import spreadsheet_safe
    from analyzer.figures import kernels_table as kt
    from analyzer.fmt import safe_text

    real = runs(False)[0].kernels
    n = len(FORMULA_CELLS)
    kernels = real.iloc[[i % len(real) for i in range(n)]].reset_index(drop=True)  # real rows, one per payload
    kernels["name"] = list(FORMULA_CELLS)
    kernels["op_name"] = list(reversed(FORMULA_CELLS))
    kernels["achieved_gbps"] = -3.5  # a float column
    # a column of Python objects: csv_bytes maps it through the helper, its numbers must come out as numbers
    kernels["bytes_per_call"] = pd.Series([-2.25 if i % 2 else None for i in range(n)], dtype=object)
    kernels.loc[0, "shapes"] = "[1]\r=cmd|' /C calc'!A0"  # a CR inside a cell must not start a row a spreadsheet reads
    view = kt.kernels_view([(label, kernels.iloc[[i]]) for i, label in enumerate(FORMULA_CELLS)])
    rows = list(csv.DictReader(io.StringIO(kt.csv_bytes(view).decode("utf-8-sig"))))
    assert len(rows) == len(FORMULA_CELLS)
    # cells go through fmt.safe_text first (one line, no control character), then spreadsheet_safe
    want = sorted(spreadsheet_safe(safe_text(t)) for t in FORMULA_CELLS)
    assert sorted(r["kernel"] for r in rows) == want
    assert sorted(r["op"] for r in rows) == want
    assert sorted(r["run"] for r in rows) == want
    for r in rows:
        assert r["GB/s (est.)"] == "-3.5"
        assert r["bytes/call (est.)"] in ("-2.25", "")
    assert {r["bytes/call (est.)"] for r in rows} == {"-2.25", ""}
    assert "[1] =cmd|' /C calc'!A0" in {r["shapes"] for r in rows}  # the CR is a space: one cell, never a new row
    assert _assert_csv_inert(kt.csv_bytes(view).decode("utf-8-sig")) > 0


def test_fusions_csv_neutralises_formulas():
    from analyzer.report import fusions_csv

    text = fusions_csv(runs(True)[2])
    assert _assert_csv_inert(text) > 0
    assert "'=cmd|' /C calc'!A0" in text, "the formula-leading label must be kept, neutralised"
    assert any(
        c.startswith("'-2+3+cmd") or c.startswith("'+cmd") or c.startswith("'@SUM")
        for r in csv.reader(io.StringIO(text))
        for c in r
    )


def test_kernels_csv_neutralises_formulas():
    from analyzer.figures import kernels_table as kt

    base, cand, _ = runs(True)
    view = kt.kernels_view([(LABELS[0], base.kernels), (LABELS[1], cand.kernels)])
    text = kt.csv_bytes(view).decode("utf-8-sig")
    assert _assert_csv_inert(text) > 0
    assert "'=cmd|' /C calc'!A0" in text and "'@SUM(1+1)" in text


def test_ranks_text_output_keeps_hostile_file_names_on_one_line(tmp_path):
    """Folder names can hold line breaks and terminal escapes (zip members with them are refused outright)."""
    import shutil

    from analyzer.ranks import analyze_ranks
    from analyzer.ranks.cli import render_text

    d = tmp_path / "set"
    d.mkdir()
    hostile = "rank0\x1b[2J\nFAKE rank 9 OK.json.gz"
    shutil.copy(ROOT / "tests/data/ranks/hta_trace_filter/sampled_rank-0.json.gz", d / hostile)
    text = render_text(analyze_ranks(d, workers=1).to_json())
    assert "\x1b" not in text and not any(line.startswith("FAKE") for line in text.splitlines())
    assert "rank0 FAKE rank 9 OK.json.gz" in text  # the escape sequence gone whole (fmt.safe_text), not only ESC
