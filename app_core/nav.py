"""The page registry, in one place so any page can st.switch_page() to another (Profile → Compare)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

_DIR = Path(__file__).resolve().parent.parent / "app_pages"  # the page files

# (file, title, icon, url path). Order = sidebar order.
PAGES = (
    ("overview.py", "Overview", ":material/dashboard:", "overview"),
    ("timeline.py", "Timeline", ":material/view_timeline:", "timeline"),
    ("compare.py", "Compare", ":material/compare_arrows:", "compare"),
    ("plan.py", "Fusion plan", ":material/checklist:", "plan"),
    ("kernels.py", "Kernels", ":material/table_rows:", "kernels"),
    ("roofline.py", "Roofline", ":material/show_chart:", "roofline"),
    ("profile.py", "Profile", ":material/play_circle:", "profile"),
)


def pages() -> list:
    return [st.Page(str(_DIR / f), title=t, icon=i, url_path=u, default=(f == "overview.py")) for f, t, i, u in PAGES]


def page(file: str):
    """The st.Page for `file` (e.g. 'compare.py'), for st.switch_page."""
    for f, t, i, u in PAGES:
        if f == file:
            return st.Page(str(_DIR / f), title=t, icon=i, url_path=u, default=(f == "overview.py"))
    raise KeyError(file)
