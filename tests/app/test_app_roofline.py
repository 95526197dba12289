"""Roofline page (AppTest) and figure: one marker per kernel, a symbol per run, the GPU's roofs from GpuSpec."""

from __future__ import annotations

import json

import pytest

from analyzer.figures.roofline import roofline_figure, roofline_points
from analyzer.gpus import GpuSpec
from tests.support import app_support as s

pytestmark = pytest.mark.needs_data(s.HF / "manifest.json")


def test_page_draws_runs_in_different_marks_against_h100_roofs():
    at = s.app("roofline")
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    runs = [t for t in fig["data"] if str(t.get("legendgroup", "")).startswith("run-") and t.get("hovertext")]
    assert [t["name"] for t in runs] == ["eager", "compile", "liger", "fuselens"]
    assert len({t["marker"]["symbol"] for t in runs}) == 4
    assert all(len(t["hovertext"]) >= 1 for t in runs)  # one marker per kernel with an estimate
    roofs = [t["name"] for t in fig["data"] if t.get("legendgroup") == "roofs"]
    assert roofs[0].startswith("HBM 3,350 GB/s") and any(r.startswith("bf16 peak 990") for r in roofs)
    assert fig["layout"]["xaxis"]["type"] == "log" and "estimate" in fig["layout"]["xaxis"]["title"]["text"]
    caption = " ".join(s.texts(at, "caption"))
    assert "kernels plotted" in caption and "H100" in caption
    at.multiselect[0].set_value(["eager"]).run()
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["name"] for t in fig["data"] if t.get("hovertext")] == ["eager"]


def test_points_and_roofs_follow_the_estimates():
    import analyzer

    k = analyzer.summarize(analyzer.load_trace(s.HF / "eager.json.gz")).kernels
    pts, skipped = roofline_points([("eager", k)])
    gemms = pts[pts["category"] == "gemm"]
    assert len(gemms) >= 2
    # a GEMM's intensity is FLOPs / bytes: M=8192 N=3072 K=768 bf16 sits far right of a pointwise kernel
    assert gemms["ai"].min() > 10 * pts[pts["category"] == "pointwise"]["ai"].max()
    spec = GpuSpec("Test GPU", hbm_gbps=1000.0, tflops={"bf16": 100.0})
    fig = roofline_figure([("eager", k)], spec)
    roof = next(t for t in fig.data if t.name.startswith("HBM"))
    # below the ridge the roof is bandwidth × intensity, above it the flat peak
    for x, y in zip(roof.x, roof.y, strict=True):
        assert y == pytest.approx(min(1000.0 * x / 1000.0, 100.0))
    unknown = roofline_figure([("eager", k)], None)
    assert not [t for t in unknown.data if t.legendgroup == "roofs"]
    assert fig.layout.meta["points"] == len(pts)


@pytest.mark.slow  # the slow tier (README): 2 app runs (47 s loaded); fast: roofline page, manifest roofs
@pytest.mark.needs_data(s.HF / "manifest.json")
def test_measured_roofs_from_the_manifest_beside_the_datasheet(tmp_path):
    """Where the runner measured roofs (`--measure-roofs`: manifest "ceilings"), the Roofline draws
    them beside the datasheet roofs. The figures here are the H100 bench's (bench/results: 3.03 TB/s, 794 TFLOP/s);
    a malformed one is left out."""
    import json

    man = json.loads((s.HF / "manifest.json").read_text())
    man["ceilings"] = {"copy_gbps": 3030.0, "matmul_tflops": 794.0, "matmul_dtype": "bf16"}
    p = tmp_path / "manifest.json"
    p.write_text(json.dumps(man))
    at = s.upload(s.app(), s.HF / "eager.json.gz", s.HF / "compile.json.gz", p)
    s.goto(at, "roofline")
    names = [t.get("name") or "" for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert "measured: copy 3,030 GB/s, bf16 matmul 794 TFLOP/s" in names, names
    assert any(n.startswith("HBM 3,350 GB/s") for n in names)  # the datasheet roof stays
    man["ceilings"] = {"copy_gbps": "fast", "matmul_tflops": 794.0, "matmul_dtype": "bf16"}
    p.write_text(json.dumps(man))
    at = s.upload(s.app(), s.HF / "eager.json.gz", s.HF / "compile.json.gz", p)
    s.goto(at, "roofline")
    names = [t.get("name") or "" for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert "measured: bf16 matmul 794 TFLOP/s" in names, names
