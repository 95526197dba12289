"""Regenerate docs/screenshots/*.png from a real `streamlit run app.py` and Chromium (never by hand).

    python scripts/screenshots.py [--out docs/screenshots] [--sizes 1600x1000,1280x800] [--set NAME --prefix P]

Opens the dashboard on the bundled HF GEGLU case (eager vs compile vs Liger vs FuseLens) and saves a full-page
screenshot of every page at each window size (the first size as `<page>.png`, the others as
`<page>-<W>x<H>.png`), plus charts exported through the app's own PNG buttons (the slide theme). It says, per
page and size, which tables are cut (wider than their visible area) and exits 1 when any is. `--set
gemma_layer_bf16 --prefix layer-` loads another bundled sample set first (its sidebar button, as a user would)
and writes `layer-<page>.png` (no chart exports). `--upload A.json.gz B.json.gz --pages compare,timeline,kernels`
uploads traces through the sidebar instead (e.g. bench/make_model_trace.py's whole-model pair) and shoots those pages.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e import harness as h  # noqa: E402

EXPORTS = {"timeline": ("export-timeline.png", 0), "compare": ("export-time-breakdown.png", 1)}


def load_set(page, name: str) -> None:
    """Click a bundled sample set's button in the sidebar (opening the 'Sample sets' expander if it is closed)."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    button = sidebar.locator(f'[class*="st-key-fl_sample_{name}"] button')
    if not button.count() or not button.first.is_visible():
        sidebar.locator("summary", has_text="Sample sets").first.click()
    button.first.click()
    page.wait_for_timeout(1000)  # the click's rerun starts a beat later; then it loads every variant of the set
    h.wait_idle(page)


def shoot(
    url: str,
    out: Path,
    width: int,
    height: int,
    suffix: str,
    exports: bool,
    sample: str = "",
    prefix: str = "",
    upload: list[Path] | None = None,
    pages: tuple[str, ...] = h.PAGES,
) -> list[str]:
    problems = []
    with h.chromium(width=width, height=height, downloads=True) as page:
        page.goto(url)
        h.wait_idle(page)
        if sample:
            load_set(page, sample)
        if upload:
            h.upload(page, upload)
            # the "samples set aside" toast would sit on the first page's shot
            page.locator('[data-testid="stToast"]').first.wait_for(state="detached", timeout=15_000)
        for name in pages:
            h.open_page(page, name)
            if page.locator('[data-testid="stException"]').count():
                raise SystemExit(f"{name}: the page shows an exception; not writing screenshots")
            problems += [f"{name} at {width}x{height}: {c}" for c in h.cut_tables(page)]
            print(h.screenshot(page, out / f"{prefix}{name}{suffix}.png"))
            if exports and name in EXPORTS:
                target, nth = EXPORTS[name]
                with page.expect_download(timeout=120_000) as dl:
                    page.locator('[data-testid="stDownloadButton"] button', has_text="PNG").nth(nth).click()
                dl.value.save_as(out / target)
                print(out / target)
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    ap.add_argument("--sizes", default="1600x1000,1280x800", help="window sizes, WxH, comma-separated")
    ap.add_argument("--set", default="", help="a sample_traces/ folder to open instead of the default case")
    ap.add_argument("--prefix", default="", help="file name prefix for that set's screenshots, e.g. layer-")
    ap.add_argument("--upload", type=Path, nargs="*", default=[], help="traces to upload instead of a sample set")
    ap.add_argument("--pages", default=",".join(h.PAGES), help="pages to shoot, comma-separated")
    ns = ap.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    sizes = [tuple(int(x) for x in s.lower().split("x")) for s in ns.sizes.split(",") if s]
    problems = []
    with h.streamlit_server() as url:
        for i, (w, hgt) in enumerate(sizes):
            suffix = "" if i == 0 else f"-{w}x{hgt}"
            problems += shoot(
                url,
                ns.out,
                w,
                hgt,
                suffix,
                exports=i == 0 and not ns.set and not ns.upload,
                sample=ns.set,
                prefix=ns.prefix,
                upload=ns.upload,
                pages=tuple(p for p in ns.pages.split(",") if p),
            )
    for p in problems:
        print("CUT:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
