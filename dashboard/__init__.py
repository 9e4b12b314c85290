"""The live Streamlit dashboard over the collector's HTTP read API (``ett dashboard``).

Pages (``views/``, a folder Streamlit does not scan: ``app.py``'s navigation alone names
them) hold UI only; data comes through :mod:`ett_dashboard.client` (one small client
with short-lived caching); charts are pure functions from data frames to Altair charts
(:mod:`ett_dashboard.charts`).
"""
