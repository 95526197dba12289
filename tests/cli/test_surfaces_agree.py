"""One figure, every surface: each kernel's bytes and GB/s read the same in `summary --json`, `diff --json`,
the report (HTML and Markdown), the CSV exports and the dashboard pages.

The Summary's kernel table (KERNEL_SUMMARY, what `summary --json` prints) is the reference; every other surface that
shows a kernel's bytes per call or achieved GB/s must show the same number (exactly in data, the same text where it
is formatted). Before the one byte model, the compile gelu_mul kernel read 100.7 MB / 2,700 GB/s in summary and
151 MB / 4,050 GB/s on Compare.

Fast tier: the bundled recordings (sample_traces/, every eager → candidate pair) and the dashboard on its bundled
HF set. Slow tier: every trace in tests/data/ (summary and kernels CSV) and its natural pairs (diff, report, CSV).
"""

from __future__ import annotations

import csv
import html as html_lib
import io
import json
import math
import re
from pathlib import Path

import pytest

from analyzer import diff_runs, load_trace, summarize
from analyzer.figures.kernels_table import csv_bytes, kernels_view
from analyzer.fmt import fmt_bytes, fmt_num, short_name
from analyzer.report import fusions_csv, md_escape, report_html, report_markdown
from tests.conftest import DATA, SAMPLE_TRACES, TRACES, loaded_trace

SAMPLE_PAIRS = [
    (d / "eager.json.gz", c)
    for d in sorted(p for p in SAMPLE_TRACES.iterdir() if (p / "eager.json.gz").is_file())
    for c in sorted(d.glob("*.json.gz"))
    if c.name != "eager.json.gz"
]
DATA_PAIRS = [
    (TRACES["hta_diff_control"], TRACES["hta_diff_test"]),
    (TRACES["legacy_resnet"], TRACES["legacy_resnet_w4"]),
    (TRACES["hta_filter_rank0"], TRACES["hta_filter_rank1"]),
    (TRACES["h100_bert"], TRACES["mi300_bert"]),
    (TRACES["h100_qwen"], TRACES["mi300_qwen"]),
    (TRACES["h100_bert"], TRACES["mi300_triton"]),
    (DATA / "cuda_graph_h100_round0" / "eager.json.gz", DATA / "cuda_graph_h100_round0" / "compile.json.gz"),
    (DATA / "cuda_graph_h100_round0" / "eager.json.gz", DATA / "cuda_graph_h100_round0" / "graph.json.gz"),
]
EVERY_DATA_TRACE = sorted(
    p
    for p in DATA.rglob("*.json*")
    if p.name.endswith((".json", ".json.gz"))
    and p.name not in ("manifest.json",)
    and "broken" not in p.parts
    and "tracelens_reference" not in p.parts
    and not p.name.endswith((".ncu.json", "_expected.json"))
)


def _same(a, b) -> bool:
    """Equal numbers, or both unknown (None / NaN): unknown must stay unknown on every surface, never 0."""
    a_unknown = a is None or (isinstance(a, float) and math.isnan(a))
    b_unknown = b is None or (isinstance(b, float) and math.isnan(b))
    if a_unknown or b_unknown:
        return a_unknown and b_unknown
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def _reference(summary) -> dict[str, dict]:
    """{kernel name: {'bytes', 'gbps'}} from `summary --json`, for names whose rows agree on both (a name launched
    with several shapes has one row per shape: those are checked row by row in the CSV, not by name)."""
    out: dict[str, dict] = {}
    ambiguous = set()
    for k in summary.to_json()["kernels"]:
        ref = {"bytes": k["bytes_per_call"], "gbps": k["achieved_gbps"], "count": k["count_per_step"]}
        if k["name"] in out and (out[k["name"]]["bytes"], out[k["name"]]["gbps"]) != (ref["bytes"], ref["gbps"]):
            ambiguous.add(k["name"])
        out.setdefault(k["name"], ref)
    return {n: v for n, v in out.items() if n not in ambiguous}


def _check_summary_vs_kernels_csv(summary, label: str) -> int:
    """Row by row: the kernels CSV (Kernels page export) carries the summary's bytes/call and GB/s."""
    j = summary.to_json()["kernels"]
    rows = list(csv.DictReader(io.StringIO(csv_bytes(kernels_view([(label, summary.kernels)])).decode("utf-8-sig"))))
    assert len(rows) == len(j)

    def order(t):
        return tuple((v is None, v or 0.0) for v in t)

    want = sorted(((k["bytes_per_call"], k["achieved_gbps"]) for k in j), key=order)
    got = sorted(
        (
            (
                float(r["bytes/call (est.)"]) if r["bytes/call (est.)"] else None,
                float(r["GB/s (est.)"]) if r["GB/s (est.)"] else None,
            )
            for r in rows
        ),
        key=order,
    )
    for (wb, wg), (gb, gg) in zip(want, got, strict=True):
        assert _same(wb, gb) and _same(wg, gg), (label, (wb, wg), (gb, gg))
    return len(rows)


def _md_table(md: str, header_cell: str) -> list[list[str]]:
    lines = md.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.startswith("|") and header_cell in line:
            head = [c.strip() for c in line.strip("|").split("|")]
            col = head.index(header_cell)
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip("|"))]
                out.append([cells[0], cells[col]])
    return out


def _check_pair(base_path: Path, cand_path: Path) -> int:
    """diff --json rows, the Markdown and HTML reports and the fusion-groups CSV against the two summaries."""
    base, cand = summarize(load_trace(base_path)), summarize(load_trace(cand_path))
    d = diff_runs(base, [cand], labels=["base", "cand"])
    ref_b, ref_c = _reference(base), _reference(cand)
    j = d.to_json()
    checked = 0
    md = report_markdown(d)
    md_rows = _md_table(md, "achieved GB/s (est.)")
    html = report_html(d)
    for kind in ("fusions", "swaps", "kernel_choices"):
        for row in j[kind]:
            n = row["count_per_step"]
            fused = row["fused_kernel"]
            if fused in ref_c and " + " not in fused:
                r = ref_c[fused]
                assert _same(row["candidate_bytes_per_step"], None if r["bytes"] is None else r["bytes"] * n), (
                    cand_path,
                    fused,
                    row["candidate_bytes_per_step"],
                    r["bytes"],
                )
                assert _same(row["candidate_gbps"], r["gbps"]), (cand_path, fused, row["candidate_gbps"], r["gbps"])
                checked += 1
                if kind == "fusions":
                    shown = fmt_num(r["gbps"], ",.0f", missing="unknown")
                    want = md_escape(short_name(fused, 70))
                    cells = [
                        c
                        for name, c in md_rows
                        if want in (re.split(r" \(\d+ per step\)", x)[0] for x in name.split("<br>"))
                    ]
                    # long names can shorten alike: the row is one of the cells that name shows
                    assert any(c.endswith("→ " + shown) for c in cells), (fused, cells, shown)
                    assert f"→ {shown}" in html
            if len(row["replaces"]) == 1 and row["replaces"][0] in ref_b:
                r = ref_b[row["replaces"][0]]
                if not row.get("also_removed"):
                    assert _same(row["base_bytes_per_step"], None if r["bytes"] is None else r["bytes"] * n)
                    checked += 1
    # the fusion-groups CSV: the same groups and bytes avoided as the JSON
    rows = list(csv.DictReader(io.StringIO(fusions_csv(d))))
    json_rows = j["fusions"] + j["swaps"] + j["kernel_choices"]
    assert len(rows) == len(json_rows)
    for r, jr in zip(rows, json_rows, strict=True):
        assert _same(
            float(r["bytes_avoided_per_step"]) if r["bytes_avoided_per_step"] else None, jr["bytes_avoided_per_step"]
        )
    checked += _check_summary_vs_kernels_csv(base, "base") + _check_summary_vs_kernels_csv(cand, "cand")
    return checked


@pytest.mark.parametrize("pair", SAMPLE_PAIRS, ids=lambda p: f"{p[1].parent.name}-{p[1].name.split('.')[0]}")
def test_sample_pairs_agree_on_every_surface(pair):
    assert _check_pair(*pair) > 0


@pytest.mark.slow
@pytest.mark.parametrize("pair", DATA_PAIRS, ids=lambda p: f"{p[0].stem.split('.')[0]}-{p[1].stem.split('.')[0]}")
def test_data_pairs_agree_on_every_surface(pair):
    assert _check_pair(*pair) > 0


@pytest.mark.slow
def test_every_data_trace_summary_and_kernels_csv_agree():
    assert len(EVERY_DATA_TRACE) >= 25
    for p in EVERY_DATA_TRACE:
        try:
            s = summarize(loaded_trace(p))
        except Exception as err:  # a trace the analyzer refuses (one line) has no kernel figures to compare
            from analyzer.errors import FuseLensError

            assert isinstance(err, FuseLensError), (p, err)
            continue
        _check_summary_vs_kernels_csv(s, p.name)


@pytest.mark.needs_data(SAMPLE_TRACES / "hf_geglu_bf16" / "manifest.json")
def test_dashboard_pages_agree_with_summary():
    """The bundled HF set as the dashboard opens it: the Kernels table, the Compare fusion cards, the Roofline and
    Timeline hovers show each kernel's bytes/call and GB/s as `summary --json` of the same file does."""
    from tests.support import app_support as s

    at = s.app("kernels")
    runs = s.runs(at)
    refs = {}
    for run in runs:
        fresh = summarize(load_trace(s.HF / run.file_name))  # what `summary --json` prints for that file
        assert [(k["bytes_per_call"], k["achieved_gbps"]) for k in fresh.to_json()["kernels"]] == [
            (k["bytes_per_call"], k["achieved_gbps"]) for k in run.summary.to_json()["kernels"]
        ]
        refs[run.label] = _reference(fresh)
    checked = 0
    from app_core.ui import cell  # the page shows figures as text ("—" when unknown), formatted by ui.cell

    for _, row in at.dataframe[0].value.iterrows():
        ref = refs[row["run"]].get(row["full name"])
        if ref is not None:
            assert row["bytes/call (est.)"] == cell(ref["bytes"], "{:.3e}"), row.to_dict()
            assert row["GB/s (est.)"] == cell(ref["gbps"], "{:,.0f}"), row.to_dict()
            checked += 1
    assert checked >= 12

    # Compare: each fusion card's "achieved GB/s (est.)" ends with its fused kernel's summary GB/s
    d = diff_runs(runs[0].summary, [r.summary for r in runs[1:]], labels=[r.label for r in runs])
    fused = {
        f"{refs[cd.label][f.fused_kernel]['gbps']:,.0f}"
        for cd in d.candidates
        for f in cd.fusions
        if f.fused_kernel in refs[cd.label] and refs[cd.label][f.fused_kernel]["gbps"] is not None
    }
    s.goto(at, "compare")
    shown = [s.plain(m.value) for m in at.metric if s.plain(m.label) == "achieved GB/s (est.)"]
    assert shown, "no fusion card on Compare"
    for v in shown:
        assert v.split("→")[-1].strip() in fused, (v, fused)

    # Roofline hover: every plotted kernel's GB/s is its summary GB/s
    s.goto(at, "roofline")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    plotted = 0
    for trace in spec["data"]:
        for text in trace.get("hovertext") or []:
            lines = html_lib.unescape(text).split("<br>")
            name = re.sub(r"</?b>", "", lines[0])
            run = lines[1].removeprefix("run ")
            ref = refs.get(run, {}).get(name)
            if ref is None:
                continue
            gbps = re.search(r"· ([\d,]+) GB/s", text).group(1)
            assert gbps == f"{ref['gbps']:,.0f}", (run, name, gbps, ref)
            plotted += 1
    assert plotted >= 4

    # Timeline hover: each kernel's bytes per call, as the summary states them
    s.goto(at, "timeline")
    spec = " ".join(c.proto.spec for c in at.get("plotly_chart"))
    base = runs[0]
    for name, r in refs[base.label].items():
        if r["bytes"] is not None:
            assert f"bytes {fmt_bytes(r['bytes'])} (estimate)" in spec, name


@pytest.mark.needs_data(SAMPLE_TRACES / "hf_geglu_bf16" / "manifest.json")
def test_headline_reads_the_same_on_every_surface():
    """The one change to quote (analyzer.diff.headline) of every candidate of the bundled HF set as the dashboard
    opens it: Compare's headline card and its Markdown copy, the report's first lines (HTML and Markdown), the CLI's
    first lines and `diff --json` show the same figure, basis and verdict."""
    import subprocess
    import sys

    from analyzer.diff.headline import BASIS_TEXT, headline_text
    from analyzer.fmt import fmt_pct
    from tests.support import app_support as s

    at = s.app("compare")
    d = next(iter(at.session_state["fl_diffs"].values()))
    files = {r.label: s.HF / r.file_name for r in s.runs(at)}
    labels = [d.base.label, *(cd.label for cd in d.candidates)]
    args = [sys.executable, "-m", "analyzer", "diff", *(str(files[x]) for x in labels), "--labels", ",".join(labels)]
    cli = subprocess.run(args, capture_output=True, text=True, check=True, cwd=s.ROOT).stdout.splitlines()
    doc = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True, check=True, cwd=s.ROOT).stdout)
    md = report_markdown(d).splitlines()
    page = report_html(d)
    n = len(d.candidates)
    assert n >= 3
    for i, cd in enumerate(d.candidates):
        q = cd.quote()
        want = headline_text(q, cd.label, cd.base_label)
        # diff --json: the same object (the app's Diff and the CLI's come from the same files)
        jq = next(c for c in doc["candidates"] if c["label"] == cd.label)["headline"]
        assert (jq["basis"], jq["verdict"]) == (q["basis"], q["verdict"]) and jq["reason"] == q["reason"]
        assert jq["change_pct"] == pytest.approx(q["change_pct"], rel=1e-12)
        assert headline_text(jq, cd.label, cd.base_label) == want
        # the CLI's first lines, one per candidate, before anything else
        assert cli[i] == f"headline: {want}"
        # the report leads with it: the lines right under the title
        assert md[2 + 2 * i] == f"**{md_escape('Headline: ' + want)}**"
        assert f'<p class="lead"><strong>{html_lib.escape("Headline: " + want)}</strong></p>' in page
        assert page.index(html_lib.escape("Headline: " + want)) < page.index('class="badge')
        # Compare: the headline card of the candidate shown, and its Markdown copy's first line
        at.selectbox(key="fl_compare_candidate").set_value(cd.label).run()
        m = s.metric_values(at)
        assert m[f"Headline · {BASIS_TEXT[q['basis']]}"] == (f"{fmt_pct(q['change_pct'])} per step", q["verdict"])
        assert any(want in s.plain(x) for x in s.texts(at, "markdown")), want
        codes = [c.value for c in at.code if c.value.startswith("**Headline: ")]
        assert codes and codes[0].splitlines()[0] == f"**Headline: {want}**"
    assert not cli[n].startswith("headline: ") and cli[n].startswith("baseline ")
