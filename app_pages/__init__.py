"""Streamlit pages (one thin file each) and the small shared helpers they use."""
