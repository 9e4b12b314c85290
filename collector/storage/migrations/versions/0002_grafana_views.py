"""Stable SQL views for Grafana and other SQL readers (interface v1; docs/grafana.md).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Seven views, ``ett_v1_*``: job summaries, attempts, segments, time per hour and per day (every
segment cut at bucket edges), checkpoint saves and compiles. Their names, columns and meanings are
an interface: a later migration may add columns, never change or drop one (that would be v2).
PostgreSQL: ``*_at`` columns are ``timestamptz``; SQLite: UTC text ``YYYY-MM-DD HH:MM:SS``.
Every ``*_s`` column is seconds (unix seconds for instants).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Wire strings, frozen here as they were when this migration was written (a migration must not
# change meaning when the code moves on; tests/contract pins them in ett.semconv).
_SAVE, _PERSIST, _COMPILE = "ett.checkpoint.save", "ett.checkpoint.persist", "ett.compile"
_STEP, _MODE, _BYTES = "ett.checkpoint.step", "ett.checkpoint.mode", "ett.checkpoint.bytes"
_CACHE, _FRAMES, _TRIGGER = "ett.compile.cache", "ett.compile.frames", "ett.compile.trigger"

VIEWS = (
    "ett_v1_jobs",
    "ett_v1_attempts",
    "ett_v1_segments",
    "ett_v1_time_hourly",
    "ett_v1_time_daily",
    "ett_v1_checkpoints",
    "ett_v1_compiles",
)


class _Dialect:
    """The few spellings that differ between PostgreSQL and SQLite."""

    def __init__(self, name: str) -> None:
        self.pg = name == "postgresql"

    def ts(self, expr: str) -> str:
        return f"to_timestamp({expr})" if self.pg else f"datetime({expr}, 'unixepoch')"

    def get(self, doc: str, key: str) -> str:
        """A JSON member as text (doc: JSON text)."""
        return f"({doc})::jsonb ->> '{key}'" if self.pg else f"json_extract({doc}, '$.\"{key}\"')"

    def num(self, doc: str, key: str) -> str:
        """A JSON member as a number, NULL when absent or not a number."""
        if self.pg:
            return (
                f"CASE WHEN jsonb_typeof(({doc})::jsonb -> '{key}') = 'number' "
                f"THEN (({doc})::jsonb ->> '{key}')::float8 END"
            )
        path = f"'$.\"{key}\"'"
        return (
            f"CASE WHEN json_type({doc}, {path}) IN ('integer', 'real') "
            f"THEN json_extract({doc}, {path}) END"
        )

    def least(self, a: str, b: str) -> str:
        return f"LEAST({a}, {b})" if self.pg else f"MIN({a}, {b})"

    def greatest(self, a: str, b: str) -> str:
        return f"GREATEST({a}, {b})" if self.pg else f"MAX({a}, {b})"


def _jobs(d: _Dialect) -> str:
    adv, end = "checkpoint_advice", 'f."end"'
    if d.pg:
        advice = [
            f"(f.summary::jsonb #>> '{{{adv},{k}}}')::float8 AS {alias}"
            for k, alias in (
                ("interval_s", "checkpoint_interval_s"),
                ("optimal_interval_s", "checkpoint_optimal_interval_s"),
                ("saving_s", "checkpoint_saving_s"),
            )
        ]
        at_risk = "(f.summary::jsonb ->> 'at_risk_s')::float8"
        expected = "(f.summary::jsonb ->> 'expected_unsaved_s')::float8"
    else:
        advice = [
            f"json_extract(f.summary, '$.{adv}.{k}') AS {alias}"
            for k, alias in (
                ("interval_s", "checkpoint_interval_s"),
                ("optimal_interval_s", "checkpoint_optimal_interval_s"),
                ("saving_s", "checkpoint_saving_s"),
            )
        ]
        at_risk = "json_extract(f.summary, '$.at_risk_s')"
        expected = "json_extract(f.summary, '$.expected_unsaved_s')"
    cols = [
        "f.job_id",
        "f.state",
        "f.model",
        "f.team",
        f"{d.ts('f.alloc')} AS started_at",
        f"{d.ts(end)} AS ended_at",
        "f.alloc AS alloc_s",
        'f."end" AS end_s',
        "f.wall_s",
        "f.productive_s",
        "f.idle_s",
        "f.failure_s",
        "f.ett_pct",
        "f.idle_pct",
        "f.failure_pct",
        "f.tts_s",
        "f.failures",
        "f.unsaved_s",
        f"{expected} AS expected_unsaved_s",
        f"{at_risk} AS at_risk_s",
        "f.checkpoint_blocking_s",
        *advice,
        f"{d.ts('f.computed_at')} AS computed_at",
    ]
    return "SELECT " + ", ".join(cols) + " FROM job_figures f"


def _attempts(d: _Dialect) -> str:
    if d.pg:
        src = (
            "job_figures f CROSS JOIN LATERAL "
            "jsonb_array_elements(f.summary::jsonb -> 'attempts') a"
        )
        el = "a.value"

        def n(k: str) -> str:
            return f"({el} ->> '{k}')::float8"

        attempt, rank = f"({el} ->> 'attempt')::int", f"({el} ->> 'critical_rank')::int"
        text = {k: f"{el} ->> '{k}'" for k in ("end_reason", "failure_cause")}
        failed = f"({el} ->> 'failed')::boolean"
        ranks = f"jsonb_array_length({el} -> 'ranks')"
    else:
        src = "job_figures f, json_each(f.summary, '$.attempts') a"
        el = "a.value"

        def n(k: str) -> str:
            return f"json_extract({el}, '$.{k}')"

        attempt, rank = n("attempt"), n("critical_rank")
        text = {k: n(k) for k in ("end_reason", "failure_cause")}
        failed = f"({n('failed')} = 1)"
        ranks = f"json_array_length({el}, '$.ranks')"
    inner = (
        f"SELECT f.job_id, f.model, f.team, {attempt} AS attempt, {n('alloc')} AS alloc_s, "
        f"{n('first_batch')} AS first_batch_s, {n('end')} AS end_s, "
        f"{text['end_reason']} AS end_reason, {failed} AS failed, "
        f"{text['failure_cause']} AS failure_cause, {rank} AS critical_rank, "
        f"{ranks} AS ranks FROM {src}"
    )
    return (
        "SELECT job_id, model, team, attempt, "
        f"{d.ts('alloc_s')} AS alloc_at, {d.ts('first_batch_s')} AS first_batch_at, "
        f"{d.ts('end_s')} AS end_at, alloc_s, first_batch_s, end_s, "
        "first_batch_s - alloc_s AS startup_s, end_reason, failed, failure_cause, "
        "critical_rank, ranks, "
        "CASE WHEN failed THEN LEAD(first_batch_s) OVER "
        "(PARTITION BY job_id ORDER BY attempt) - end_s END AS ttr_s "
        f"FROM ({inner}) x"
    )


def _segments(d: _Dialect) -> str:
    end = '"end"'
    return (
        "SELECT job_id, model, team, attempt, seg, part, "
        f"{d.ts('start')} AS start_at, {d.ts(end)} AS end_at, "
        'start AS start_s, "end" AS end_s, category, kind, component, share, '
        '("end" - start) * share AS seconds FROM segments'
    )


def _time_buckets(d: _Dialect, width: int) -> str:
    """Each segment row cut at the edges of ``width``-second UTC buckets."""
    hi, lo = d.least('s."end"', f"b.lo + {width}"), d.greatest("s.start", "b.lo")
    cols = (
        "s.job_id, s.model, s.team, s.attempt, s.category, s.kind, s.component, "
        f"({hi} - {lo})"
        " * s.share AS seconds"
    )
    if d.pg:
        return (
            f"SELECT to_timestamp(b.lo) AS bucket, b.lo AS bucket_s, {cols} FROM segments s "
            f"CROSS JOIN LATERAL (SELECT i * {width} AS lo FROM generate_series("
            f'floor(s.start / {width})::bigint, ceil(s."end" / {width})::bigint - 1) i) b'
        )
    return (
        f"WITH RECURSIVE b(job_id, seg, part, lo) AS ("
        f"SELECT job_id, seg, part, CAST(start / {width} AS INTEGER) * {width} FROM segments "
        f'WHERE "end" > start '
        f"UNION ALL SELECT b.job_id, b.seg, b.part, b.lo + {width} FROM b JOIN segments s "
        "ON s.job_id = b.job_id AND s.seg = b.seg AND s.part = b.part "
        f'WHERE b.lo + {width} < s."end") '
        f"SELECT datetime(b.lo, 'unixepoch') AS bucket, b.lo AS bucket_s, {cols} "
        "FROM b JOIN segments s ON s.job_id = b.job_id AND s.seg = b.seg AND s.part = b.part"
    )


def _checkpoints(d: _Dialect) -> str:
    a = "s.attributes"
    persist = (
        'SELECT MAX(p."end") FROM spans p WHERE p.job_id = s.job_id AND p.attempt = s.attempt '
        f"AND p.name = '{_PERSIST}' AND {d.num('p.attributes', _STEP)} = {d.num(a, _STEP)}"
    )
    return (
        "SELECT s.job_id, j.model, j.team, s.attempt, s.rank, "
        f"{d.num(a, _STEP)} AS step, {d.get(a, _MODE)} AS mode, {d.num(a, _BYTES)} AS bytes, "
        f'{d.ts("s.start")} AS start_at, s.start AS start_s, s."end" AS end_s, '
        f's."end" - s.start AS blocking_s, ({persist}) AS persisted_s '
        f"FROM spans s JOIN jobs j ON j.job_id = s.job_id WHERE s.name = '{_SAVE}'"
    )


def _compiles(d: _Dialect) -> str:
    a = "s.attributes"
    return (
        "SELECT s.job_id, j.model, j.team, s.attempt, s.rank, "
        f"{d.get(a, _CACHE)} AS cache, {d.num(a, _FRAMES)} AS frames, "
        f"{d.get(a, _TRIGGER)} AS compile_trigger, "
        f'{d.ts("s.start")} AS start_at, s.start AS start_s, s."end" AS end_s, '
        's."end" - s.start AS duration_s '
        f"FROM spans s JOIN jobs j ON j.job_id = s.job_id WHERE s.name = '{_COMPILE}'"
    )


def _definitions(d: _Dialect) -> dict[str, str]:
    return {
        "ett_v1_jobs": _jobs(d),
        "ett_v1_attempts": _attempts(d),
        "ett_v1_segments": _segments(d),
        "ett_v1_time_hourly": _time_buckets(d, 3600),
        "ett_v1_time_daily": _time_buckets(d, 86400),
        "ett_v1_checkpoints": _checkpoints(d),
        "ett_v1_compiles": _compiles(d),
    }


def upgrade() -> None:
    """Create the views."""
    d = _Dialect(op.get_bind().dialect.name)
    for name, sql in _definitions(d).items():
        op.execute(f"CREATE VIEW {name} AS {sql}")


def downgrade() -> None:
    """Drop the views."""
    for name in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {name}")
