"""Live Streamlit dashboard over the collector's read API (not built yet: a later issue)."""
