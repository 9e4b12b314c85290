"""Checkpoints and compile across the fleet: blocking, unsaved work and compile time over time,
Young's interval advice per job, compile-cache hits."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash

from ._panels import fleet_dashboard, series_panel, stat_panel, table_panel
from ._queries import BUCKET_IN_RANGE, BY, FILTER, IN_RANGE, SAVE_TIMES, Sql, clip

UID = "ett-checkpoints"

DESCRIPTION = (
    "Checkpoint blocking, unsaved work lost to failures, compile time and compile-cache "
    "hits across the fleet, with Young's checkpoint interval advice per job."
)
"""The dashboard's description, shown under its title in Grafana."""

CHECKPOINT = "kind = 'cutout' AND component = 'checkpoint'"
UNSAVED = "kind = 'unsaved'"
COMPILE = "component = 'compile' AND category IN ('idle', 'failure')"


def _over_time(where: str) -> Sql:
    return Sql(
        f"""SELECT $__timeGroupAlias(bucket, $bucket), {BY} AS metric, SUM(seconds) / 3600 AS h
        FROM ett_v1_time_hourly WHERE {BUCKET_IN_RANGE} AND {where} AND {FILTER}
        GROUP BY 1, 2 ORDER BY 1, 2""",
        ("time", "metric", "h"),
        fmt="time_series",
    )


BLOCKING_OVER_TIME = _over_time(CHECKPOINT)
UNSAVED_OVER_TIME = _over_time(UNSAVED)
COMPILE_OVER_TIME = _over_time(COMPILE)

TOTALS = Sql(
    f"""SELECT SUM(CASE WHEN {CHECKPOINT} THEN s ELSE 0 END) / 3600 AS blocking_h,
       SUM(CASE WHEN {UNSAVED} THEN s ELSE 0 END) / 3600 AS unsaved_h,
       SUM(CASE WHEN {COMPILE} THEN s ELSE 0 END) / 3600 AS compile_h
    FROM (SELECT kind, component, category, {clip()} AS s FROM ett_v1_segments
          WHERE {IN_RANGE} AND {FILTER}) x""",
    ("blocking_h", "unsaved_h", "compile_h"),
)

ADVICE = Sql(
    f"""SELECT job_id, model, team, checkpoint_blocking_s, unsaved_s, expected_unsaved_s,
       checkpoint_interval_s, checkpoint_optimal_interval_s, checkpoint_saving_s
    FROM ett_v1_jobs
    WHERE end_s >= $__unixEpochFrom() AND alloc_s <= $__unixEpochTo() AND {FILTER}
    ORDER BY checkpoint_saving_s DESC NULLS LAST, job_id LIMIT 200""",
    "job_id model team checkpoint_blocking_s unsaved_s expected_unsaved_s"
    " checkpoint_interval_s checkpoint_optimal_interval_s checkpoint_saving_s",
)

COMPILE_CACHE = Sql(
    f"""SELECT {BY} AS key, COALESCE(cache, 'unknown') AS cache, COUNT(*) AS compiles,
       SUM(duration_s) AS seconds, AVG(duration_s) AS mean_s
    FROM ett_v1_compiles WHERE $__timeFilter(start_at) AND {FILTER}
    GROUP BY 1, 2 ORDER BY 1, 2""",
    ("key", "cache", "compiles", "seconds", "mean_s"),
)

CHECKPOINT_SAVES = Sql(
    f"""SELECT {BY} AS key, COALESCE(mode, 'unknown') AS mode, COUNT(*) AS saves,
       AVG(blocking_s) AS mean_blocking_s, MAX(blocking_s) AS max_blocking_s,
       AVG(durable_after_s) AS mean_durable_after_s
    FROM (SELECT model, team, mode, {SAVE_TIMES}
        FROM ett_v1_checkpoints WHERE $__timeFilter(start_at) AND {FILTER}
        GROUP BY job_id, attempt, step, model, team, mode) AS saves
    GROUP BY 1, 2 ORDER BY 1, 2""",
    ("key", "mode", "saves", "mean_blocking_s", "max_blocking_s", "mean_durable_after_s"),
)
"""Per save (a job's one step, every rank; as the read API's ``checkpoint_blocking_stats``):
blocking and, for async saves, when the checkpoint became durable. It counted each rank's row
as a save of its own: 3.8 times the saves, a mean 20 to 30 % low."""


def build() -> dash.Dashboard:
    """The checkpoints and compile dashboard."""
    d = fleet_dashboard(
        UID,
        title="ETT checkpoints and compile",
        description=DESCRIPTION,
        tags=["checkpoints", "compile"],
    )
    return (
        d.with_panel(stat_panel("Blocking / unsaved / compile hours", TOTALS, "h", w=24))
        .with_panel(series_panel("Checkpoint blocking hours by $by", BLOCKING_OVER_TIME, "h", w=8))
        .with_panel(series_panel("Unsaved hours by $by", UNSAVED_OVER_TIME, "h", w=8))
        .with_panel(series_panel("Compile hours by $by", COMPILE_OVER_TIME, "h", w=8))
        .with_panel(table_panel("Checkpoint interval advice (Young)", ADVICE))
        .with_panel(table_panel("Checkpoint saves by $by", CHECKPOINT_SAVES, w=12))
        .with_panel(table_panel("Compile cache by $by", COMPILE_CACHE, w=12))
    )
