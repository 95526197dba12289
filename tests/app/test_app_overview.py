"""Overview page (AppTest): the app opens on the bundled HF GEGLU case, already compared."""

from __future__ import annotations

import pytest

from tests.support import app_support as s

pytestmark = pytest.mark.needs_data(s.HF / "manifest.json")


@pytest.fixture(scope="module")
def at():
    return s.app()


def test_opens_on_the_hf_case_with_eager_as_baseline(at):
    assert s.labels(at) == ["eager", "compile", "liger", "fuselens"]
    assert at.session_state["fl_runs"][at.session_state["fl_baseline"]].label == "eager"
    assert not at.error, s.texts(at, "error")
    # the first screen says what it shows and where the user's own traces go
    demo = [t for t in s.texts(at, "info") if "Bundled demo data" in t]
    assert demo and "H100" in demo[0] and "uploader in the sidebar" in demo[0]


def _num(text: str) -> float:
    return float(str(text).replace(",", ""))


def test_per_run_table_has_gpu_torch_steps_kernels(at):
    df = at.dataframe[0].value.set_index("measure").T  # one column per run on the page; one row per run here
    assert list(df.index) == ["eager", "compile", "liger", "fuselens"]
    assert df.loc["eager", "kernels/step"] == "5"  # 3 GEMMs + gelu + mul (the HF post's eager forward)
    assert df.loc["compile", "kernels/step"] == "4"  # gelu and mul fused into one Triton kernel
    assert list(df["role"]) == ["baseline", "candidate", "candidate", "candidate"]
    # one GPU and one PyTorch for every run: said once in the caption, not repeated in columns
    assert "GPU" not in df.columns and "PyTorch" not in df.columns
    cap = " ".join(s.texts(at, "caption"))
    assert "NVIDIA H100 80GB HBM3" in cap and "PyTorch 2." in cap  # from the runner's manifest
    assert df.loc["eager", "steps"].startswith("15 of 16")  # 16 profiled steps (interleaved runner), first dropped
    for col in ("GPU µs/step", "launch µs"):
        assert all(_num(v) > 0 for v in df[col]), col
    # busy, span and idle: the median, then the spread over the steady steps, as the CLI shows them
    for r in s.runs(at):
        ps = r.summary.per_step
        for col, key in (("GPU busy µs", "gpu_busy_us"), ("span µs", "span_us"), ("idle µs", "idle_us")):
            lo, hi = ps["spread"][key]
            assert df.loc[r.label, col] == f"{ps[key]:,.1f} ({lo:,.1f}–{hi:,.1f})", (col, df.loc[r.label, col])
    assert all(_num(v) > 100 for v in df["CUDA-event µs"])
    assert not any(r.endswith(" ⚠") for r in df.index)  # no run in doubt


def test_headline_is_already_the_fusion_diff(at):
    m = s.metric_values(at)
    assert m["Kernels per step"][0] == "5 → 4"
    value, delta = m["HBM bytes avoided per step"]
    assert delta == "100,663,296 B (estimate)"  # 8192×3072 bf16 written once and read once: 2 × 50,331,648 B
    assert value == "100.7 MB"
    assert m["GPU time per step (as recorded)"][0].endswith("µs")


def test_category_chart_and_exports(at):
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    labels = [b.label for b in at.download_button]
    assert "PNG" in labels and "SVG" in labels


def test_empty_session_explains_what_to_do():
    at = s.app()
    for r in list(s.runs(at)):
        at.sidebar.button(key=f"fl_rm_{r.key}").click().run()
    assert s.runs(at) == []
    assert any("Upload" in t for t in s.texts(at, "info"))
    assert not at.exception


def test_the_step_span_is_marked_where_overlapping_streams_pass_it():
    """HTA's A100 control sample runs ops on several streams at once: 87,620 µs of op time and 10,198 µs idle in a
    76,422 µs step, so its stacked bar runs past the step. Each bar carries the step's span as a marker, and the axis
    title says why a bar can pass it."""
    from analyzer import summarize
    from analyzer.figures.overview import category_figure
    from analyzer.pipeline import load_trace
    from tests.conftest import TRACES

    ps = summarize(load_trace(TRACES["hta_diff_control"])).per_step
    fig = category_figure([("control", ps)])
    span = next(t for t in fig.data if t.name == "step span")
    assert span.x[0] == pytest.approx(ps["span_us"])
    bars = sum(t.x[0] for t in fig.data if t.type == "bar")
    assert bars > span.x[0]  # op time + idle past the span: overlapping streams
    assert "overlapping streams can pass the span" in fig.layout.xaxis.title.text


def test_idle_that_dwarfs_the_gpu_time_is_named_not_drawn():
    """TraceLens's MI300X normalization sample: 1.0 ms of GPU work in a 1,068.8 ms step. Drawn, the idle segment left
    the categories as slivers and the chart looked empty; it is named beside the bar instead, and the step-span
    marker (as long as the idle) is left out for that run."""
    from analyzer import summarize
    from analyzer.figures.overview import IDLE_DRAW_MAX, category_figure
    from analyzer.pipeline import load_trace
    from tests.conftest import TRACES

    ps = summarize(load_trace(TRACES["mi300_norm"])).per_step
    op = sum(e["time_us"] for e in ps["by_category"].values())
    assert ps["idle_us"] > IDLE_DRAW_MAX * op
    fig = category_figure([("norm", ps)])
    assert not any(t.name == "idle (gaps)" for t in fig.data)
    assert any("not drawn" in (a.text or "") and "× the GPU time" in a.text for a in fig.layout.annotations)
    assert not any(t.name == "step span" for t in fig.data)
