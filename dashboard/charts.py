"""Charts as pure functions: data frames in, Altair charts out (no Streamlit, no I/O), all made
by one builder (:func:`chart`: a mark, its encodings, a title and a height).

Every component keeps one colour on every chart, and productive time is always green.
"""

from __future__ import annotations

import math
from typing import Any

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


LEGEND_COLUMNS = 4
"""Columns of a component legend below a chart: one row was cut off at 1400 px, and five
columns cut the last ones ("sh", "pu") off the Fleet page's lost-time chart in a 700 px window;
four fit there, in four rows of all 13 components."""

LANE_STEP = 34
"""Pixels per lane of a Gantt chart: room for every lane's label (a shorter lane loses it)."""


def _component_color(values: pd.Series, legend: bool = True) -> alt.Color:
    """Colour by ``component`` with the fixed colours (legend below the chart in
    :data:`LEGEND_COLUMNS` columns, so that no entry is cut off; or none)."""
    return alt.Color(
        "component:N",
        scale=_component_scale(values),
        legend=alt.Legend(orient="bottom", title=None, columns=LEGEND_COLUMNS) if legend else None,
    )


def _lanes(field: str, sort: Any) -> alt.Y:
    """A nominal y axis whose every label shows (Vega-Lite would drop overlapping ones)."""
    return alt.Y(field, sort=sort, title=None, axis=alt.Axis(labelOverlap=False))


def chart(
    df: pd.DataFrame,
    mark: str,
    title: str | None = None,
    height: int | alt.Step | None = None,
    mark_args: dict[str, Any] | None = None,
    **encoding: Any,
) -> alt.Chart:
    """The one builder of every chart here: ``mark`` (Altair's ``mark_<mark>``, with
    ``mark_args``) over ``df``, with Altair's encoding channels, an optional title and height."""
    base = alt.Chart(df, title=title) if title else alt.Chart(df)
    out: alt.Chart = getattr(base, f"mark_{mark}")(**(mark_args or {})).encode(**encoding)
    return out.properties(height=height) if height is not None else out


UTC = alt.Scale(type="utc")
"""Time axes in UTC, as every time the pages print (the browser's zone put a job that started
at 03:53 UTC at "08 PM" the day before in Los Angeles)."""


def utc_x(field: str, **kwargs: Any) -> alt.X:
    """A time ``x`` channel on the UTC scale, titled "UTC" unless ``title`` says otherwise."""
    return alt.X(field, scale=UTC, **({"title": "UTC"} | kwargs))


def _tip(field: str, title: str | None = None, fmt: str | None = None) -> alt.Tooltip:
    """A tooltip line (``fmt``: a d3 number or time format; a time is read in UTC)."""
    args: dict[str, Any] = {"title": title} if title else {}
    if field.endswith(":T"):  # to the second, in UTC (a bare time field reads local)
        args["timeUnit"] = alt.TimeUnitParams(unit="yearmonthdatehoursminutesseconds", utc=True)
    return alt.Tooltip(field, format=fmt, **args) if fmt else alt.Tooltip(field, **args)


_TIME = utc_x("t:T")
_FROM = _tip("t:T", "from", "%Y-%m-%d %H:%M UTC")
_GPU_H = _tip("lost_gpu_h:Q", "GPU-hours", ",.2f")


def _pct_domain(values: pd.Series) -> list[float]:
    """The values' extent with a margin of a tenth of it (at least 1 point), within 0 to 100."""
    known = values.dropna()
    if known.empty:
        return [0.0, 100.0]
    lo, hi = float(known.min()), float(known.max())
    pad = max(1.0, (hi - lo) / 10)
    return [max(0.0, float(math.floor(lo - pad))), min(100.0, float(math.ceil(hi + pad)))]


def pct_lines(df: pd.DataFrame, column: str, title: str) -> ChartLike:
    """A line per ``key`` of ``column`` (a percentage) over ``t``. The axis spans the values
    (within 0 to 100), not always 0 to 100: on a fixed axis an ETT drop from 94.8 % to 85.7 %
    was a flat line near the top."""
    return chart(
        df,
        "line",
        title,
        220,
        {"point": True},
        x=_TIME,
        y=alt.Y(f"{column}:Q", title="%", scale=alt.Scale(domain=_pct_domain(df[column]))),
        color=alt.Color("key:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=[_FROM, "key:N", _tip(f"{column}:Q", title, ".1f")],
    )


BAR_GAP = 0.08
"""The share of a bucket left blank after its bar, so that neighbouring buckets stay apart."""


def lost_stacked(df: pd.DataFrame, bucket_s: float = 86400.0) -> ChartLike:
    """Lost GPU-hours per bucket ``t`` (``bucket_s`` long), stacked by component. Each bar
    spans its bucket (a day's bar was a hairline on a time axis of a week); a day's axis names
    days, an hour's hours."""
    df = df.assign(t_end=df["t"] + pd.Timedelta(seconds=bucket_s * (1 - BAR_GAP)))
    days = bucket_s >= 86400
    ticks: dict[str, Any] = {"tickCount": {"interval": "day", "step": 1}} if days else {}
    return chart(
        df,
        "bar",
        "Lost GPU-hours by component over time",
        280,
        x=utc_x("t:T", axis=alt.Axis(format="%b %d" if days else "%H:%M", **ticks)),
        x2="t_end:T",
        y=alt.Y("sum(lost_gpu_h):Q", title="GPU-hours", stack="zero"),
        color=_component_color(df["component"]),
        tooltip=[_FROM, "component:N", _GPU_H],
    )


def ranked_bars(
    df: pd.DataFrame,
    title: str,
    lane: str,
    value: alt.X,
    tooltip: list[Any],
    *,
    step: int,
    color: alt.Color | None = None,
    mark_args: dict[str, Any] | None = None,
) -> alt.Chart:
    """Horizontal bars of ``value``, one ``lane`` (a nominal field) per row of ``df``, the
    largest on top, every lane ``step`` pixels tall and labelled."""
    colored = {"color": color} if color is not None else {}
    y = _lanes(lane, "-x")
    return chart(
        df, "bar", title, alt.Step(step), mark_args, y=y, x=value, tooltip=tooltip, **colored
    )


def lost_ranked(df: pd.DataFrame) -> ChartLike:
    """Lost GPU-hours per component over the window, largest on top."""
    tooltip = [
        "component:N",
        _GPU_H,
        _tip("idle_s:Q", "idle s", ",.0f"),
        _tip("failure_s:Q", "failure s", ",.0f"),
    ]
    x = alt.X("lost_gpu_h:Q", title="GPU-hours")
    color = _component_color(df["component"], legend=False)
    title = "Lost GPU-hours, ranked"
    return ranked_bars(df, title, "component:N", x, tooltip, step=22, color=color)


def gantt(
    df: pd.DataFrame,
    lane: alt.Y,
    tooltip: list[Any],
    bar_height: int,
    title: str | None = None,
    opacity: float | None = None,
    time_format: str | None = None,
) -> alt.Chart:
    """Bars from ``start`` to ``end`` (datetimes) in one ``lane`` per row of the y channel,
    coloured by ``component`` with the fixed colours; ``time_format`` (a d3 time format) for
    the axis's labels, else Vega-Lite's own."""
    axis = alt.Axis(format=time_format) if time_format else alt.Undefined
    return chart(
        df,
        "bar",
        title,
        mark_args={"height": bar_height} | ({"opacity": opacity} if opacity else {}),
        x=utc_x("start:T", axis=axis),
        x2="end:T",
        y=lane,
        color=_component_color(df["component"]),
        tooltip=tooltip,
    )


LABEL_GAP = 0.08
"""The least share of a timeline's span between two attempt labels: closer ones overlapped
("attempt 0" and "attempt 1" of a restart 20 minutes into an 8-hour job read "atteampt01");
an attempt without its label keeps its rule, named in the rule's tooltip."""


def _spaced(starts: pd.DataFrame, span: pd.Timedelta) -> pd.DataFrame:
    """The rows of ``starts`` (sorted by ``start``) whose label has room after the previous."""
    keep, last = [], None
    for i, start in enumerate(starts["start"]):
        if last is None or start - last >= span * LABEL_GAP:
            keep.append(i)
            last = start
    return starts.iloc[keep]


SECONDS_SHOWN_UP_TO = pd.Timedelta(minutes=20)
"""An axis over at most this long reads seconds: Vega-Lite puts its ticks 10 to 30 s apart
there, which ``%H:%M`` labelled "16:33 16:33 16:33 16:34" (a 5-minute job's timeline)."""


def clock_format(times: pd.Series) -> str:
    """A time axis's labels for ``times``: the clock with seconds over a short span, the clock
    within a day, the date too past one (Vega-Lite's own mixed "03 AM" with "03:30")."""
    span = times.max() - times.min() if len(times) else pd.Timedelta(0)
    if span <= SECONDS_SHOWN_UP_TO:
        return "%H:%M:%S"
    return "%H:%M" if span <= pd.Timedelta(days=1) else "%b %d %H:%M"


def clock_x(field: str, times: pd.Series) -> alt.X:
    """A UTC time ``x`` channel whose labels read :func:`clock_format` of ``times``."""
    return utc_x(field, axis=alt.Axis(format=clock_format(times)))


def timeline(df: pd.DataFrame) -> ChartLike:
    """The job's segments as a Gantt chart: one lane per category, coloured by component,
    a dashed rule and a label at each attempt's start.

    ``df``: ``start``, ``end`` (datetimes), ``category``, ``component``, ``attempt``, ``seconds``.
    """
    bars = gantt(
        df,
        _lanes("category:N", CATEGORY_ORDER),
        [
            "attempt:Q",
            "category:N",
            "component:N",
            "kind:N",
            _tip("seconds:Q", "seconds", ",.1f"),
            _tip("start:T", fmt="%H:%M:%S UTC"),
            _tip("end:T", fmt="%H:%M:%S UTC"),
        ],
        bar_height=22,
        time_format=clock_format(pd.concat([df["start"], df["end"]])),
    )
    starts = df.groupby("attempt", as_index=False).agg(start=("start", "min"))
    starts["label"] = "attempt " + starts["attempt"].astype(str)
    rules = chart(
        starts,
        "rule",
        mark_args={"strokeDash": [4, 3], "color": "#555"},
        x=utc_x("start:T"),
        tooltip=["label:N", _tip("start:T", "allocated", "%Y-%m-%d %H:%M:%S UTC")],
    )
    labels = chart(
        _spaced(starts, df["end"].max() - df["start"].min()),
        "text",
        mark_args={"align": "left", "dx": 3, "dy": -6, "color": "#333"},
        x=utc_x("start:T"),
        y=alt.value(0),
        text="label:N",
    )
    return alt.LayerChart(layer=[bars, rules, labels], height=alt.Step(LANE_STEP))


def startup_gantt(phases: pd.DataFrame, firsts: pd.DataFrame, title: str) -> ChartLike:
    """Start-up phases per rank (one lane per rank), first batches as black ticks.

    ``phases``: ``rank_label``, ``phase``, ``component``, ``start``, ``end``, ``seconds``;
    ``firsts``: ``rank_label``, ``at``.
    """
    lane = _lanes("rank_label:N", None)
    tooltip = ["rank_label:N", "phase:N", "component:N", _tip("seconds:Q", "seconds", ",.2f")]
    # seconds of one start-up: Vega-Lite's own labels read "04:33" for 16:33 (a 12-hour clock
    # without AM/PM)
    bars = gantt(
        phases, lane, tooltip, bar_height=14, title=title, opacity=0.85, time_format="%H:%M:%S"
    )
    if firsts.empty:
        return bars.properties(height=alt.Step(26))
    ticks = chart(
        firsts,
        "tick",
        mark_args={"color": "black", "thickness": 3, "size": 20},
        x=utc_x("at:T"),
        y=alt.Y("rank_label:N", sort=None),
        tooltip=["rank_label:N", _tip("at:T", "first batch", "%H:%M:%S UTC")],
    )
    return alt.LayerChart(layer=[bars, ticks], height=alt.Step(26))


def checkpoint_bars(df: pd.DataFrame) -> ChartLike:
    """Per checkpoint step: blocking seconds (the loop waits) and persist seconds (background).

    ``df``: ``label``, ``part`` (blocking or persist), ``seconds``.
    """
    return chart(
        df,
        "bar",
        "Checkpoint saves: blocking vs persist",
        240,
        x=alt.X("label:N", title=None, sort=None),
        y=alt.Y("seconds:Q", title="seconds", stack="zero"),
        color=alt.Color(
            "part:N",
            scale=alt.Scale(domain=["blocking", "persist"], range=["#1f77b4", "#aec7e8"]),
            legend=alt.Legend(title=None),
        ),
        tooltip=["label:N", "part:N", _tip("seconds:Q", fmt=",.2f")],
    )


def whatif_curve(df: pd.DataFrame, marks: pd.DataFrame) -> ChartLike:
    """Projected lost GPU-hours per day against the checkpoint interval, with rules at the
    intervals in ``marks`` (``interval_min``, ``label``)."""
    line = chart(
        df,
        "line",
        "Projected lost GPU-hours per day of training",
        x=alt.X("interval_min:Q", title="checkpoint interval (minutes)"),
        y=alt.Y("gpu_h_per_day:Q", title="GPU-hours / day"),
        tooltip=[_tip("interval_min:Q", fmt=",.1f"), _tip("gpu_h_per_day:Q", fmt=",.2f")],
    )
    rules = chart(
        marks,
        "rule",
        mark_args={"strokeDash": [5, 3]},
        x="interval_min:Q",
        color=alt.Color("label:N", legend=alt.Legend(title=None)),
    )
    return alt.LayerChart(layer=[line, rules], height=280)
