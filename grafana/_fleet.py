"""The fleet ETT overview: ETT, idle and failure over time per model or team; lost hours by
component; the jobs of the time range."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.models import dashboard as models

from ._panels import bar_panel, fleet_dashboard, series_panel, stat_panel, table_panel
from ._queries import BUCKET_IN_RANGE, BY, FILTER, IN_RANGE, Sql, clip

UID = "ett-fleet"

DESCRIPTION = (
    "Effective Training Time of the fleet: where the wall-clock hours of training jobs went "
    "(ETT-SPEC v1.2). Figures inside the time range clip segments as the read API does."
)
"""The dashboard's description, shown under its title in Grafana."""

SHARES = Sql(
    f"""SELECT 100 * SUM(CASE WHEN category = 'productive' THEN s ELSE 0 END) / NULLIF(SUM(s), 0)
         AS ett_pct,
       100 * SUM(CASE WHEN category = 'idle' THEN s ELSE 0 END) / NULLIF(SUM(s), 0) AS idle_pct,
       100 * SUM(CASE WHEN category = 'failure' THEN s ELSE 0 END) / NULLIF(SUM(s), 0)
         AS failure_pct
    FROM (SELECT category, {clip()} AS s FROM ett_v1_segments WHERE {IN_RANGE} AND {FILTER}) x""",
    ("ett_pct", "idle_pct", "failure_pct"),
)
"""Fleet ETT, idle and failure % of the wall time inside the time range (segments clipped)."""

LOST_HOURS = Sql(
    f"""SELECT COALESCE(SUM({clip()}), 0) / 3600 AS lost_h FROM ett_v1_segments
    WHERE category IN ('idle', 'failure') AND {IN_RANGE} AND {FILTER}""",
    ("lost_h",),
)

JOB_COUNTS = Sql(
    f"""SELECT COUNT(*) AS jobs, COALESCE(SUM(failures), 0) AS failed_attempts FROM ett_v1_jobs
    WHERE end_s >= $__unixEpochFrom() AND alloc_s <= $__unixEpochTo() AND {FILTER}""",
    ("jobs", "failed_attempts"),
)


def _share_over_time(category: str, alias: str) -> str:
    return (
        f"100 * SUM(CASE WHEN category = '{category}' THEN seconds ELSE 0 END)"
        f" / NULLIF(SUM(seconds), 0) AS {alias}"
    )


ETT_OVER_TIME = Sql(
    f"""SELECT $__timeGroupAlias(bucket, $bucket), {BY} AS metric,
       {_share_over_time("productive", "ett_pct")}
    FROM ett_v1_time_hourly WHERE {BUCKET_IN_RANGE} AND {FILTER}
    GROUP BY 1, 2 ORDER BY 1, 2""",
    ("time", "metric", "ett_pct"),
    fmt="time_series",
)

LOSS_OVER_TIME = Sql(
    f"""SELECT $__timeGroupAlias(bucket, $bucket), {BY} AS metric,
       {_share_over_time("idle", "idle_pct")}, {_share_over_time("failure", "failure_pct")}
    FROM ett_v1_time_hourly WHERE {BUCKET_IN_RANGE} AND {FILTER}
    GROUP BY 1, 2 ORDER BY 1, 2""",
    ("time", "metric", "idle_pct", "failure_pct"),
    fmt="time_series",
)

LOST_BY_COMPONENT_OVER_TIME = Sql(
    f"""SELECT $__timeGroupAlias(bucket, $bucket), COALESCE(component, 'other') AS metric,
       SUM(seconds) / 3600 AS lost_h
    FROM ett_v1_time_hourly
    WHERE {BUCKET_IN_RANGE} AND category IN ('idle', 'failure') AND {FILTER}
    GROUP BY 1, 2 ORDER BY 1, 2""",
    ("time", "metric", "lost_h"),
    fmt="time_series",
)


def lost_by(key: str) -> Sql:
    """Lost hours grouped by ``key`` inside the time range: the read API's lost-time, in hours."""
    return Sql(
        f"""SELECT {key} AS key,
           SUM(CASE WHEN category = 'idle' THEN {clip()} ELSE 0 END) / 3600 AS idle_h,
           SUM(CASE WHEN category = 'failure' THEN {clip()} ELSE 0 END) / 3600 AS failure_h,
           SUM({clip()}) / 3600 AS lost_h
        FROM ett_v1_segments WHERE category IN ('idle', 'failure') AND {IN_RANGE} AND {FILTER}
        GROUP BY 1 ORDER BY lost_h DESC, key""",
        ("key", "idle_h", "failure_h", "lost_h"),
    )


LOST_BY_COMPONENT = lost_by("component")
LOST_BY_KEY = lost_by("$by")

JOBS = Sql(
    f"""SELECT job_id, state, model, team, started_at, ended_at, wall_s / 3600 AS wall_h,
       ett_pct, idle_pct, failure_pct, failures, tts_s, unsaved_s
    FROM ett_v1_jobs
    WHERE end_s >= $__unixEpochFrom() AND alloc_s <= $__unixEpochTo() AND {FILTER}
    ORDER BY end_s DESC LIMIT 500""",
    "job_id state model team started_at ended_at wall_h"
    " ett_pct idle_pct failure_pct failures tts_s unsaved_s",
)


def build() -> dash.Dashboard:
    """The fleet overview dashboard."""
    d = fleet_dashboard(UID, title="ETT fleet overview", description=DESCRIPTION, tags=["fleet"])
    # on the job_id column only (a link on every cell opened the drill-down of job "dlrm-small"
    # from a model cell, or of "93.4" from an ETT cell), its id percent-encoded
    job_link = models.DynamicConfigValue(
        id_val="links",
        value=[
            {
                "title": "Job drill-down",
                "url": "/d/ett-job/ett-job-drill-down?var-job_id=${__value.raw:percentencode}"
                "&${__url_time_range}",
            }
        ],
    )
    return (
        d.with_panel(stat_panel("ETT / idle / failure %", SHARES, "percent", w=12))
        .with_panel(stat_panel("Lost hours", LOST_HOURS, "h"))
        .with_panel(stat_panel("Jobs and failed attempts", JOB_COUNTS, "short"))
        .with_panel(series_panel("ETT % by $by", ETT_OVER_TIME, "percent"))
        .with_panel(series_panel("Idle and failure % by $by", LOSS_OVER_TIME, "percent"))
        .with_panel(
            series_panel("Lost hours by component", LOST_BY_COMPONENT_OVER_TIME, "h", stacked=True)
        )
        .with_panel(bar_panel("Lost hours by component (time range)", LOST_BY_COMPONENT, "h"))
        .with_panel(table_panel("Lost hours by $by (time range)", LOST_BY_KEY, w=12))
        .with_panel(table_panel("Jobs", JOBS, w=12).override_by_name("job_id", [job_link]))
    )
