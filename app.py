"""FuseLens dashboard: `streamlit run app.py`. What did kernel fusion buy us, and where is the rest?

This file only wires things: page config, the bundled samples on a session's first run, the sidebar trace manager
and st.navigation over one thin file per page in app_pages/. The analysis lives in analyzer/ (no streamlit there).
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

# `streamlit run app.py` puts the app's folder on sys.path; make it explicit so `analyzer` and `app_pages` import
# the same way under AppTest, the browser tests and any working directory.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from app_pages import nav, samples, share, sidebar  # noqa: E402

# A local favicon: a :material/…: or emoji icon makes every browser fetch it from a font/CDN host (the app must
# work fully offline and fetch nothing).
st.set_page_config(page_title="FuseLens", page_icon=str(Path(_HERE) / "assets" / "favicon.png"), layout="wide")


def _open_default() -> None:
    """The Hugging Face GEGLU case, already compared (parsed once per server)."""
    sets = samples.discover()
    if sets:
        samples.load_set(sets[0], variants=samples.OPENING_VARIANTS)


if "fl_started" not in st.session_state:
    # First run of a session: what a shared link names (app_pages.share), else the default case.
    st.session_state["fl_started"] = True
    share.apply_on_first_run(_open_default)

# Narrower page margins than Streamlit's 5rem / 6rem: at 1280 px with the sidebar open the main column gains ~100 px,
# which is what keeps the tables inside the page on a laptop screen or a 16:10 slide (local CSS, nothing fetched).
st.html(
    "<style>[data-testid='stMainBlockContainer']{padding-left:2rem;padding-right:2rem;padding-top:2.5rem;"
    "max-width:none}</style>"
)
sidebar.load_requested_sample()
sidebar.render()
page = st.navigation(nav.pages(), position="sidebar")
share.sync()  # widget values (candidate, step) are this run's already; before page.run, which may st.stop()
page.run()
