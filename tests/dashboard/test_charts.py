"""Chart specs (pure functions, no server): every axis label and legend entry has room."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("altair", reason="the dashboard extra: pip install -e '.[dashboard]'")
import pandas as pd

from ett_dashboard import charts

COMPONENTS = [c for c in charts.COMPONENT_COLORS if c != "productive"]


def _spec(chart: Any) -> dict[str, Any]:
    out: dict[str, Any] = chart.to_dict()
    return out


def test_ranked_bars_label_every_component() -> None:
    df = pd.DataFrame(
        {"component": COMPONENTS, "lost_gpu_h": range(len(COMPONENTS), 0, -1)}
        | {"idle_s": 0.0, "failure_s": 0.0}
    )
    spec = _spec(charts.lost_ranked(df))
    y = spec["encoding"]["y"]
    assert y["field"] == "component"
    assert y["axis"]["labelOverlap"] is False
    # the height grows with the components: a fixed height squeezed labels out
    assert spec["height"] == {"step": 22}


def test_component_legend_wraps_so_every_entry_shows() -> None:
    t = pd.Timestamp("2026-12-01", tz="UTC")
    df = pd.DataFrame({"t": t, "component": COMPONENTS, "lost_gpu_h": 1.0})
    legend = _spec(charts.lost_stacked(df))["encoding"]["color"]["legend"]
    assert legend["orient"] == "bottom"
    assert legend["columns"] == charts.LEGEND_COLUMNS
    rows = -(-len(COMPONENTS) // charts.LEGEND_COLUMNS)
    assert rows <= 3, "the legend of all components stays short"
    domain = _spec(charts.lost_stacked(df))["encoding"]["color"]["scale"]["domain"]
    assert domain == COMPONENTS


@pytest.mark.parametrize(("bucket_s", "fmt"), [(86400.0, "%b %d"), (3600.0, "%H:%M")])
def test_lost_bars_span_their_bucket(bucket_s: float, fmt: str) -> None:
    t = pd.Timestamp("2026-12-01", tz="UTC")
    df = pd.DataFrame({"t": [t, t], "component": ["data", "eval"], "lost_gpu_h": [1.0, 2.0]})
    chart = charts.lost_stacked(df, bucket_s)
    spec = _spec(chart)
    assert spec["encoding"]["x2"]["field"] == "t_end"
    axis = spec["encoding"]["x"]["axis"]
    assert axis["format"] == fmt
    if bucket_s == 86400.0:  # one tick a day: a 12-hour tick named the same day twice
        assert axis["tickCount"] == {"interval": "day", "step": 1}
    assert spec["encoding"]["x"]["scale"]["type"] == "utc"
    width = chart.data["t_end"] - chart.data["t"]
    assert (width == pd.Timedelta(seconds=bucket_s * (1 - charts.BAR_GAP))).all()


def test_timeline_labels_every_lane() -> None:
    t = pd.Timestamp("2026-12-01", tz="UTC")
    df = pd.DataFrame(
        {
            "start": [t, t + pd.Timedelta(seconds=10), t + pd.Timedelta(seconds=11)],
            "end": [
                t + pd.Timedelta(seconds=10),
                t + pd.Timedelta(seconds=11),
                t + pd.Timedelta(seconds=20),
            ],
            "category": ["productive", "idle", "failure"],
            "component": ["productive", "checkpoint", "failure"],
            "kind": ["train", "checkpoint", "failure"],
            "attempt": [0, 0, 1],
            "seconds": [10.0, 1.0, 9.0],
        }
    )
    spec = _spec(charts.timeline(df))
    bars = spec["layer"][0]
    assert bars["encoding"]["y"]["axis"]["labelOverlap"] is False
    assert bars["encoding"]["y"]["sort"] == ["productive", "idle", "failure"]
    # each lane is tall enough for its label (a 1 s idle lane lost it at a fixed height)
    assert spec["height"] == {"step": charts.LANE_STEP}
    assert bars["mark"]["height"] < charts.LANE_STEP


def _attempts(hours: float, restarts_min: list[float]) -> pd.DataFrame:
    """A job of ``hours`` whose attempts start at 0 and ``restarts_min`` minutes in."""
    t = pd.Timestamp("2026-12-01", tz="UTC")
    starts = [t + pd.Timedelta(minutes=m) for m in [0.0, *restarts_min]]
    ends = [*starts[1:], t + pd.Timedelta(hours=hours)]
    n = len(starts)
    return pd.DataFrame(
        {"start": starts, "end": ends, "category": ["productive"] * n}
        | {"component": ["productive"] * n, "kind": ["train"] * n}
        | {
            "attempt": list(range(n)),
            "seconds": [(e - s).total_seconds() for s, e in zip(starts, ends, strict=True)],
        }
    )


def test_timeline_labels_only_attempts_with_room() -> None:
    # a restart 20 min into an 8.5 h job: its label overlapped the first ("atteampt01")
    spec = _spec(charts.timeline(_attempts(8.5, [20.0, 240.0])))
    rules, labels = spec["layer"][1], spec["layer"][2]
    shown = [row["label"] for row in spec["datasets"][labels["data"]["name"]]]
    assert shown == ["attempt 0", "attempt 2"]
    assert len(spec["datasets"][rules["data"]["name"]]) == 3  # every attempt keeps its rule
    assert any(t.get("field") == "label" for t in rules["encoding"]["tooltip"])


@pytest.mark.parametrize(
    ("hours", "fmt"), [(0.09, "%H:%M:%S"), (8.5, "%H:%M"), (30.0, "%b %d %H:%M")]
)
def test_timeline_axis_reads_one_clock(hours: float, fmt: str) -> None:
    spec = _spec(charts.timeline(_attempts(hours, [])))
    assert spec["layer"][0]["encoding"]["x"]["axis"]["format"] == fmt


@pytest.mark.parametrize(
    ("per_s", "shown"),
    [
        (None, "—"),
        (812.4, "812 samples/s"),
        (13_542.0, "13.5k samples/s"),
        (135_420.0, "135k samples/s"),
        (1_083_812.0, "1.08M samples/s"),
        (2.5e9, "2.50G samples/s"),
    ],
)
def test_a_rate_fits_a_headline_card(per_s: float | None, shown: str) -> None:
    from ett_dashboard import _format as fmt

    assert fmt.rate(per_s) == shown
    assert fmt.rate(per_s, unit="") == shown.removesuffix(" samples/s")


def test_loop_charts_read_one_clock() -> None:
    from ett_dashboard import loop_charts

    t = pd.date_range("2026-12-01 03:00", periods=8, freq="h", tz="UTC")
    steps = pd.DataFrame({"t": t, "step_ms": 250.0, "segment": 0})
    spec = _spec(loop_charts.step_time(steps, 0.25))
    assert spec["layer"][0]["encoding"]["x"]["axis"]["format"] == "%H:%M"
    band = pd.DataFrame({"t": t, "min": 1.0, "median": 2.0, "max": 3.0, "segment": 0})
    spec = _spec(loop_charts.throughput(pd.DataFrame(), band))
    assert spec["layer"][0]["encoding"]["x"]["axis"]["format"] == "%H:%M"


def test_a_percentage_axis_spans_its_values_within_0_and_100() -> None:
    """On a fixed 0-100 axis an ETT drop from 94.8 % to 85.7 % was a flat line at the top."""
    t = pd.to_datetime([0, 3600, 7200], unit="s")
    df = pd.DataFrame({"t": t, "key": ["fleet"] * 3, "ett_pct": [94.8, 85.7, 99.9]})
    y = _spec(charts.pct_lines(df, "ett_pct", "ETT"))["encoding"]["y"]
    assert y["scale"]["domain"] == [84.0, 100.0]
    idle = pd.DataFrame({"t": t, "key": ["fleet"] * 3, "idle_pct": [0.2, 3.0, 1.0]})
    assert _spec(charts.pct_lines(idle, "idle_pct", "idle"))["encoding"]["y"]["scale"][
        "domain"
    ] == [0.0, 4.0]


def test_loop_lines_break_across_a_stretch_without_data() -> None:
    """A job down between two attempts has empty buckets in its series: the per-rank, band and
    step lines start a new segment after them instead of drawing across the gap."""
    from ett_dashboard import _loop, loop_charts

    def bucket(start: float, filled: bool) -> dict[str, Any]:
        if not filled:
            return {"start": start}
        spread = {"min": 90.0, "median": 100.0, "max": 110.0}
        return {"start": start, "ranks": {"0": 100.0, "1": 90.0}, "rank_samples_per_s": spread}

    series = [bucket(60.0 * i, filled) for i, filled in enumerate([1, 1, 0, 0, 1, 1, 0, 1])]
    series[0]["step_s"] = series[7]["step_s"] = 0.25
    ranks, band, steps = _loop._series_frames(series)
    assert list(band["segment"]) == [0, 0, 1, 1, 2]
    assert sorted(set(ranks["segment"])) == [0, 1, 2] and list(steps["segment"]) == [0, 2]
    spec = _spec(loop_charts.throughput(ranks, band))
    assert spec["encoding"]["detail"] == {"field": "segment", "type": "nominal"}
    step = _spec(loop_charts.step_time(steps, None))
    assert step["encoding"]["detail"] == {"field": "segment", "type": "nominal"}


def test_start_up_times_read_on_a_24_hour_clock() -> None:
    """Start-up per rank labelled 16:33 as '04:33' (Vega-Lite's 12-hour default, no AM/PM)."""
    t = pd.Timestamp("2026-12-01 16:32:36", tz="UTC")
    phases = pd.DataFrame(
        {
            "rank_label": ["rank 0"],
            "phase": ["model_init"],
            "component": ["model"],
            "start": [t],
            "end": [t + pd.Timedelta(seconds=70)],
            "seconds": [70.0],
        }
    )
    firsts = pd.DataFrame({"rank_label": ["rank 0"], "at": [t + pd.Timedelta(seconds=70)]})
    spec = _spec(charts.startup_gantt(phases, firsts, "start-up"))
    bars = spec["layer"][0]
    assert bars["encoding"]["x"]["axis"]["format"] == "%H:%M:%S"


def test_time_axes_and_tooltips_read_utc() -> None:
    """The pages print UTC, while the charts drew the browser's zone: in Los Angeles a job
    that started at 03:53 UTC began at "08 PM" the day before on its timeline."""
    import json

    t = pd.Timestamp("2026-12-01 03:53", tz="UTC")
    df = pd.DataFrame(
        {
            "start": [t],
            "end": [t + pd.Timedelta(seconds=10)],
            "category": ["productive"],
            "component": ["productive"],
            "kind": ["train"],
            "attempt": [0],
            "seconds": [10.0],
        }
    )
    spec = _spec(charts.timeline(df))
    text = json.dumps(spec)
    for layer in spec["layer"]:
        assert layer["encoding"]["x"]["scale"] == {"type": "utc"}
    assert '"utc": true' in text  # tooltip times in UTC


def test_rank_lines_that_coincide_stay_apart() -> None:
    from ett_dashboard import loop_charts

    t = pd.date_range("2026-12-01 03:00", periods=4, freq="h", tz="UTC")
    ranks = pd.DataFrame(
        {"t": [*t, *t], "rank": ["rank 0"] * 4 + ["rank 1"] * 4, "samples_per_s": 5.0}
        | {"segment": 0}
    )
    encoding = _spec(loop_charts.throughput(ranks, pd.DataFrame()))["encoding"]
    assert encoding["strokeDash"]["field"] == encoding["color"]["field"] == "rank"
