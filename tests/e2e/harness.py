"""A real Streamlit server and a real Chromium, for the browser test and scripts/screenshots.py.

Waiting follows Streamlit's own e2e_playwright tests: the root element `[data-testid="stApp"]` carries
`data-test-script-state` ('running' while a script run is in flight, 'notRunning' when idle) and
`data-test-connection-state`; an app is idle when it is connected, not running, and no status widget spins.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PAGES = ("overview", "timeline", "compare", "kernels", "roofline", "profile")
PAGE_ALIASES = {"plan": "fusion plan"}  # short names for pages whose title has two words


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(
    app: Path = ROOT / "app.py", *, env: dict | None = None, timeout_s: float = 90.0, use_config_watcher: bool = False
):
    """`streamlit run app.py` headless on 127.0.0.1:<free port>; yields the base URL; stops its process group.

    Everything else (Host allow-list, file watcher, …) comes from the project's .streamlit/config.toml, as for a
    user; `use_config_watcher` only drops the harness's own `--server.fileWatcherType none` to prove the config's."""
    port = free_port()
    argv = [
        sys.executable, "-m", "streamlit", "run", str(app),
        "--server.headless", "true",
        "--server.address", "127.0.0.1",
        "--server.port", str(port),
        "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    if not use_config_watcher:
        argv += ["--server.fileWatcherType", "none"]
    log = open(os.environ.get("FUSELENS_E2E_LOG") or os.devnull, "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(
        argv, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {proc.returncode} before serving")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"streamlit did not answer /_stcore/health within {timeout_s:.0f} s")
            time.sleep(0.3)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@contextlib.contextmanager
def chromium(width: int = 1440, height: int = 1000, downloads: bool = False):
    """A Playwright page in Debian's Chromium (Playwright's own browsers cannot be downloaded here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            ctx = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=downloads)
            yield ctx.new_page()
        finally:
            browser.close()


def wait_idle(page, timeout_ms: int = 120_000) -> None:
    """Until the app is connected, its script run finished, nothing spins and the page stopped changing.

    Streamlit's e2e convention (stApp's data-test-script-state == 'notRunning', no status widget) plus one more
    condition: the frontend flips to 'notRunning' a moment before it renders the last elements, so also wait until
    the main area's text is unchanged for 400 ms and no element is marked stale."""
    page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=timeout_ms)
    page.wait_for_timeout(250)  # an interaction's rerun can start a beat later
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=timeout_ms)
    page.wait_for_function(
        """() => new Promise(resolve => {
            const snap = () => (document.querySelector('[data-testid="stMain"]') || document.body).innerText;
            const a = snap();
            setTimeout(() => resolve(a === snap() && !document.querySelector('[data-stale="true"]')), 400);
        })""",
        timeout=timeout_ms,
        polling=100,
    )


def open_page(page, name: str, timeout_ms: int = 120_000) -> None:
    """Go to a dashboard page by clicking its sidebar link (a URL load would start a new session). name: the page's
    title in any case ('fusion plan'), or a short alias ('plan')."""
    title = PAGE_ALIASES.get(name.lower(), name).capitalize()
    page.locator('[data-testid="stSidebarNavLink"]', has_text=title).first.click()
    page.wait_for_function(
        "t => document.querySelector('h1') && document.querySelector('h1').innerText.startsWith(t)",
        arg="Profile on" if name == "profile" else title,
        timeout=timeout_ms,
    )
    wait_idle(page, timeout_ms)


def upload(page, paths: list[Path], timeout_ms: int = 180_000) -> None:
    """Upload files through the sidebar's st.file_uploader, like a user dropping them."""
    page.locator('[data-testid="stSidebar"] [data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        [str(p) for p in paths]
    )
    wait_idle(page, timeout_ms)


def screenshot(page, path: Path) -> Path:
    """Full-page screenshot. Streamlit scrolls inside its own container, not the document, so Playwright's
    full_page alone stops at the viewport: grow the viewport to the content's height for the shot, then restore."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    content = page.evaluate(
        """() => Math.max(...['[data-testid="stMain"]', '[data-testid="stAppViewContainer"]', '[data-testid="stSidebarContent"]']
            .map(s => document.querySelector(s)).filter(Boolean).map(e => e.scrollHeight), document.body.scrollHeight)"""
    )
    page.set_viewport_size({"width": size["width"], "height": min(max(size["height"], int(content) + 40), 12000)})
    page.wait_for_timeout(600)  # charts re-layout to the new size
    wait_idle(page)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)
    return path


def cut_tables(page) -> list[str]:
    """Tables (st.dataframe) whose columns run past their visible width, i.e. a slide would show them cut: one
    line each, with the table's first column headers. The data grid scrolls inside `.dvn-scroller`."""
    return page.evaluate(
        """() => [...document.querySelectorAll('[data-testid="stDataFrame"]')].flatMap(t => {
            const s = t.querySelector('.dvn-scroller');
            if (!s || s.scrollWidth <= s.clientWidth + 2) return [];
            const heads = [...t.querySelectorAll('[role="columnheader"]')].map(h => h.innerText.trim()).slice(0, 4);
            return [`table [${heads.join(' | ')}…] is ${s.scrollWidth}px wide in ${s.clientWidth}px`];
        })"""
    )
