"""Injection (issue 6 item 4): hostile kernel, op, file and run names are inert in every analyzer output.

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

ROOT = Path(__file__).resolve().parents[1]
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
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


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
    assert len(diff.candidates[0].fusions) >= 1  # fusion rows (with hostile names) exist for the CSV / tables


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
            assert not cell.startswith(CSV_FORMULA_START), f"CSV cell a spreadsheet would evaluate: {cell[:80]!r}"
            checked += 1
    return checked


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
    from analyzer.ranks_cli import render_text

    d = tmp_path / "set"
    d.mkdir()
    hostile = "rank0\x1b[2J\nFAKE rank 9 OK.json.gz"
    shutil.copy(ROOT / "tests/data/ranks/hta_trace_filter/sampled_rank-0.json.gz", d / hostile)
    text = render_text(analyze_ranks(d, workers=1).to_json())
    assert "\x1b" not in text and not any(line.startswith("FAKE") for line in text.splitlines())
    assert "rank0?[2J FAKE rank 9 OK.json.gz" in text
