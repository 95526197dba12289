"""The dashboard's page speed in a real browser: a new tab on a warm server, every timeline view of a whole-model
step, and the first PNG export. Prints one JSON object (the figures in docs/DASHBOARD.md).

    python bench/bench_pages.py [--layers 48] [--tabs 5]

Targets: a new tab idle in <= 2 s on a warm server; any timeline view of a 2,000+-kernel step built in <= 1 s (the
figure, as the page's caption reports it) with labels only where they fit; the first PNG export in <= 2 s.

What is timed: `streamlit run app.py` headless + Chromium (tests/e2e/harness.py). A "new tab" is a fresh page load
(a new Streamlit session) after one warm-up tab, timed from navigation to the app idle (connected, script run
finished, nothing spinning, text stable 400 ms; the harness's `wait_idle`, whose 400 ms stability wait is included).
The whole-model traces are bench/make_model_trace.py's: the recorded Llama-style decoder layer (tests/data/layer_h100)
replicated `--layers` times per step, uploaded through the sidebar like a user's files. A timeline view is timed from
the click to the chart drawn (bars or WebGL canvas in the page) and to idle; "build" is the server's figure build.
The PNG export is the first click on a chart's PNG button in a fresh server (kaleido starts its Chromium then).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e import harness as h  # noqa: E402

# The timeline chart showing `marker` (its x-axis title or a lane name) has drawn its bars or its WebGL canvas.
DRAWN = """marker => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].some(c =>
    c.textContent.includes(marker) &&
    (c.querySelectorAll('g.barlayer path').length > 0 || !!c.querySelector('.gl-container canvas')))"""
MARKERS = {None: "since the step", "Kernel order": "launch order", "Show CPU ops": "CPU ops"}
BUILT = re.compile(r"built in ([\d,]+) ms")


def _new_tabs(url: str, n: int) -> dict:
    times = []
    with h.chromium(width=1600, height=1000) as page:
        page.goto(url)
        h.wait_idle(page)  # the warm-up tab: the server parses the bundled samples once
        for _ in range(n):
            t0 = time.perf_counter()
            page.goto(url)
            h.wait_idle(page)
            times.append(time.perf_counter() - t0)
    return {"new_tab_idle_s": [round(t, 2) for t in times], "median_s": round(statistics.median(times), 2)}


def _timeline_view(page, toggle: str | None) -> dict:
    t0 = time.perf_counter()
    if toggle:
        page.locator('[data-testid="stCheckbox"]', has_text=toggle).first.locator("label").click()
    else:
        page.locator('[data-testid="stSidebarNavLink"]', has_text="Timeline").first.click()
    page.wait_for_function(DRAWN, arg=MARKERS[toggle], timeout=120_000, polling=20)
    drawn = time.perf_counter() - t0
    h.wait_idle(page)
    idle = time.perf_counter() - t0
    cap = page.locator('[data-testid="stCaptionContainer"]', has_text="built in").first.inner_text()
    m = BUILT.search(cap)
    labels = page.evaluate(
        """() => { const c = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].find(c =>
            c.textContent.includes("since the step") || c.textContent.includes("launch order"));
            return c ? c.querySelectorAll('g.annotation, g.barlayer text').length : 0; }"""
    )
    return {
        "build_ms": int(m.group(1).replace(",", "")) if m else None,
        "drawn_s": round(drawn, 2),
        "idle_s": round(idle, 2),
        "labels_drawn": labels,
        "caption": cap.split(" · built")[0][:160],
    }


def _timeline(url: str, files: list[Path]) -> dict:
    out = {}
    with h.chromium(width=1600, height=1000) as page:
        page.goto(url)
        h.wait_idle(page)
        h.upload(page, files)
        h.open_page(page, "overview")
        out["time"] = _timeline_view(page, None)
        out["kernel order"] = _timeline_view(page, "Kernel order")
        page.locator('[data-testid="stCheckbox"]', has_text="Kernel order").first.locator("label").click()
        h.wait_idle(page)
        out["cpu ops"] = _timeline_view(page, "Show CPU ops")
    return out


def _first_png(url: str, tmp: Path) -> dict:
    with h.chromium(width=1600, height=1000, downloads=True) as page:
        page.goto(url + "/compare")
        h.wait_idle(page)
        button = page.locator('[data-testid="stDownloadButton"]', has_text="PNG").first
        t0 = time.perf_counter()
        with page.expect_download(timeout=120_000) as dl:
            button.click()
        path = tmp / "first.png"
        dl.value.save_as(path)
        first = time.perf_counter() - t0
        button = page.locator('[data-testid="stDownloadButton"]', has_text="PNG").nth(1)
        t0 = time.perf_counter()
        with page.expect_download(timeout=120_000) as dl:
            button.click()
        dl.value.save_as(tmp / "second.png")
        second = time.perf_counter() - t0
    return {"first_png_s": round(first, 2), "second_png_s": round(second, 2), "png_bytes": path.stat().st_size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=48, help="decoder layers per step in the whole-model traces")
    ap.add_argument("--tabs", type=int, default=5, help="new tabs timed after the warm-up tab")
    ap.add_argument("--files", type=Path, nargs="*", default=[], help="time the timeline on these traces instead")
    ns = ap.parse_args()
    out: dict = {"machine": {"cpus": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 2)}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "make_model_trace.py"),
                "--layers",
                str(ns.layers),
                "--out",
                str(tmp),
            ],
            check=True,
            capture_output=True,
        )
        files = ns.files or sorted(tmp.glob("model_*.json.gz"))
        with h.streamlit_server(env={"FUSELENS_NO_CACHE": "0"}) as url:
            out["first_png"] = _first_png(url, tmp)  # first: kaleido is cold in this server
            out["new_tab"] = _new_tabs(url, ns.tabs)
            out["timeline"] = _timeline(url, files)
            out["timeline"]["traces"] = [f.name for f in ns.files] if ns.files else f"{ns.layers}-layer model"
    out["machine"]["load_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
