"""Measure the Timeline's first paint in a real browser on a 100k+-GPU-op step (the number in docs/DASHBOARD.md).

    python scripts/measure_first_paint.py [--copies 6] [--second 5] [--runs 3]

Builds two derived real traces (scripts/big_trace.py: HTA's V100 training trace laid end to end, one step each),
starts `streamlit run app.py` headless, uploads them through the file uploader like a user, waits for parsing to
finish, then clicks "Timeline" and times the click → the chart's bars drawn in the page ("first paint after
parsing"), and → the app idle. Repeats with the page re-opened (`--runs`). Also times the small HF case. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.big_trace import make_big_trace  # noqa: E402
from tests.e2e import harness as h  # noqa: E402

# The timeline chart (not the previous page's chart, which stays on screen until replaced) has drawn its bars.
DRAWN = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].some(c =>
    c.textContent.includes("re-based to its own step") &&
    (c.querySelectorAll('g.barlayer path').length > 0 || !!c.querySelector('.gl-container canvas')))"""


def time_timeline(page, from_page: str = "overview") -> dict:
    h.open_page(page, from_page)
    t0 = time.perf_counter()
    page.wait_for_function(f"() => !({DRAWN})()")  # no timeline on screen before the click
    page.locator('[data-testid="stSidebarNavLink"]', has_text="Timeline").first.click()
    page.wait_for_function(DRAWN, timeout=120_000, polling=20)
    paint = time.perf_counter() - t0
    h.wait_idle(page)
    idle = time.perf_counter() - t0
    caption = page.locator('[data-testid="stCaptionContainer"]', has_text="GPU ops").first.inner_text()
    return {"first_paint_s": round(paint, 3), "idle_s": round(idle, 3), "caption": caption}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=6, help="copies of the source trace in the first run")
    ap.add_argument("--second", type=int, default=5, help="copies in the second run (0: one run only)")
    ap.add_argument("--runs", type=int, default=3, help="timed page opens")
    ns = ap.parse_args()
    out = {"machine": {"cpus": __import__("os").cpu_count()}}
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / f"big{ns.copies}.json.gz"]
        out["traces"] = [make_big_trace(files[0], ns.copies)]
        if ns.second:
            files.append(Path(tmp) / f"big{ns.second}.json.gz")
            out["traces"].append(make_big_trace(files[1], ns.second))
        with h.streamlit_server() as url, h.chromium() as page:
            page.goto(url)
            h.wait_idle(page)
            small = [time_timeline(page) for _ in range(ns.runs)]
            out["hf_case"] = {"first_paint_s": statistics.median(r["first_paint_s"] for r in small), "runs": small}
            t0 = time.perf_counter()
            h.upload(page, files, timeout_ms=600_000)
            out["upload_and_parse_s"] = round(time.perf_counter() - t0, 1)
            big = [time_timeline(page) for _ in range(ns.runs)]
            out["big_step"] = {"first_paint_s": statistics.median(r["first_paint_s"] for r in big), "runs": big}
            t0 = time.perf_counter()
            page.get_by_text("CPU ops that launched them").click()
            page.wait_for_function(
                "() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')].some(c => c.textContent.includes('CPU ops'))",
                timeout=120_000,
            )
            h.wait_idle(page)
            out["big_step"]["with_cpu_lanes_rerun_s"] = round(time.perf_counter() - t0, 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
