"""Fleet: where the GPU hours went, what to fix first, and what is alerting now."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from ett_collector.schemas import NO_LABEL
from ett_dashboard import _format as fmt
from ett_dashboard import _loop, _page, charts
from ett_dashboard.client import ApiError

WINDOWS = {"6h": "last 6 hours", "24h": "last 24 hours", "7d": "last 7 days", "30d": "last 30 days"}
BYS = {"fleet": "whole fleet", "model": "model", "team": "team"}

st.title("Fleet")
client = _page.client()
facets = _page.facets(client)

cols = st.columns(5)
window = _page.url_select(
    "Time window",
    "window",
    list(WINDOWS),
    default="7d",
    format_func=WINDOWS.__getitem__,
    where=cols[0],
)
by = _page.url_select(
    "ETT per", "by", list(BYS), default="fleet", format_func=BYS.__getitem__, where=cols[1]
)
model = _page.filter_select("Model", "model", facets["models"], where=cols[2])
team = _page.filter_select("Team", "team", facets["teams"], where=cols[3])
state = _page.filter_select("State", "state", facets["states"], where=cols[4], open_ended=False)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if not df.empty:
        df["t"] = pd.to_datetime(df["t"], unit="s", utc=True)
    return df


def _headline(series: pd.DataFrame, data: dict[str, Any]) -> None:
    """Fleet ETT, idle and failure % of the window's wall time, and its lost GPU-hours."""
    prod, idle, fail = (float(series[c].sum()) for c in ("productive_s", "idle_s", "failure_s"))
    wall = prod + idle + fail
    lost_gpu_h = sum(r["lost_gpu_h"] for r in data["components"])
    m = st.columns(4)
    m[0].metric("Fleet ETT", fmt.pct(100 * prod / wall if wall else None))
    m[1].metric("Idle", fmt.pct(100 * idle / wall if wall else None))
    m[2].metric("Failure", fmt.pct(100 * fail / wall if wall else None))
    m[3].metric("Lost GPU-hours", f"{lost_gpu_h:,.1f}")


def _trends(series: pd.DataFrame, data: dict[str, Any], by: str) -> None:
    """ETT, idle and failure % per bucket, then lost GPU-hours by component."""
    step = "hour" if data["bucket_s"] == 3600 else "day"
    series["key"] = series["key"].fillna("fleet" if by == "fleet" else NO_LABEL)
    c = st.columns(3)
    c[0].altair_chart(charts.pct_lines(series, "ett_pct", f"ETT % per {step}"), width="stretch")
    c[1].altair_chart(charts.pct_lines(series, "idle_pct", f"Idle % per {step}"), width="stretch")
    c[2].altair_chart(
        charts.pct_lines(series, "failure_pct", f"Failure % per {step}"), width="stretch"
    )
    st.caption(
        "Lost time is idle plus failure time. GPU-hours = seconds × ranks of the attempt "
        "(a 64-rank job's idle minute costs 64 GPU-minutes)."
    )
    lost = _frame(data["lost_by_component"])
    if not lost.empty:
        left, right = st.columns([3, 2])
        left.altair_chart(charts.lost_stacked(lost, data["bucket_s"]), width="stretch")
        right.altair_chart(charts.lost_ranked(pd.DataFrame(data["components"])), width="stretch")


def _worst_jobs(data: dict[str, Any]) -> None:
    """The jobs that lost the most in the window, each linked to its Job page."""
    st.subheader("Worst jobs of the window")
    worst = pd.DataFrame(data["worst_jobs"])
    if worst.empty:
        return
    worst["job"] = [_page.job_url(j) for j in worst["job_id"]]
    worst["lost_h"] = worst["lost_s"] / 3600.0
    st.dataframe(
        worst[["job", "state", "model", "team", "ett_pct", "lost_h", "lost_gpu_h"]],
        hide_index=True,
        width="stretch",
        column_config={
            "job": st.column_config.LinkColumn("job", display_text=r"/job\?job=(.*)"),
            "ett_pct": st.column_config.NumberColumn("ETT % (job)", format="%.1f"),
            "lost_h": st.column_config.NumberColumn("lost hours in window", format="%.2f"),
            "lost_gpu_h": st.column_config.NumberColumn("lost GPU-hours", format="%.1f"),
        },
    )


def _alerts_now() -> bool:
    """The alerts firing now; False when the collector could not be read (error shown)."""
    st.subheader("Alerts firing now")
    try:  # read after the figures above are on the page
        alerts = client.alerts()
    except ApiError as exc:
        _page.show_error(exc)
        return False
    if alerts is None:
        st.caption("Alerting is not configured on this collector (no /api/v1/alerts).")
        return True
    items = alerts.get("alerts", []) if isinstance(alerts, dict) else alerts
    firing = [a for a in items if a.get("state", "firing") == "firing"]
    if not firing:
        st.success("No alert is firing.")
    for a in firing:  # with its jobs, each a link to its page, as the Alerts page lists it
        st.warning(_page.alert_line(a))
    if items:
        st.markdown("[Every alert, resolved ones too: the Alerts page](/alerts)")
    return True


@st.fragment(run_every=_page.settings().refresh_s)
def fleet_view(window: str, by: str, model: str, team: str, state: str) -> None:
    """The page below its filters, read again every ``refresh_s`` seconds."""
    try:
        data = client.fleet(since=window, by=by, model=model, team=team, state=state, limit=10)
    except ApiError as exc:
        _page.show_error(exc)
        return
    series = _frame(data["series"])
    if series.empty:
        if not facets["models"] and not facets["teams"]:
            _page.empty_state()
        else:
            st.info("No job ran in this window with these filters: widen the window or clear them.")
        return
    _headline(series, data)
    _trends(series, data, by)
    _worst_jobs(data)
    st.subheader("Slow time by model (inside the loop)")
    _loop.fleet_section(client, window, model, team)
    if _alerts_now():
        st.caption(f"Refreshes every {_page.settings().refresh_s:g} s.")


fleet_view(window, by, model, team, state)
