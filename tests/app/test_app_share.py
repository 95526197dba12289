"""Share a view: the page's runs, baseline, candidate and step live in the URL (AppTest)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.support import app_support as s

pytestmark = pytest.mark.needs_data(s.HF / "manifest.json")


def _open(params: dict) -> AppTest:
    at = AppTest.from_file(str(s.APP), default_timeout=s.TIMEOUT)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_link_reproduces_the_view():
    view = {"set": "hf_geglu_bf16", "runs": "eager,compile,fuselens", "baseline": "compile", "candidate": "fuselens"}
    at = _open({**view, "step": "1"})
    assert s.labels(at) == ["compile", "eager", "fuselens"]  # the baseline first; liger was not in the link
    s.goto(at, "compare")
    assert at.selectbox(key="fl_compare_candidate").value == "fuselens"
    assert s.metric_values(at)["Kernels per step"][0] == "4 → 2"  # fuselens vs compile
    s.goto(at, "timeline")
    assert at.selectbox(key="fl_timeline_step").value == 1
    # and the URL keeps saying so after page changes and a new choice
    at.selectbox(key="fl_timeline_step").set_value(0).run()
    q = dict(at.query_params)
    assert q["set"] == "hf_geglu_bf16" and q["baseline"] == "compile" and q["candidate"] == "fuselens"
    assert q["step"] == "0" and q["runs"].split(",") == ["compile", "eager", "fuselens"]


def test_the_default_opening_is_in_the_url_too():
    at = s.app()
    q = dict(at.query_params)
    assert q["set"] == "hf_geglu_bf16" and q["baseline"] == "eager"
    assert q["runs"].split(",") == ["eager", "compile", "liger", "fuselens"]


def test_a_hostile_or_stale_link_costs_one_line():
    at = _open({"set": "../../etc", "runs": "eager", "baseline": "nope", "candidate": "<script>", "step": "999"})
    errors = s.texts(at, "error")
    assert any(e.startswith("link: set '../../etc' is not a sample set name") for e in errors), errors
    assert any(e.startswith("link: baseline 'nope' is not one of the link's runs") for e in errors), errors
    assert any(e.startswith("link: candidate '<script>' is not one of the link's runs") for e in errors), errors
    assert s.labels(at) == ["eager", "compile", "liger", "fuselens"]  # the default case instead
    for page in ("compare", "timeline"):
        s.goto(at, page)
        assert not at.exception
