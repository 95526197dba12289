"""Hostile runner manifests and the upload privacy switch in a real browser (`streamlit run app.py` + Chromium):

* a manifest.json whose control_probe.roles holds a list, or nested 200,000 levels deep, uploaded beside a good
  pair: one error line naming the file and the field, every page renders, and a reload (a fresh session) is clean;
* the sidebar offers "Keep analysed uploads on this server's disk", off by default: an upload leaves nothing in
  the server's cache folder until it is ticked.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.cli.test_side_files import HOSTILE, PROBE
from tests.e2e import harness as h
from tests.support import app_support as s

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not h.CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="needs the playwright package"),
    pytest.mark.needs_data(PROBE / "eager.json.gz"),
    pytest.mark.timeout(900),
]


def _errors(page) -> list[str]:
    return page.locator('[data-testid="stAlertContentError"]').all_inner_texts()


def _no_exception(page, where: str) -> None:
    assert not page.locator('[data-testid="stException"]').count(), where
    main = page.locator('[data-testid="stMain"]').inner_text()
    assert "Traceback" not in main and "TypeError" not in main, (where, main[:500])


@pytest.mark.parametrize("case", ["roles_holds_a_list", "deep_200k"])
def test_an_off_schema_manifest_costs_one_line_in_the_browser(tmp_path, case):
    data, field = HOSTILE[case]
    folder = tmp_path / case
    folder.mkdir()
    (folder / "manifest.json").write_bytes(data)
    cache = tmp_path / "cache"
    with h.streamlit_server(env={"FUSELENS_CACHE_DIR": str(cache)}) as url, h.chromium(1280, 800) as page:
        page.goto(url)
        h.wait_idle(page)
        h.upload(page, [PROBE / "eager.json.gz", PROBE / "fuselens.json.gz", folder / "manifest.json"])
        page.locator('[data-testid="stAlertContentError"]', has_text="manifest.json").first.wait_for(timeout=120_000)
        h.wait_idle(page)
        errs = _errors(page)
        assert any("manifest.json: " in e and field in e for e in errs), errs
        for name in ("overview", "compare", "kernels", "timeline", "roofline"):
            h.open_page(page, name)
            _no_exception(page, name)
        page.reload()  # a rerun from scratch: nothing of the broken side file is left to raise again
        h.wait_idle(page)
        _no_exception(page, "after reload")
        assert not list(cache.glob(f"{s.digest_of(PROBE / 'eager.json.gz')}-*.fltc"))  # not opted in: not on disk


def test_keep_uploads_on_disk_is_off_until_ticked(tmp_path):
    cache = tmp_path / "cache"
    with h.streamlit_server(env={"FUSELENS_CACHE_DIR": str(cache)}) as url, h.chromium(1280, 800) as page:
        page.goto(url)
        h.wait_idle(page)
        box = page.locator('[data-testid="stSidebar"] [data-testid="stCheckbox"]', has_text="Keep analysed uploads")
        assert box.count() == 1 and not box.locator("input").is_checked()
        first, second = PROBE / "eager.json.gz", PROBE / "fuselens.json.gz"
        h.upload(page, [first])
        # the first run is loaded (its parse ended, uncached) before the box is ticked: a tick during the parse
        # interrupts it, and the rerun parses it again under the new choice
        page.locator('[data-testid="stSidebar"]', has_text="eager.json.gz").first.wait_for(timeout=120_000)
        h.wait_idle(page)
        assert not list(cache.glob(f"{s.digest_of(first)}-*.fltc"))
        box.locator("label").click()
        h.wait_idle(page)
        assert box.locator("input").is_checked()
        h.upload(page, [second])
        page.locator('[data-testid="stSidebar"]', has_text="fuselens.json.gz").first.wait_for(timeout=120_000)
        h.wait_idle(page)
        # the entries are written as the parse ends; a loaded 2-core box (the browser tier runs after the others)
        # may lag the page by tens of seconds
        for _ in range(450):
            if len(list(cache.glob(f"{s.digest_of(second)}-*.fltc"))) == 2:
                break
            page.wait_for_timeout(200)
        assert len(list(cache.glob(f"{s.digest_of(second)}-*.fltc"))) == 2  # the trace's tables and its summary
        assert not list(cache.glob(f"{s.digest_of(first)}-*.fltc"))
