"""The Fusion plan page in a real browser: the bundled HF case opens, the page names the first thing to do, and at
a laptop's 1280 × 800 no table is cut (wider than its visible area)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.e2e import harness as h

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not h.CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium)"
    ),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="needs the playwright package"),
    pytest.mark.needs_data(h.ROOT / "sample_traces" / "hf_geglu_bf16" / "eager.json.gz"),
    pytest.mark.timeout(600),
]


def test_plan_page_reads_in_a_browser(tmp_path):
    with h.streamlit_server() as url, h.chromium(width=1280, height=800) as page:
        page.goto(url)
        h.wait_idle(page)
        h.open_page(page, "fusion plan")
        assert page.locator('[data-testid="stException"]').count() == 0
        flag = page.locator('[data-testid="stAlertContentSuccess"]').first.inner_text()
        assert "Do first: dual GEMM" in flag and "FuseLens dual GEMM" in flag
        assert h.cut_tables(page) == []
        h.screenshot(page, tmp_path / "plan.png")
