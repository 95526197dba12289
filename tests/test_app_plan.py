"""Fusion plan page (AppTest): the bundled HF case's plan, ranked, with the predicted step and predicted vs achieved."""

from __future__ import annotations

import pytest

from tests import app_support as s

pytestmark = pytest.mark.skipif(not (s.HF / "manifest.json").is_file(), reason="sample_traces/hf_geglu_bf16 missing")


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
    assert list(plan["in plan"]) == ["yes", "or #1"]
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
