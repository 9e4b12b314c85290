"""The job drill-down: one job (the ``job_id`` variable) with its attempts, segments as a state
timeline, TTS/TTR, checkpoints, compiles and unsaved work."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash

from ._panels import bar_panel, dashboard, sql_variable, stat_panel, table_panel, timeline_panel
from ._queries import SAVE_TIMES, Sql

UID = "ett-job"

DESCRIPTION = (
    "One training job: its ETT, attempts, segments, time to start and to recover, "
    "checkpoints, compiles and unsaved work. Pick the job with the job_id variable."
)
"""The dashboard's description, shown under its title in Grafana."""
JOB = "job_id = '$job_id'"

JOB_IDS = "SELECT job_id FROM ett_v1_jobs ORDER BY end_s DESC, job_id LIMIT 1000"
"""The ``job_id`` variable's choices: the newest 1000 jobs."""

SHARES = Sql(
    f"SELECT ett_pct, idle_pct, failure_pct FROM ett_v1_jobs WHERE {JOB}",
    ("ett_pct", "idle_pct", "failure_pct"),
)
TIMES = Sql(
    f"SELECT wall_s, tts_s, unsaved_s, at_risk_s FROM ett_v1_jobs WHERE {JOB}",
    ("wall_s", "tts_s", "unsaved_s", "at_risk_s"),
)
STATE = Sql(
    f"SELECT state, failures FROM ett_v1_jobs WHERE {JOB}",
    ("state", "failures"),
)
ADVICE = Sql(
    f"""SELECT checkpoint_blocking_s, checkpoint_interval_s, checkpoint_optimal_interval_s,
       checkpoint_saving_s FROM ett_v1_jobs WHERE {JOB}""",
    "checkpoint_blocking_s checkpoint_interval_s checkpoint_optimal_interval_s checkpoint_saving_s",
)
ATTEMPTS = Sql(
    f"""SELECT attempt, alloc_at, first_batch_at, end_at, startup_s, end_reason, failure_cause,
       critical_rank, ranks, ttr_s FROM ett_v1_attempts WHERE {JOB} ORDER BY attempt""",
    "attempt alloc_at first_batch_at end_at startup_s end_reason"
    " failure_cause critical_rank ranks ttr_s",
)
SEGMENTS = Sql(
    f"""SELECT time, segment FROM (
      SELECT start_at AS time, seg,
             category || ': ' || string_agg(COALESCE(component, 'training'), '+' ORDER BY part)
               AS segment
      FROM ett_v1_segments WHERE {JOB} GROUP BY seg, start_at, category
      UNION ALL SELECT ended_at, 2147483647, NULL FROM ett_v1_jobs WHERE {JOB}
    ) x ORDER BY time, seg""",
    ("time", "segment"),
)
"""One row per segment (its start, category and components), then the job's end: a state
timeline holds each value until the next row."""

LOST = Sql(
    f"""SELECT COALESCE(component, 'other') AS component,
       SUM(CASE WHEN category = 'idle' THEN seconds ELSE 0 END) AS idle_s,
       SUM(CASE WHEN category = 'failure' THEN seconds ELSE 0 END) AS failure_s
    FROM ett_v1_segments WHERE {JOB} AND category IN ('idle', 'failure')
    GROUP BY 1 ORDER BY SUM(seconds) DESC, 1""",
    ("component", "idle_s", "failure_s"),
)
CHECKPOINTS = Sql(
    f"""SELECT attempt, step, mode, MIN(start_at) AS started_at, {SAVE_TIMES},
       MAX(bytes) AS bytes, COUNT(*) AS ranks
    FROM ett_v1_checkpoints WHERE {JOB} GROUP BY attempt, step, mode ORDER BY attempt, step""",
    ("attempt", "step", "mode", "started_at", "blocking_s", "durable_after_s", "bytes", "ranks"),
)
"""One row per checkpoint step: blocking is [earliest start, latest end] over ranks, as the spec
cuts it; durable after is until the latest persist (async) ended."""

COMPILES = Sql(
    f"""SELECT attempt, rank, start_at, cache, frames, compile_trigger, duration_s
    FROM ett_v1_compiles WHERE {JOB} ORDER BY attempt, start_s, rank""",
    ("attempt", "rank", "start_at", "cache", "frames", "compile_trigger", "duration_s"),
)


def build() -> dash.Dashboard:
    """The job drill-down dashboard."""
    d = dashboard(
        UID, title="ETT job drill-down", description=DESCRIPTION, tags=["job"]
    ).with_variable(sql_variable("job_id", "Job", JOB_IDS, multi=False))
    return (
        d.with_panel(stat_panel("ETT / idle / failure %", SHARES, "percent", w=8))
        .with_panel(stat_panel("Wall, TTS, unsaved, at risk", TIMES, "s", w=8))
        .with_panel(stat_panel("State and failed attempts", STATE, "none", w=8))
        .with_panel(timeline_panel("Segments", SEGMENTS))
        .with_panel(table_panel("Attempts (TTR per failed attempt)", ATTEMPTS, w=24, h=6))
        .with_panel(bar_panel("Lost seconds by component", LOST, "s"))
        .with_panel(stat_panel("Checkpoint blocking and interval advice", ADVICE, "s", w=12, h=8))
        .with_panel(table_panel("Checkpoints", CHECKPOINTS, w=12))
        .with_panel(table_panel("Compiles", COMPILES, w=12))
    )
