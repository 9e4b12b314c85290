"""Charts of what happens inside the training loop (``docs/metrics.md``, "Inside the loop"), pure
as :mod:`.charts` is: data frames in, Altair charts out.

- :func:`throughput`: samples per second of one rank over time, a line per rank for a small job,
  else the band from the slowest to the fastest rank with the median rank as a line;
- :func:`step_time`: the job's step time over time against its ideal step time;
- :func:`slow_by_model`: the models ranked by the slow time their jobs lost.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from .charts import ChartLike, _tip, chart, clock_x, ranked_bars

_FROM = _tip("t:T", "from", "%Y-%m-%d %H:%M:%S UTC")
BAND_COLOR = "#1f77b4"
IDEAL_COLOR = "#2ca02c"
_SEGMENT = alt.Detail("segment:N")
"""A line per stretch of data: no line crosses the empty buckets between two (downtime)."""
HEIGHT = 240
"""Pixels of the job's two loop charts (the whole chart, title and axes included)."""


def throughput(df: pd.DataFrame, band: pd.DataFrame) -> ChartLike:
    """Per-rank throughput over time.

    ``df``: ``t`` (datetime), ``rank`` (label), ``samples_per_s``, one row per rank and bucket
    (empty for a large job); ``band``: ``t``, ``min``, ``median``, ``max`` per bucket.
    """
    title = "Throughput per rank (samples / s)"
    y = alt.Y("samples_per_s:Q", title="samples / s per rank")
    time = clock_x("t:T", band["t"] if df.empty else df["t"])
    if not df.empty:
        return chart(
            df,
            "line",
            title,
            HEIGHT,
            {"point": False},
            x=time,
            y=y,
            color=alt.Color("rank:N", title=None, legend=alt.Legend(orient="right")),
            # ranks that step alike draw one line over another: a dash per rank keeps each seen
            strokeDash=alt.StrokeDash("rank:N", title=None, legend=alt.Legend(orient="right")),
            detail=_SEGMENT,
            tooltip=[_FROM, "rank:N", _tip("samples_per_s:Q", "samples / s", ",.1f")],
        )
    area = chart(
        band,
        "area",
        mark_args={"opacity": 0.25, "color": BAND_COLOR},
        x=time,
        y=alt.Y("min:Q", title="samples / s per rank"),
        y2="max:Q",
        detail=_SEGMENT,
        tooltip=[
            _FROM,
            _tip("min:Q", "slowest rank", ",.1f"),
            _tip("median:Q", "median rank", ",.1f"),
            _tip("max:Q", "fastest rank", ",.1f"),
        ],
    )
    line = chart(
        band, "line", mark_args={"color": BAND_COLOR}, x=time, y="median:Q", detail=_SEGMENT
    )
    return alt.LayerChart(layer=[area, line], height=HEIGHT, title=f"{title}: band and median")


def step_time(df: pd.DataFrame, ideal_s: float | None) -> ChartLike:
    """The median rank's step time per bucket (``df``: ``t``, ``step_ms``), with the ideal
    step time as a dashed rule."""
    title = "Step time (ms) against the ideal step (dashed)"
    time = clock_x("t:T", df["t"])
    line = chart(
        df,
        "line",
        mark_args={"point": True},
        x=time,
        y=alt.Y(
            "step_ms:Q",
            title="ms per step",
            scale=alt.Scale(zero=False),
            axis=alt.Axis(format=",.1f"),
        ),
        detail=_SEGMENT,
        tooltip=[_FROM, _tip("step_ms:Q", "step (ms)", ",.2f")],
    )
    if ideal_s is None:
        return line.properties(height=HEIGHT, title=title)
    rule = chart(
        pd.DataFrame({"ideal_ms": [1000.0 * ideal_s]}),
        "rule",
        mark_args={"strokeDash": [6, 3], "color": IDEAL_COLOR},
        y="ideal_ms:Q",
        tooltip=[_tip("ideal_ms:Q", "ideal step (ms)", ",.2f")],
    )
    return alt.LayerChart(layer=[line, rule], height=HEIGHT, title=title)


def slow_by_model(df: pd.DataFrame) -> ChartLike:
    """Slow hours per model (``df``: ``model``, ``slow_h``, ``slow_pct``), largest on top."""
    tooltip = [
        "model:N",
        _tip("slow_h:Q", "slow hours", ",.3f"),
        _tip("slow_pct:Q", "% of stepping time", ",.2f"),
    ]
    x = alt.X("slow_h:Q", title="hours slower than each job's ideal step")
    title = "Slow time lost inside the loop, by model (hours)"
    return ranked_bars(df, title, "model:N", x, tooltip, step=24, mark_args={"color": "#d62728"})
