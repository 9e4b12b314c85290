"""Checkpoint advisor: the interval in use against Young's optimum, per model and per job, and
what-if controls that project lost GPU-hours per day (``docs/metrics.md``, "Figures": the
checkpoint interval advice)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from ett_collector.schemas import NO_LABEL
from ett_dashboard import _format as fmt
from ett_dashboard import _page, charts
from ett_dashboard.client import ApiError

DAY_S = 86400.0

st.title("Checkpoint advisor")
st.caption(
    "Per day of training with failure rate λ, blocking B per checkpoint and interval I, the loss "
    "is λ·I/2 (work redone after a failure) + (1 day / I)·B (time blocked saving); it is least "
    "at Young's I* = √(2·B·1 day/λ). GPU-hours = seconds × ranks."
)
client = _page.client()


def lost_gpu_h_per_day(
    interval_s: float, failures_per_day: float, blocking_s: float, ranks: int
) -> float:
    """Projected lost GPU-hours per day of training at checkpoint interval ``interval_s``."""
    seconds = failures_per_day * interval_s / 2.0 + (DAY_S / interval_s) * blocking_s
    return seconds * ranks / 3600.0


def optimum_text(optimal_s: Any, failures: Any, ok: Any, needed: int) -> str:
    """Young's optimum as the API advises it: withheld below ``needed`` failures (the rule of
    ``ett report`` and ``ett checkpoint-advice``; ``ok`` is the API's ``advice_ok``)."""
    if pd.notna(optimal_s) and ok is False:
        return f"not enough failures yet ({int(failures)} of {needed})"
    return fmt.duration(optimal_s)


def _advice() -> Any:
    return client.checkpoint_advice(since=st.query_params.get("since"))


_since = st.query_params.get("since")
if _since is not None:  # a link's window the collector cannot read: said, and the default shown
    try:
        client.checkpoint_advice(since=_since)
    except ApiError as exc:
        if exc.status == 400:
            st.warning(
                f"The link's since '{_page.literal(_since)}' cannot be read as a time or a "
                "length back (7d, 24h, an ISO time): showing the default window."
            )
            st.query_params.pop("since", None)
try:
    data = _advice()
except ApiError as exc:
    _page.show_error(exc)
    _page.watch(_advice, None)  # back by itself once the collector answers
    st.stop()
_page.watch(_advice, data)  # new figures rerun the page; an outage is said
models = pd.DataFrame(data["models"])
if models.empty:
    _page.empty_state()
    st.stop()
models["model"] = models["model"].fillna(NO_LABEL)
needed = int(data.get("min_failures", 0))
model = _page.url_select(
    "Model", "model", list(models["model"]), default=str(models["model"].iloc[0])
)
row = models[models["model"] == model].iloc[0]

st.subheader("Per model")
st.dataframe(
    pd.DataFrame(
        {
            "model": models["model"],
            "jobs": models["jobs"],
            "failures": models["failures"],
            "failures / training day": models["failures_per_day"].round(2),
            "mean blocking": [fmt.duration(v) for v in models["mean_blocking_s"]],
            "interval in use": [fmt.duration(v) for v in models["interval_s"]],
            "Young's optimum": [
                optimum_text(v, n, ok, needed)
                for v, n, ok in zip(
                    models["optimal_interval_s"],
                    models["failures"],
                    models["advice_ok"],
                    strict=True,
                )
            ],
        }
    ),
    hide_index=True,
    width="stretch",
)

st.subheader(f"What if: {_page.literal(model)}")
c = st.columns(4)
in_use = float(row["interval_s"]) if pd.notna(row["interval_s"]) else 600.0
trusted = bool(row["advice_ok"]) and pd.notna(row["failures_per_day"])
rate = float(row["failures_per_day"]) if trusted else 1.0
if not trusted:
    st.info(
        f"Not enough failures yet ({int(row['failures'])} of {needed}) to measure "
        f"{_page.literal(model)}'s "
        "failure rate: the what-if starts from 1 failure per training day; enter your own."
    )
block = float(row["mean_blocking_s"]) if pd.notna(row["mean_blocking_s"]) else 10.0
interval_min = c[0].number_input("Interval (minutes)", 0.1, 1440.0, round(in_use / 60, 1), 1.0)
rate = c[1].number_input("Failures per training day", 0.01, 500.0, round(max(rate, 0.01), 2), 0.5)
block = c[2].number_input("Blocking per checkpoint (s)", 0.01, 3600.0, round(block, 2), 1.0)
ranks = int(c[3].number_input("Ranks", 1, 100_000, int(row["ranks"] or 1), 1))
interval = interval_min * 60.0
optimum = math.sqrt(2.0 * block * DAY_S / rate)
now_cost = lost_gpu_h_per_day(interval, rate, block, ranks)
best_cost = lost_gpu_h_per_day(optimum, rate, block, ranks)
m = st.columns(3)
m[0].metric("Lost at this interval", f"{now_cost:,.2f} GPU-h/day")
m[1].metric("Young's optimum", fmt.duration(optimum), help=f"{best_cost:,.2f} GPU-h/day there")
m[2].metric("A change would save", f"{max(0.0, now_cost - best_cost):,.2f} GPU-h/day")
grid = np.geomspace(max(optimum / 20, 1.0), optimum * 20, 200)
curve = pd.DataFrame(
    {
        "interval_min": grid / 60.0,
        "gpu_h_per_day": [lost_gpu_h_per_day(i, rate, block, ranks) for i in grid],
    }
)
marks = pd.DataFrame(
    {
        "interval_min": [interval / 60.0, optimum / 60.0],
        "label": ["chosen interval", "Young's optimum"],
    }
)
st.altair_chart(charts.whatif_curve(curve, marks), width="stretch")

st.subheader(f"Per job: {_page.literal(model)}")
jobs = pd.DataFrame(data["jobs"])
if not jobs.empty:
    jobs["model"] = jobs["model"].fillna(NO_LABEL)
    jobs = jobs[jobs["model"] == model]
    jobs["job"] = [_page.job_url(j) for j in jobs["job_id"]]
    st.dataframe(
        pd.DataFrame(
            {
                "job": jobs["job"],
                "failures": jobs["failures"],
                "checkpoints": jobs["checkpoints"],
                "interval in use": [fmt.duration(v) for v in jobs["interval_s"]],
                "Young's optimum": [
                    optimum_text(v, n, ok, needed)
                    for v, n, ok in zip(
                        jobs["optimal_interval_s"], jobs["failures"], jobs["advice_ok"], strict=True
                    )
                ],
                "a change would save": [
                    fmt.duration(v) if ok is not False else "—"
                    for v, ok in zip(jobs["saving_s"], jobs["advice_ok"], strict=True)
                ],
            }
        ),
        hide_index=True,
        width="stretch",
        column_config={"job": st.column_config.LinkColumn("job", display_text=r"/job\?job=(.*)")},
    )
