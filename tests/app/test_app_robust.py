"""Robustness on the real app (AppTest): one odd file never breaks Compare for the others.

Every damaged file is derived from the bundled H100 recordings (tests/support/app_support.broken_set): a trace cut before its first
kernel event (no GPU op), one whose kernel durations are strings, a runner manifest with
`"median_us": "abc"`, an eager.ncu.json with `"dram_bytes_read": "abc"`.
"""

from __future__ import annotations

import pytest

from tests.support import app_support as s

PAGES = ("overview", "timeline", "compare", "kernels", "roofline", "profile")


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    return s.broken_set(tmp_path_factory.mktemp("broken"))


def _everything(broken):
    at = s.app()
    return s.upload(at, s.HF / "eager.json.gz", s.HF / "compile.json.gz", *broken.values())


def _no_none(at, where):
    for df in at.dataframe:
        v = df.value
        cells = v.astype(str).to_numpy().ravel().tolist() if hasattr(v, "astype") else []
        assert "None" not in cells and "nan" not in cells, (where, v)
    for kind in ("markdown", "caption", "error", "warning", "info", "metric"):
        for e in getattr(at, kind):
            text = s.plain(getattr(e, "value", "")) + " " + s.plain(getattr(e, "label", "") or "")
            assert "None" not in text.split() and "[]" not in text, (where, text)


def test_good_pair_still_compared_beside_every_broken_file(broken):
    at = _everything(broken)
    assert s.labels(at)[:2] == ["eager", "compile"]
    errs = s.texts(at, "error")
    # the two side files: one line each, naming the file and the problem
    assert any(e.startswith('manifest.json: variant eager: median_us is "abc"') for e in errs), errs
    assert any(e.startswith('eager.ncu.json: kernel 0: dram_bytes_read is "abc"') for e in errs), errs
    for page in PAGES:
        s.goto(at, page)
        assert not at.exception, (page, [e.value for e in at.exception])
        _no_none(at, page)
    s.goto(at, "compare")
    m = s.metric_values(at)
    assert m["Kernels per step"][0] == "5 → 4"
    assert m["HBM bytes avoided per step"] == ("100.7 MB", "100,663,296 B (estimate)")
    warns = [w.replace("**", "") for w in s.texts(at, "warning")]
    assert any(w.startswith("truncated_half (truncated_half.json.gz) has no GPU kernel") for w in warns), warns


@pytest.mark.slow  # the slow tier (README): an app run (22 s loaded); fast: the good pair test above
def test_truncated_baseline_and_wrong_types_candidate(broken):
    """A truncated baseline, a wrong-types candidate: no NaN crash, a stand-in baseline, a warning."""
    at = s.app()
    s.upload(at, broken["truncated"], broken["wrong_types"], s.HF / "eager.json.gz")
    keys = {r.label: r.key for r in s.runs(at)}
    at.session_state["fl_baseline"] = keys["truncated_half"]
    at.run()
    assert not at.exception
    for page in ("overview", "compare"):
        s.goto(at, page)
        assert not at.exception, [e.value for e in at.exception]
        warns = [w.replace("**", "") for w in s.texts(at, "warning")]
        assert any("eager stands in as the baseline" in w for w in warns), warns
        # the wrong-types run's figures are marked where they are shown
        assert any(w.startswith("wrong_types: figures in doubt") for w in warns), warns
        _no_none(at, page)
    s.goto(at, "compare")
    at.selectbox(key="fl_compare_candidate").set_value("wrong_types").run()
    m = s.metric_values(at)
    assert m["GPU time per step (as recorded)"][0] == "—"  # unknown, not "1.6 µs, -99.3%"


@pytest.mark.slow  # the slow tier (README): an app run (24 s loaded); fast: the good pair test above
def test_only_an_empty_run_beside_one_good_run_says_why(broken):
    at = s.app()
    s.upload(at, broken["truncated"], s.HF / "eager.json.gz")
    s.goto(at, "compare")
    infos = s.texts(at, "info")
    assert any("1 of 2 loaded runs can be compared" in i for i in infos), infos
    assert not at.exception


@pytest.mark.slow  # the slow tier (README): an app run (26 s loaded); fast: the good pair test above
def test_overview_marks_runs_in_doubt(broken):
    at = _everything(broken)
    s.goto(at, "overview")
    df = at.dataframe[0].value.set_index("measure").T  # one column per run on the page
    assert "wrong_types ⚠" in df.index and "truncated_half ⚠" in df.index  # marked where the figures are
    assert df.loc["truncated_half ⚠", "GPU µs/step"] == "—"
    assert df.loc["eager", "CUDA-event µs"] == "—"  # "abc" in the manifest: left out, not a crash
    assert "compile" in df.index  # nothing wrong with it: no mark
