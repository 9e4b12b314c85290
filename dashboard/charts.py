"""Charts as pure functions: data frames in, Altair charts out (no Streamlit, no I/O).

Every component keeps one colour on every chart, and productive time is always green.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

COMPONENT_COLORS: dict[str, str] = {
    "productive": "#2ca02c",
    "scheduler": "#8c564b",
    "runtime": "#7f7f7f",
    "comms": "#17becf",
    "model": "#9467bd",
    "sharding": "#bcbd22",
    "checkpoint": "#1f77b4",
    "compile": "#ff7f0e",
    "data": "#e377c2",
    "eval": "#aec7e8",
    "publish": "#98df8a",
    "failure": "#d62728",
    "other": "#c7c7c7",
}
"""The colour of each component (and of productive time)."""

CATEGORY_ORDER = ["productive", "idle", "failure"]

ChartLike = alt.Chart | alt.LayerChart
"""What the chart functions return (Streamlit's ``st.altair_chart`` takes either)."""


def _component_scale(values: pd.Series) -> alt.Scale:
    present = [c for c in COMPONENT_COLORS if c in set(values)]
    extra = sorted(set(values) - set(present))
    domain = present + extra
    colors = [COMPONENT_COLORS.get(c, "#393b79") for c in domain]
    return alt.Scale(domain=domain, range=colors)


def _component_color(values: pd.Series, legend: bool = True) -> alt.Color:
    """Colour by ``component`` with the fixed colours (legend below the chart, or none)."""
    return alt.Color(
        "component:N",
        scale=_component_scale(values),
        legend=alt.Legend(orient="bottom", title=None) if legend else None,
    )


def pct_lines(df: pd.DataFrame, column: str, title: str) -> ChartLike:
    """A line per ``key`` of ``column`` (a percentage) over ``t``."""
    chart: ChartLike = (
        alt.Chart(df, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("t:T", title=None),
            y=alt.Y(f"{column}:Q", title="%", scale=alt.Scale(domain=[0, 100])),
            color=alt.Color("key:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=[
                alt.Tooltip("t:T", title="from"),
                "key:N",
                alt.Tooltip(f"{column}:Q", format=".1f", title=title),
            ],
        )
        .properties(height=220)
    )
    return chart


def lost_stacked(df: pd.DataFrame) -> ChartLike:
    """Lost GPU-hours per bucket ``t``, stacked by component."""
    chart: ChartLike = (
        alt.Chart(df, title="Lost GPU-hours by component over time")
        .mark_bar()
        .encode(
            x=alt.X("t:T", title=None),
            y=alt.Y("sum(lost_gpu_h):Q", title="GPU-hours", stack="zero"),
            color=_component_color(df["component"]),
            tooltip=[
                alt.Tooltip("t:T", title="from"),
                "component:N",
                alt.Tooltip("lost_gpu_h:Q", format=",.2f", title="GPU-hours"),
            ],
        )
        .properties(height=280)
    )
    return chart


def lost_ranked(df: pd.DataFrame) -> ChartLike:
    """Lost GPU-hours per component over the window, largest on top."""
    chart: ChartLike = (
        alt.Chart(df, title="Lost GPU-hours by component, ranked")
        .mark_bar()
        .encode(
            y=alt.Y("component:N", sort="-x", title=None),
            x=alt.X("lost_gpu_h:Q", title="GPU-hours"),
            color=_component_color(df["component"], legend=False),
            tooltip=[
                "component:N",
                alt.Tooltip("lost_gpu_h:Q", format=",.2f", title="GPU-hours"),
                alt.Tooltip("idle_s:Q", format=",.0f", title="idle s"),
                alt.Tooltip("failure_s:Q", format=",.0f", title="failure s"),
            ],
        )
        .properties(height=280)
    )
    return chart


def timeline(df: pd.DataFrame) -> ChartLike:
    """The job's segments as a Gantt chart: one lane per category, coloured by component.

    ``df``: ``start``, ``end`` (datetimes), ``category``, ``component``, ``attempt``, ``seconds``.
    """
    bars = (
        alt.Chart(df)
        .mark_bar(height=22)
        .encode(
            x=alt.X("start:T", title=None),
            x2="end:T",
            y=alt.Y("category:N", sort=CATEGORY_ORDER, title=None),
            color=_component_color(df["component"]),
            tooltip=[
                "attempt:Q",
                "category:N",
                "component:N",
                "kind:N",
                alt.Tooltip("seconds:Q", format=",.1f", title="seconds"),
                alt.Tooltip("start:T", format="%H:%M:%S"),
                alt.Tooltip("end:T", format="%H:%M:%S"),
            ],
        )
    )
    starts = df.groupby("attempt", as_index=False)["start"].min()
    starts["label"] = "attempt " + starts["attempt"].astype(str)
    rules = alt.Chart(starts).mark_rule(strokeDash=[4, 3], color="#555").encode(x="start:T")
    labels = (
        alt.Chart(starts)
        .mark_text(align="left", dx=3, dy=-6, color="#333")
        .encode(x="start:T", y=alt.value(0), text="label:N")
    )
    chart: ChartLike = (bars + rules + labels).properties(height=150)
    return chart


def startup_gantt(phases: pd.DataFrame, firsts: pd.DataFrame, title: str) -> ChartLike:
    """Start-up phases per rank (one lane per rank), first batches as black ticks.

    ``phases``: ``rank_label``, ``phase``, ``component``, ``start``, ``end``;
    ``firsts``: ``rank_label``, ``at``.
    """
    bars = (
        alt.Chart(phases, title=title)
        .mark_bar(height=14, opacity=0.85)
        .encode(
            x=alt.X("start:T", title=None),
            x2="end:T",
            y=alt.Y("rank_label:N", title=None, sort=None),
            color=_component_color(phases["component"]),
            tooltip=[
                "rank_label:N",
                "phase:N",
                "component:N",
                alt.Tooltip("seconds:Q", format=",.2f", title="seconds"),
            ],
        )
    )
    layers: alt.LayerChart | alt.Chart = bars
    if not firsts.empty:
        ticks = (
            alt.Chart(firsts)
            .mark_tick(color="black", thickness=3, size=20)
            .encode(
                x="at:T",
                y=alt.Y("rank_label:N", sort=None),
                tooltip=[
                    "rank_label:N",
                    alt.Tooltip("at:T", format="%H:%M:%S.%L", title="first batch"),
                ],
            )
        )
        layers = bars + ticks
    chart: ChartLike = layers.properties(height=alt.Step(26))
    return chart


def checkpoint_bars(df: pd.DataFrame) -> ChartLike:
    """Per checkpoint step: blocking seconds (the loop waits) and persist seconds (background).

    ``df``: ``label``, ``part`` (blocking or persist), ``seconds``.
    """
    chart: ChartLike = (
        alt.Chart(df, title="Checkpoint saves: blocking vs persist")
        .mark_bar()
        .encode(
            x=alt.X("label:N", title=None, sort=None),
            y=alt.Y("seconds:Q", title="seconds", stack="zero"),
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=["blocking", "persist"], range=["#1f77b4", "#aec7e8"]),
                legend=alt.Legend(title=None),
            ),
            tooltip=["label:N", "part:N", alt.Tooltip("seconds:Q", format=",.2f")],
        )
        .properties(height=240)
    )
    return chart


def whatif_curve(df: pd.DataFrame, marks: pd.DataFrame) -> ChartLike:
    """Projected lost GPU-hours per day against the checkpoint interval, with rules at the
    intervals in ``marks`` (``interval_min``, ``label``)."""
    line = (
        alt.Chart(df, title="Projected lost GPU-hours per day of training")
        .mark_line()
        .encode(
            x=alt.X("interval_min:Q", title="checkpoint interval (minutes)"),
            y=alt.Y("gpu_h_per_day:Q", title="GPU-hours / day"),
            tooltip=[
                alt.Tooltip("interval_min:Q", format=",.1f"),
                alt.Tooltip("gpu_h_per_day:Q", format=",.2f"),
            ],
        )
    )
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeDash=[5, 3])
        .encode(x="interval_min:Q", color=alt.Color("label:N", legend=alt.Legend(title=None)))
    )
    chart: ChartLike = (line + rules).properties(height=280)
    return chart
