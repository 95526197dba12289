"""analyzer.report and analyzer.figures (theme, compare) on real diffs: offline HTML, Markdown, CSV, and names that
try to inject HTML/JS, Markdown or spreadsheet formulas."""

from __future__ import annotations

import copy
import csv
import io
import re
from dataclasses import replace

import pytest

from analyzer.cells import spreadsheet_safe
from analyzer.diff import diff_runs
from analyzer.figures.compare import category_time_figure, fusion_groups_figure, time_breakdown_figure
from analyzer.figures.theme import CATEGORY_COLORS, chart_title, label, short_name
from analyzer.report import fusions_csv, md_escape, report_html, report_markdown
from analyzer.summary import summarize
from tests.analyzer.test_diff import sample_summary, summary_of
from tests.conftest import SAMPLE_TRACES, TRACES, loaded_trace, require_data

SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
MD_BREAKER = "a|b*c_d`e`[x](javascript:alert(3))"
FORMULA = '=HYPERLINK("http://evil","x")|cmd'


@pytest.fixture(scope="module")
def hf4():
    base = sample_summary("hf_geglu_bf16", "eager")
    return diff_runs(base, [sample_summary("hf_geglu_bf16", v) for v in ("compile", "liger", "fuselens")])


def _hostile_summary(case: str, variant: str, renames: dict[str, str], op_renames: dict[str, str] | None = None):
    """A real recorded trace whose kernel / op names were replaced by hostile strings (the input, not the code under
    test, is changed)."""
    path = SAMPLE_TRACES / case / f"{variant}.json.gz"
    require_data(path)
    trace = copy.copy(loaded_trace(path))
    g = trace.gpu_ops.copy()
    g["name"] = g["name"].map(lambda n: next((v for k, v in renames.items() if k in n), n))
    if op_renames:
        g["op_name"] = g["op_name"].map(lambda n: op_renames.get(n, n))
    trace.gpu_ops = g
    return summarize(trace)


@pytest.fixture(scope="module")
def hostile():
    base = _hostile_summary("hf_geglu_bf16", "eager", {"GeluCUDAKernelImpl": IMG, "MulFunctor": MD_BREAKER})
    cand = _hostile_summary(
        "hf_geglu_bf16",
        "compile",
        {"triton_poi_fused__unsafe_view_gelu_mul_0": SCRIPT + FORMULA},
    )
    return diff_runs(base, [cand], labels=["eager <b>base</b>", "compile|*x*"])


def test_html_is_self_contained_and_offline(hf4):
    doc = report_html(hf4)
    assert doc.startswith("<!DOCTYPE html>")
    scripts = re.findall(r"<script\b[^>]*>", doc, flags=re.I)
    assert scripts, "the charts need plotly.js"
    assert not [s for s in scripts if "src=" in s.lower()], "no script may load from anywhere"
    assert not re.search(r"""<link[^>]+href=["']?https?://""", doc, flags=re.I)
    assert doc.count("Plotly.newPlot") >= 1 + 2 * len(hf4.candidates)  # categories + per candidate fusion + waterfall
    # plotly.js is inlined exactly once (~4.6 MB), not per chart
    assert doc.count("plotly.js v") <= 2 and len(doc) < 6_000_000


def test_html_headline_and_sections(hf4):
    doc = report_html(hf4)
    assert "kernels per step: 5 → 4" in doc and "kernels per step: 5 → 2" in doc
    assert "HBM traffic avoided per step: 100.7 MB" in doc and "100,663,296 B, estimate" in doc
    assert "302.0 MB" in doc and "301,989,888" in doc
    for section in (
        "Side by side",
        "GPU time per step by category",
        "Fusion groups",
        "Matched GEMMs",
        "Unmatched kernels",
        "What is left",
        "What every number rests on",
    ):
        assert section in doc
    assert "2.11.0+cu130" in doc  # PyTorch version from the runner's manifest
    assert "NVIDIA H100 80GB HBM3" in doc
    assert "[64×128×3072] bf16 = 50,331,648 B" in doc
    assert "estimate" in doc and "Nsight Compute" in doc


def test_markdown_report(hf4):
    md = report_markdown(hf4)
    assert md.startswith("# FuseLens fusion diff: compile, liger, fuselens vs eager")
    assert "- kernels per step: 5 → 4" in md
    assert "HBM traffic avoided per step: 100.7 MB logical, ≈" in md and "logical: 100,663,296 B, estimate" in md
    assert "```text" in md  # per-category bars as text
    # every table row has as many cells as its header (escaped pipes do not split cells)
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            n = _cells(lines[i - 1])
            j = i + 1
            while j < len(lines) and lines[j].startswith("| "):
                assert _cells(lines[j]) == n, lines[j]
                j += 1


def _cells(row: str) -> int:
    return len(re.split(r"(?<!\\)\|", row)) - 2


def test_plain_mlp_report_says_what_an_epilogue_would_avoid():
    base = sample_summary("plain_8192tok_bf16", "eager")
    d = diff_runs(base, [sample_summary("plain_8192tok_bf16", "compile")])
    md = report_markdown(d)
    assert "HBM traffic avoided per step: 0 B" in md
    assert "a GEMM-epilogue fusion would avoid 100.7 MB per step more" in md
    assert "No fusion: compile replaces no group of baseline kernels by one kernel." in md


def test_hostile_names_are_inert_in_html(hostile):
    cd = hostile.candidates[0]
    assert cd.fusions and cd.fusions[0].fused_kernel == SCRIPT + FORMULA  # the name survived into the Diff
    doc = report_html(hostile)
    assert SCRIPT not in doc and "<script>alert" not in doc
    assert "<img src=x" not in doc and 'onerror="alert' not in doc
    assert "<b>base</b>" not in doc
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in doc  # shown, as text
    assert "eager &lt;b&gt;base&lt;/b&gt;" in doc


def test_hostile_names_are_inert_in_markdown(hostile):
    md = report_markdown(hostile)
    assert "<script" not in md and "<img" not in md and "<b>" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert not re.search(r"(?<!\\)\]\(javascript:", md)  # '[x](javascript:…)' is no live link: ']' is escaped
    assert "a\\|b\\*c\\_d\\`e\\`\\[x\\]" in md
    assert md_escape("**bold** `code` # h | p") == "\\*\\*bold\\*\\* \\`code\\` \\# h \\| p"


def test_csv_neutralises_formulas(hostile):
    rows = list(csv.reader(io.StringIO(fusions_csv(hostile))))
    assert rows[0][:3] == ["candidate", "kind", "fused_kernel"]
    fused = [r[2] for r in rows[1:]]
    assert fused == ["'" + SCRIPT + FORMULA] or all(not c.startswith(("=", "+", "-", "@")) for c in fused)
    for r in rows[1:]:
        for cell in r:
            assert not cell.lstrip().startswith(FORMULA_START) or _is_number(cell)
    ok = spreadsheet_safe
    assert ok("=1+1") == "'=1+1" and ok("@SUM(A1)") == "'@SUM(A1)" and ok("+1") == "'+1"
    assert ok("-2+3") == "'-2+3" and ok("gelu") == "gelu"
    assert ok("\uff1d1+1") == "'\uff1d1+1" and ok("\uff0b1") == "'\uff0b1" and ok("\uff0d1") == "'\uff0d1"
    assert ok("\uff20SUM(A1)") == "'\uff20SUM(A1)" and ok(" =1") == "' =1" and ok("\t=1") == "'\t=1"
    assert ok(-3.5) == -3.5 and isinstance(ok(-3.5), float)


FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # ASCII and full-width ＝ ＋ － ＠


@pytest.mark.parametrize(
    "label", ["=1+1", "+1", "-1+1", "@SUM(A1)", "\uff1d1+1", "\uff0b1", "\uff0d1", "\uff20SUM(A1)"]
)
def test_csv_neutralises_ascii_and_full_width_labels(hf4, label):
    """The CSV download of a real diff whose candidates are labelled with a formula start (ASCII or full-width ＝ ＋
    － ＠, bare or behind whitespace): the label cell is quoted, the time and byte columns stay numbers."""
    cands = [replace(cd, label=lead + label) for cd, lead in zip(hf4.candidates, ("", " ", "\t"), strict=False)]
    rows = list(csv.DictReader(io.StringIO(fusions_csv(replace(hf4, candidates=cands)))))
    assert rows and {r["candidate"] for r in rows} == {"'" + label}  # leading whitespace is trimmed, the label quoted
    numbers = [r[c] for r in rows for c in r if c.endswith("_per_step") and r[c]]
    assert numbers and all(_is_number(x) for x in numbers)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def test_theme_title_and_labels():
    t = chart_title("GPU time", gpu="NVIDIA H100 80GB HBM3", workload="GEGLU MLP", shapes="64×128 tokens", dtype="bf16")
    assert t["text"] == "GPU time"
    assert t["subtitle"]["text"] == "NVIDIA H100 80GB HBM3 · GEGLU MLP · 64×128 tokens · bf16"
    assert "<" not in chart_title(SCRIPT, gpu=IMG)["subtitle"]["text"]
    assert label(SCRIPT).count("<") == 0
    assert short_name("void at::native::vectorized_elementwise_kernel<4, at::native::Foo<float> >(int, float*)") == (
        "at::native::vectorized_elementwise_kernel<…>"
    )
    assert short_name("Memset (Device)") == "Memset (Device)"


def test_figures_of_a_real_diff(hf4):
    fig = category_time_figure(hf4)
    names = [t.name for t in fig.data]
    assert names[-1] == "idle (gaps)" and "gemm" in names and "pointwise" in names
    gemm = next(t for t in fig.data if t.name == "gemm")
    assert list(gemm.y) == hf4.labels and gemm.marker.color == CATEGORY_COLORS["gemm"]
    assert "NVIDIA H100 80GB HBM3" in fig.layout.title.subtitle.text and "bf16" in fig.layout.title.subtitle.text
    fg = fusion_groups_figure(hf4, "fuselens")
    assert len(fg.data) == 4  # time and bytes, baseline and candidate
    fl = hf4.candidate("fuselens").fusions[0]
    assert fg.data[0].x[0] == pytest.approx(fl.base_time_us_per_step)
    assert fg.data[1].x[0] == pytest.approx(fl.candidate_time_us_per_step)
    bars = [t for t in fg.data if t.xaxis == "x2"]
    base_bytes, cand_bytes = bars[0].x[0], bars[1].x[0]
    # the candidate bar is the fused kernel's own estimate, the figure summary shows for it (one byte model per
    # kernel): fuselens_dual_gemm_glu_kernel x + w_gate + w_up + out = 72,351,744 B; the baseline bar is the four
    # replaced kernels' (2 GEMMs 67,633,152 each, GELU 100,663,296, mul 150,994,944)
    assert cand_bytes == 72_351_744
    assert base_bytes == 2 * 67_633_152 + 100_663_296 + 150_994_944
    assert fl.bytes_avoided_per_step == 301_989_888  # the data-flow figure: 3 intermediates' round trips
    wf = time_breakdown_figure(hf4, "compile")
    assert wf.data[0].y[0] == pytest.approx(hf4.candidates[0].time_breakdown["base_kernel_time_us"])


def test_figures_escape_hostile_names(hostile):
    fg = fusion_groups_figure(hostile)
    blob = fg.to_json()
    assert "<script" not in blob and "<img" not in blob
    assert "<b>" not in category_time_figure(hostile).to_json()


def test_report_of_a_public_pair_without_manifest():
    """Kineto ResNet-50 pair (legacy schema, V100, no manifest): facts come from the trace alone."""
    d = diff_runs(
        summary_of(str(TRACES["legacy_resnet"])), [summary_of(str(TRACES["legacy_resnet_w4"]))], labels=["w0", "w4"]
    )
    md = report_markdown(d)
    assert "Tesla V100-DGXS-32GB" in md
    assert "No fusion" in md and "HBM traffic avoided per step: 0 B" in md
    assert "No hardware counters were recorded for these runs" in md
    assert "| PyTorch |" not in md  # unknown for every run: the row is left out rather than filled with guesses


def _svg_text(svg: str, cls: str) -> dict:
    m = re.search(rf'<text[^>]*class="{cls}"[^>]*\by="([\d.]+)"[^>]*font-size: ([\d.]+)px', svg)
    assert m, cls
    return {"y": float(m.group(1)), "size": float(m.group(2))}


@pytest.mark.parametrize("width", [700, 1000])
def test_waterfall_axis_title_stays_below_the_subtitle(hf4, width):
    """Page width (the report's and the app's column): the y-axis title is drawn rotated and centred on the plot, so
    its half-length must fit between the plot's middle and the subtitle. It once read 'kernel time per step (µs;
    axis from 190)': ~400 px of 18 px text in a 460 px chart, running into the subtitle. Measured on the rendered
    SVG; a glyph is taken as 0.6 em wide (Helvetica/Arial average ~0.5)."""
    pytest.importorskip("kaleido")
    wf = time_breakdown_figure(hf4, "compile")
    svg = wf.to_image(format="svg", width=width, height=wf.layout.height).decode()
    ytitle = _svg_text(svg, "ytitle")
    sub = _svg_text(svg, "gtitle-subtitle")
    lines = [re.sub(r"<[^>]+>", "", x) for x in wf.layout.yaxis.title.text.split("<br>")]
    half = 0.6 * ytitle["size"] * max(len(x) for x in lines) / 2
    assert ytitle["y"] - half > sub["y"] + 1.5 * sub["size"], (lines, ytitle, sub)
    assert wf.layout.yaxis.range[0] == 0  # from 0: a 5 % saving must not look like half the bar
    assert wf.layout.xaxis.tickangle == 0  # upright tick labels of at most three short lines: nothing cut off
    assert all(len(part) <= 16 for x in wf.data[0].x for part in x.split("<br>"))


def test_waterfall_run_labels_are_wrapped_not_cut(hf4):
    """Long run labels ('geglu_compile_bf16_autotuned') are shown whole, over up to three lines."""
    import dataclasses

    cd = hf4.candidate("compile")
    long_cd = dataclasses.replace(cd, label="geglu_compile_bf16_autotuned", base_label="geglu_eager_bf16")

    class D:
        candidates = [long_cd]
        runs = hf4.runs

        def candidate(self, label=None):
            return long_cd

    wf = time_breakdown_figure(D(), "geglu_compile_bf16_autotuned")
    x = list(wf.data[0].x)
    assert x[0].replace("<br>", "") == "geglu_eager_bf16"
    assert x[-1].replace("<br>", "") == "geglu_compile_bf16_autotuned"
    assert "…" not in x[0] + x[-1]
