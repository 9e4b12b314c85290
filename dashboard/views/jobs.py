"""Jobs: a sortable, filterable table; each row's job link opens its page."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ett_dashboard import _page
from ett_dashboard.client import ApiError

SINCE = {"": "any time", "24h": "last 24 hours", "7d": "last 7 days", "30d": "last 30 days"}
LIMIT = 1000

st.title("Jobs")
client = _page.client()
facets = _page.facets(client)

cols = st.columns(5)
state = _page.filter_select("State", "state", facets["states"], where=cols[0], open_ended=False)
model = _page.filter_select("Model", "model", facets["models"], where=cols[1])
team = _page.filter_select("Team", "team", facets["teams"], where=cols[2])
since = _page.url_select(
    "Ended", "since", list(SINCE), default="", format_func=SINCE.__getitem__, where=cols[3]
)
search = cols[4].text_input("Job id contains", value=st.query_params.get("q", ""), key="url_q")
if search:
    st.query_params["q"] = search
else:
    st.query_params.pop("q", None)


COLUMNS = [  # the table's columns, in order
    "job",  # the figures next to the id: at 1,400 px a wide id pushed them off-screen
    "state",
    "ett_pct",
    "idle_pct",
    "failure_pct",
    "failures",
    "wall_h",
    "model",
    "team",
    "started",
    "ended",
]


@st.fragment(run_every=_page.settings().refresh_s)
def jobs_view(state: str, model: str, team: str, since: str, search: str) -> None:
    """The table of jobs below the filters, read again every ``refresh_s`` seconds."""
    try:
        rows = client.jobs(state=state, model=model, team=team, since=since, limit=LIMIT)
    except ApiError as exc:
        _page.show_error(exc)
        return
    if not rows:
        if not facets["models"] and not facets["teams"]:
            _page.empty_state()
        else:
            st.info("No job matches these filters.")
        return
    df = pd.DataFrame(rows)
    if search:
        df = df[df["job_id"].str.contains(search, case=False, regex=False)]
    df["job"] = [_page.job_url(j) for j in df["job_id"]]
    df["started"] = pd.to_datetime(df["alloc"], unit="s", utc=True)
    df["ended"] = pd.to_datetime(df["end"], unit="s", utc=True)
    df["wall_h"] = df["wall_s"] / 3600.0
    shown = df[COLUMNS]
    st.caption(
        f"{len(df)} jobs"
        + (f" (the newest {LIMIT})" if len(rows) >= LIMIT else "")
        + ". Click a column header to sort; click a job to open it."
    )
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        height=min(38 + 35 * len(shown), 700),
        column_config={
            "job": st.column_config.LinkColumn(
                "job", display_text=r"/job\?job=(.*)", width="large"
            ),
            "started": st.column_config.DatetimeColumn("started (UTC)", format="YYYY-MM-DD HH:mm"),
            "ended": st.column_config.DatetimeColumn("ended (UTC)", format="YYYY-MM-DD HH:mm"),
            "wall_h": st.column_config.NumberColumn("wall hours", format="%.2f"),
            "ett_pct": st.column_config.NumberColumn("ETT %", format="%.1f"),
            "idle_pct": st.column_config.NumberColumn("idle %", format="%.1f"),
            "failure_pct": st.column_config.NumberColumn("failure %", format="%.1f"),
        },
    )


jobs_view(state, model, team, since, search)
