"""Streamlit pages, one thin file each (the registry is app_core.nav; their helpers live in app_core)."""
