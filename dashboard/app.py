"""The Streamlit entry point (``streamlit run dashboard/app.py``; ``ett dashboard`` does it).

One multipage app: Fleet (the default), Jobs, Job (``/job?job=<id>``), Checkpoint advisor, Alerts.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).resolve().parent / "views"  # not pages/: Streamlit lists that on its own

st.set_page_config(page_title="ETT dashboard", layout="wide")
nav = st.navigation(
    [
        st.Page(PAGES / "fleet.py", title="Fleet", url_path="fleet", default=True),
        st.Page(PAGES / "jobs.py", title="Jobs", url_path="jobs"),
        st.Page(PAGES / "job.py", title="Job", url_path="job"),
        st.Page(PAGES / "advisor.py", title="Checkpoint advisor", url_path="advisor"),
        st.Page(PAGES / "alerts.py", title="Alerts", url_path="alerts"),
    ]
)
nav.run()
