"""Robustness in a real browser: one odd file never breaks the dashboard, nothing is fetched from the network, and a
profile run survives the tab that started it being reloaded.

`streamlit run app.py` (the project's .streamlit/config.toml) + Playwright on /usr/bin/chromium, selecting by
data-testid and waiting for the app to be idle (tests/e2e/harness.py). The damaged files are derived from the
bundled H100 recordings (tests/support/app_support.broken_set): a trace cut at 30 %, one with string durations, a manifest
with `"median_us": "abc"`, an eager.ncu.json with `"dram_bytes_read": "abc"`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.e2e import harness as h
from tests.support import app_support as s

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not h.CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="needs the playwright package"),
    pytest.mark.needs_data(s.HF / "eager.json.gz"),
    pytest.mark.timeout(900),
]
STANDIN = [sys.executable, str(h.ROOT / "tests" / "support" / "profile_standin.py")]
FAKE_GPU = [sys.executable, "-c", "print('GPU 0: Stand-in for an H100 (UUID: GPU-0000)')"]
NONE_WORD = re.compile(r"(?<![\w-])None(?![\w-])")


def _page_problems(page, where: str) -> list[str]:
    out = []
    if page.locator('[data-testid="stException"]').count():
        out.append(f"{where}: exception box")
    main = page.locator('[data-testid="stMain"]').inner_text()
    for bad in ("Traceback", "ValueError", "TypeError", "KeyError", "cannot convert float NaN", "[]"):
        if bad in main:
            out.append(f"{where}: {bad!r} on the page")
    if NONE_WORD.search(main):
        out.append(f"{where}: a raw None on the page: …{main[max(0, NONE_WORD.search(main).start() - 60) :][:120]}…")
    cells = page.locator('[data-testid="stDataFrame"] [role="gridcell"]').all_inner_texts()
    if any(c.strip() in ("None", "nan", "NaN") for c in cells):
        out.append(f"{where}: a None/NaN table cell")
    return out


def test_good_pair_beside_broken_files_offline(tmp_path):
    broken = s.broken_set(tmp_path / "broken")
    external: list[str] = []
    with h.streamlit_server() as url, h.chromium(width=1280, height=800) as page:
        host = urlparse(url).netloc

        def watch(req):
            u = urlparse(req.url)
            if u.scheme in ("http", "https", "ws", "wss") and u.netloc != host:
                external.append(req.url)

        page.on("request", watch)
        page.goto(url)
        h.wait_idle(page)
        h.upload(page, [s.HF / "eager.json.gz", s.HF / "compile.json.gz", *broken.values()])
        page.locator('[data-testid="stAlertContentError"]', has_text="eager.ncu.json").first.wait_for(timeout=60_000)
        errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
        assert any("manifest.json: variant eager: median_us is" in e for e in errors), errors
        assert any("eager.ncu.json: kernel 0: dram_bytes_read is" in e for e in errors), errors
        problems, cut = [], []
        for name in h.PAGES:
            h.open_page(page, name)
            problems += _page_problems(page, name)
            cut += [f"{name}: {c}" for c in h.cut_tables(page)]
            if name == "compare":
                metric = page.locator('[data-testid="stMetric"]', has_text="HBM bytes avoided per step")
                assert "100,663,296 B (estimate)" in metric.inner_text()
                kern = page.locator('[data-testid="stMetric"]', has_text="Kernels per step").inner_text()
                assert "5 → 4" in kern
                warn = " ".join(page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts())
                assert "truncated_half (truncated_half.json.gz) has no GPU kernel" in warn
            if name == "overview":  # every run in doubt is marked where its figures are
                warn = " ".join(page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts())
                assert "wrong_types: figures in doubt" in warn and "truncated_half: figures in doubt" in warn
        assert problems == [], problems
        assert cut == [], cut
    assert external == [], external  # fully offline: no favicon, font or telemetry fetch


def test_a_closed_tab_does_not_orphan_its_run(tmp_path):
    """The tab that started a profile run is closed (or reloaded into a new session): the next tab takes the
    run over, with its Cancel button, instead of everyone seeing "busy" until the 1800 s limit. (A plain reload
    reconnects to the same session in this Streamlit and keeps its Cancel button: checked first.)"""
    env = {
        "FUSELENS_PROFILE_RUNNER": json.dumps(STANDIN),
        "FUSELENS_GPU_PROBE": json.dumps(FAKE_GPU),
        "STANDIN_DELAY_S": "30",
        "STANDIN_CHILD_PIDFILE": str(tmp_path / "grandchild.pid"),
    }
    cancel_sel = '[data-testid="stButton"] button'
    with h.streamlit_server(env=env) as url:
        with h.chromium(width=1600, height=1000) as page:
            page.goto(url)
            h.wait_idle(page)
            h.open_page(page, "profile")
            page.locator('[data-testid="stFormSubmitButton"] button', has_text="Run profile").first.click()
            page.locator(cancel_sel, has_text="Cancel run").wait_for(timeout=60_000)
            page.reload()
            h.wait_idle(page)
            page.locator(cancel_sel, has_text="Cancel run").wait_for(timeout=60_000)
        # that browser is gone; a new one opens the dashboard
        with h.chromium(width=1600, height=1000) as page:
            page.goto(url)
            h.wait_idle(page)
            h.open_page(page, "profile")
            page.locator('[data-testid="stAlertContentInfo"]', has_text="took over a profiling run").wait_for(
                timeout=60_000
            )
            page.locator(cancel_sel, has_text="Cancel run").click()
            page.get_by_text("Profiling cancelled").wait_for(timeout=60_000)
        pid = int(Path(env["STANDIN_CHILD_PIDFILE"]).read_text())
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
