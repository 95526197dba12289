"""The dashboard's one script body, run on every Streamlit rerun by `app.py` (a clone) and `fuselens/dashboard.py`
(`fuselens app`, an installed wheel), so both start the same pages.

This only wires things: page config, the bundled samples on a session's first run, the sidebar trace manager and
st.navigation over one thin file per page in app_pages/. The analysis lives in analyzer/ (no streamlit there).
"""

from __future__ import annotations

import streamlit as st

from app_core import export, keys, nav, samples, share, sidebar
from fuselens.paths import assets_dir


def _open_default() -> None:
    """The Hugging Face GEGLU case, already compared (parsed once per server)."""
    sets = samples.discover()
    if sets:
        samples.load_set(sets[0], variants=samples.OPENING_VARIANTS)


def run() -> None:
    # A local favicon: a :material/…: or emoji icon makes every browser fetch it from a font/CDN host (the app must
    # work fully offline and fetch nothing).
    st.set_page_config(page_title="FuseLens", page_icon=str(assets_dir() / "favicon.png"), layout="wide")
    export.prewarm()  # from the server's first session on, so the first PNG click finds kaleido's Chromium up
    if keys.STARTED not in st.session_state:
        # First run of a session: what a shared link names (app_core.share), else the default case.
        st.session_state[keys.STARTED] = True
        share.apply_on_first_run(_open_default)

    # Narrower page margins than Streamlit's 5rem / 6rem: at 1280 px with the sidebar open the main column gains
    # ~100 px, which is what keeps the tables inside the page on a laptop screen or a 16:10 slide (local CSS).
    st.html(
        "<style>[data-testid='stMainBlockContainer']{padding-left:2rem;padding-right:2rem;padding-top:2.5rem;"
        "max-width:none}</style>"
    )
    sidebar.load_requested_sample()
    sidebar.render()
    page = st.navigation(nav.pages(), position="sidebar")
    share.sync()  # widget values (candidate, step) are this run's already; before page.run, which may st.stop()
    page.run()
