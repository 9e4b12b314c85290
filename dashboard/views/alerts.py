"""Alerts: firing and resolved ETT regression alerts, each linked to its jobs and component."""

from __future__ import annotations

import streamlit as st

from ett_dashboard import _page
from ett_dashboard.client import ApiError

st.title("Alerts")
client = _page.client()


@st.fragment(run_every=_page.settings().refresh_s)
def alerts_view() -> None:
    try:
        data = client.alerts()
    except ApiError as exc:
        _page.show_error(exc)
        return
    if data is None:
        st.info(
            "Alerting is not configured: this collector has no /api/v1/alerts endpoint. "
            "The Fleet page still shows where time is lost."
        )
        return
    items = data.get("alerts", []) if isinstance(data, dict) else data
    firing = [a for a in items if a.get("state", "firing") == "firing"]
    resolved = [a for a in items if a.get("state") == "resolved"]
    st.subheader(f"Firing ({len(firing)})")
    if not firing:
        st.success("No alert is firing.")
    for a in firing:
        st.warning(_page.alert_line(a))
    st.subheader(f"Resolved ({len(resolved)})")
    for a in resolved:
        st.markdown("- " + _page.alert_line(a))


alerts_view()
