"""Pages a slide can take, in a real browser: the Timeline with a run that has no GPU op, the Kernels table's run and
op columns, and a chart's PNG export.

`streamlit run app.py` + Playwright on /usr/bin/chromium (tests/e2e/harness.py), selecting by data-testid, waiting
for idle, asserting on what the user sees. Traces: the recorded Llama-style decoder layer (tests/data/layer_h100)
under a user's file names, and tests/data/broken/cpu_only.json (a real profile with no GPU activity).
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from tests.e2e import harness as h

LAYER = h.ROOT / "tests" / "data" / "layer_h100"
CPU_ONLY = h.ROOT / "tests" / "data" / "broken" / "cpu_only.json"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not h.CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="needs the playwright package"),
    pytest.mark.needs_data(LAYER / "eager.json.gz"),
    pytest.mark.timeout(600),
]


def _chart_text(page) -> str:
    return page.locator('[data-testid="stPlotlyChart"]').first.inner_text()


def test_timeline_with_a_run_without_gpu_ops_keeps_its_axis(tmp_path):
    files = []
    for v in ("eager", "compile"):
        files.append(tmp_path / f"layer_{v}_bf16.json.gz")
        shutil.copy(LAYER / f"{v}.json.gz", files[-1])
    with h.streamlit_server() as url, h.chromium(width=1600, height=1000) as page:
        page.goto(url)
        h.wait_idle(page)
        h.upload(page, [*files, CPU_ONLY])
        h.open_page(page, "timeline")
        info = page.locator('[data-testid="stAlertContentInfo"]', has_text="No GPU op in the chosen step").inner_text()
        assert "cpu_only" in info
        chart = _chart_text(page)
        assert "launch order" in chart or "since the step" in chart, chart[-300:]  # the x-axis title is drawn
        assert "layer_eager_bf16" in chart and "layer_compile_bf16" in chart
        assert "cpu_only ·" not in chart  # no empty lane for it
        # and in the time layout too
        page.locator('[data-testid="stCheckbox"]', has_text="Kernel order").first.locator("label").click()
        h.wait_idle(page)
        assert "since the step" in _chart_text(page)
        assert page.locator('[data-testid="stException"]').count() == 0


def test_kernels_table_shows_whole_run_labels_and_ops(tmp_path):
    files = []
    for v in ("eager", "compile"):
        files.append(tmp_path / f"layer_{v}_bf16.json.gz")
        shutil.copy(LAYER / f"{v}.json.gz", files[-1])
    with h.streamlit_server() as url, h.chromium(width=1280, height=800) as page:
        page.goto(url)
        h.wait_idle(page)
        h.upload(page, files)
        h.open_page(page, "kernels")
        table = page.locator('[data-testid="stDataFrame"]').first
        heads = [x.strip() for x in table.locator('[role="columnheader"]').all_inner_texts()]
        assert heads[:3] == ["run", "kernel", "ops"], heads
        cells = table.locator('[role="gridcell"]').all_inner_texts()
        assert "mul" in cells and "add" in cells, cells[:40]  # the eager elementwise kernels say what they compute
        assert h.cut_tables(page) == []


def test_first_png_export_downloads_a_png(tmp_path):
    with h.streamlit_server() as url, h.chromium(width=1600, height=1000, downloads=True) as page:
        page.goto(url + "/compare")
        h.wait_idle(page)
        with page.expect_download(timeout=60_000) as dl:
            page.locator('[data-testid="stDownloadButton"]', has_text="PNG").first.click()
        path = tmp_path / "groups.png"
        dl.value.save_as(path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
