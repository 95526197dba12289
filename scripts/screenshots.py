"""Regenerate docs/screenshots/*.png from a real `streamlit run app.py` and Chromium (never by hand).

    python scripts/screenshots.py [--out docs/screenshots] [--width 1440]

Opens the dashboard on the bundled HF GEGLU case (eager vs compile vs Liger vs FuseLens), saves a full-page
screenshot of every page, and one chart exported through the app's own PNG button (the slide theme).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e import harness as h  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    ap.add_argument("--width", type=int, default=1440)
    ns = ap.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    with h.streamlit_server() as url, h.chromium(width=ns.width, height=1000, downloads=True) as page:
        page.goto(url)
        h.wait_idle(page)
        for name in h.PAGES:
            h.open_page(page, name)
            if page.locator('[data-testid="stException"]').count():
                raise SystemExit(f"{name}: the page shows an exception; not writing screenshots")
            print(h.screenshot(page, ns.out / f"{name}.png").relative_to(ROOT))
            if name == "timeline":
                with page.expect_download(timeout=120_000) as dl:
                    page.locator('[data-testid="stDownloadButton"] button', has_text="PNG").first.click()
                target = ns.out / "export-timeline.png"
                dl.value.save_as(target)
                print(target.relative_to(ROOT))


if __name__ == "__main__":
    main()
