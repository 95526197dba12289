"""Fusion plan page (AppTest): the bundled HF case's plan, ranked, with the predicted step and predicted vs achieved."""

from __future__ import annotations

import pytest

from tests.support import app_support as s

pytestmark = pytest.mark.needs_data(s.HF / "manifest.json")


@pytest.fixture(scope="module")
def at():
    return s.app("plan")


def test_plan_page_shows_the_ranked_plan(at):
    from analyzer.opportunities import plan_opportunities

    base = next(r for r in s.runs(at) if r.label == "eager")
    j = plan_opportunities(base.summary).to_json()
    m = s.metric_values(at)
    assert m["GPU busy per step now"][0] == f"{j['gpu_busy_us_per_step']:,.1f} µs"
    assert m["Predicted with the plan"][0] == f"{j['predicted_gpu_busy_us_per_step']:,.1f} µs"
    done = " ".join(s.plain(t) for t in s.texts(at, "success"))
    assert "Do first: dual GEMM" in done and "FuseLens dual GEMM" in done
    plan = at.dataframe[0].value
    assert list(plan["what"].str.split(" ·").str[0]) == ["dual GEMM (gate + up GEMMs, gating)", "GEGLU gating"]
    assert plan["what"].iloc[1].endswith("(or #1)")  # inside the dual GEMM: the plan takes one of the two
    assert plan["saves/step (µs)"].tolist() == pytest.approx(
        [o["predicted_saved_us_per_step"] for o in j["opportunities"]]
    )
    tools = at.dataframe[1].value
    assert tools.iloc[0]["tool"] == "FuseLens dual GEMM"


def test_predicted_vs_achieved_against_a_fused_run(at):
    table = at.dataframe[2].value
    assert list(table["status"]) == ["partly taken", "taken"]  # compile: the gating, not the dual GEMM
    at.selectbox(key="fl_plan_cand").set_value("fuselens").run()
    table = at.dataframe[2].value
    assert list(table["status"]) == ["taken", "taken"]
    assert table.iloc[0]["achieved (µs)"] > 0.9 * table.iloc[0]["predicted saves (µs)"]


@pytest.mark.slow  # the slow tier (README): an app run (17 s loaded); fast: test_app_robust's good pair
def test_plan_page_with_broken_runs_never_fails(tmp_path):
    """Every damaged file of the robustness set (a trace cut before its first kernel, kernel durations as strings,
    broken side files) as the planned run: a plan or a one-line reason, never an exception, "None" or "nan"."""
    broken = s.broken_set(tmp_path)
    at = s.app()
    s.upload(at, *broken.values())
    s.goto(at, "plan")
    for label in [r.label for r in s.runs(at)]:
        at.selectbox(key="fl_plan_run").set_value(label).run()
        assert not at.exception, (label, [e.value for e in at.exception])
        for df in at.dataframe:
            cells = df.value.astype(str).to_numpy().ravel().tolist()
            assert "None" not in cells and "nan" not in cells, (label, df.value)
        for kind in ("markdown", "caption", "error", "info", "metric"):
            for e in getattr(at, kind):
                text = s.plain(getattr(e, "value", "")) + " " + s.plain(getattr(e, "label", "") or "")
                assert "None" not in text.split() and " nan " not in f" {text} ", (label, text)
