"""The dashboard in a real browser: `streamlit run app.py` headless on 127.0.0.1, driven by Playwright + Chromium.

Uploads two real GPU traces (and a broken file) through the sidebar's file input, checks that Compare shows the
HBM bytes avoided and the broken file's one-line error, downloads a chart as PNG, and saves a full-page screenshot
of every page (to pytest's tmp dir; scripts/screenshots.py writes docs/screenshots/).
"""

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
HF = h.ROOT / "sample_traces" / "hf_geglu_bf16"


def _no_exceptions(page, where: str) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, f"exception box on {where}"


def test_upload_compare_screenshots(tmp_path):
    bad = tmp_path / "truncated.json"
    bad.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur":')
    dialogs = []
    with h.streamlit_server() as url, h.chromium(downloads=True) as page:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        h.wait_idle(page)
        # opens on the bundled HF case, already compared
        assert page.locator("h1", has_text="Overview").count() == 1
        # the diff runs on a worker thread and the page polls it: wait for the headline rather than count at once
        page.get_by_text("100,663,296 B (estimate)").first.wait_for(timeout=30_000)
        _no_exceptions(page, "first load")

        # a user's own traces: two real GPU recordings and a broken file, in one drop
        h.upload(page, [HF / "eager.json.gz", HF / "compile.json.gz", bad])
        alert = page.locator('[data-testid="stAlertContentError"] [data-testid="stMarkdownContainer"]')
        alert.first.wait_for(timeout=30_000)
        assert alert.count() == 1
        line = alert.first.inner_text().strip()
        assert line.startswith("truncated.json: ") and "\n" not in line, line

        h.open_page(page, "compare")
        metric = page.locator('[data-testid="stMetric"]', has_text="HBM bytes avoided per step")
        assert "100.7 MB" in metric.inner_text() and "100,663,296 B (estimate)" in metric.inner_text()
        assert page.locator('[data-testid="stMetric"]', has_text="Kernels per step").inner_text().count("5 → 4") == 1
        # the fusion card's bold header (the same name also sits in the hidden "Copy as Markdown" code block above it)
        card = page.locator(
            '[data-testid="stMarkdownContainer"] strong', has_text="triton_poi_fused__unsafe_view_gelu_mul_0"
        )
        card.first.wait_for(timeout=30_000)
        _no_exceptions(page, "compare")

        # a chart leaves as a slide-ready PNG (kaleido on the server)
        with page.expect_download(timeout=120_000) as dl:
            page.locator('[data-testid="stDownloadButton"] button', has_text="PNG").first.click()
        png = dl.value.path().read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000

        shots = {}
        for name in h.PAGES:
            h.open_page(page, name)
            _no_exceptions(page, name)
            shots[name] = h.screenshot(page, tmp_path / "screenshots" / f"{name}.png")
            if name not in ("profile", "kernels"):
                assert page.locator('[data-testid="stPlotlyChart"]').count() >= 1, f"no chart on {name}"
        for name, path in shots.items():
            assert path.stat().st_size > 40_000, f"{name} screenshot looks empty"
    assert dialogs == []
