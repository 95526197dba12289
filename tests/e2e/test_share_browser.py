"""Shared links and selectors in a real browser: every selector names a loaded run, a link to runs that are not
loaded says so and is applied once the same files are uploaded, and a bad URL parameter costs one line.

`streamlit run app.py` + Playwright on /usr/bin/chromium (tests/e2e/harness.py), selecting by data-testid, waiting
for the app to be idle, asserting on what the user sees. The traces are the recorded Llama-style decoder layer
(tests/data/layer_h100: eager, SDPA, torch.compile), uploaded under the names a user would give them.
"""

from __future__ import annotations

import importlib.util
import shutil
from urllib.parse import parse_qs, urlparse

import pytest

from tests.e2e import harness as h

LAYER = h.ROOT / "tests" / "data" / "layer_h100"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not h.CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="needs the playwright package"),
    pytest.mark.needs_data(LAYER / "eager.json.gz"),
    pytest.mark.timeout(600),
]


def _layer_files(tmp_path):
    out = []
    for v in ("eager", "sdpa", "compile"):
        p = tmp_path / f"layer_{v}_bf16.json.gz"
        shutil.copy(LAYER / f"{v}.json.gz", p)
        out.append(p)
    return out


def _selected(page, label: str) -> str:
    """What a st.selectbox shows, found by its label."""
    return page.locator(f'[data-testid="stSelectbox"] input[aria-label="{label}"]').first.input_value().strip()


def _query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def _no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "Traceback" not in page.locator('[data-testid="stMain"]').inner_text()


def test_candidate_is_always_a_loaded_run(tmp_path):
    """The demo's Compare shows candidate 'compile'; uploading a layer's three traces replaces the demo, and the
    selector, the headline and the URL all name the same loaded candidate."""
    files = _layer_files(tmp_path)
    with h.streamlit_server() as url, h.chromium(width=1600, height=1000) as page:
        page.goto(url)
        h.wait_idle(page)
        h.open_page(page, "compare")
        assert _selected(page, "Candidate") == "compile"
        h.upload(page, files)
        h.open_page(page, "compare")
        shown = _selected(page, "Candidate")
        assert shown in ("layer_sdpa_bf16", "layer_compile_bf16"), shown
        assert _selected(page, "Baseline") == "layer_eager_bf16"
        assert f"{shown} vs layer_eager_bf16" in page.locator('[data-testid="stMain"]').inner_text()
        assert _query(page).get("candidate") == shown
        # the timeline's run pills name exactly the loaded runs
        h.open_page(page, "timeline")
        pills = page.locator('[data-testid="stButtonGroup"]').first.inner_text()
        assert all(f"layer_{v}_bf16" in pills for v in ("eager", "sdpa", "compile")), pills
        assert "fuselens" not in pills and "liger" not in pills, pills
        _no_exception(page)


def test_link_to_uploaded_runs_says_so_then_applies(tmp_path):
    files = _layer_files(tmp_path)
    link = "/compare?runs=layer_eager_bf16,layer_sdpa_bf16,layer_compile_bf16&baseline=layer_eager_bf16&candidate=layer_compile_bf16"
    with h.streamlit_server() as url, h.chromium(width=1600, height=1000) as page:
        page.goto(url + link)
        h.wait_idle(page)
        warn = page.locator('[data-testid="stAlertContentWarning"]', has_text="not loaded here").inner_text()
        for v in ("eager", "sdpa", "compile"):
            assert f"layer_{v}_bf16" in warn, warn
        assert page.locator('[data-testid="stSelectbox"] input[aria-label="Baseline"]').count() == 0  # no demo opened
        assert _query(page).get("candidate") == "layer_compile_bf16"  # the link is still the link while it waits
        h.upload(page, files)
        h.open_page(page, "compare")
        assert page.locator('[data-testid="stAlertContentWarning"]', has_text="not loaded here").count() == 0
        assert _selected(page, "Candidate") == "layer_compile_bf16"
        assert _selected(page, "Baseline") == "layer_eager_bf16"
        assert _query(page).get("candidate") == "layer_compile_bf16"
        _no_exception(page)


BAD_LINKS = [  # (link, the one line it must cost)
    ("/timeline?step=%C2%B2", "link: step '²' is not a step number"),  # isdigit() says yes, int() says no
    ("/timeline?step=999", "link: step 999 is beyond these runs'"),
    ("/timeline?step=-3", "link: step '-3' is not a step number"),
    ("/compare?set=..%2Fetc", "is not a sample set name"),
    ("/compare?set=no_such_set", "link: no bundled sample set named 'no_such_set'"),
    ("/compare?candidate=nope", "link: candidate 'nope' is not a loaded run"),
    ("/compare?candidate=%1B%5B31m", "link: candidate '\\x1b[31m' is not a label this app writes"),
    ("/compare?set=hf_geglu_bf16&runs=eager,compile&baseline=eager&candidate=liger", "not one of the link's runs"),
    ("/overview?colour=red", "link: unknown parameter 'colour' ignored"),
    ("/compare?set=hf_geglu_bf16&runs=eager,nope&baseline=eager", "link: set 'hf_geglu_bf16' has no run 'nope'"),
]


def test_bad_parameter_costs_one_line():
    """Each bad parameter: the page still opens (the default view), with exactly one line naming the parameter."""
    failures = []
    with h.streamlit_server() as url, h.chromium(width=1280, height=800) as page:
        for query, line in BAD_LINKS:
            page.goto(url + query)  # a URL load is a new session, as for a teammate opening the link
            h.wait_idle(page)
            _no_exception(page)
            alerts = page.locator('[data-testid="stAlert"] [data-testid="stMarkdownContainer"]').all_inner_texts()
            hits = [a.strip() for a in alerts if line in a]
            if len(hits) != 1 or "\n" in hits[0]:
                failures.append((query, alerts))
    assert failures == [], failures
