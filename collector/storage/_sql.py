"""The hand-written SQL of the store's hot and transactional paths, one text per dialect.

Written once with the driver's own placeholders and run with ``exec_driver_sql`` (no per-call
compilation). The same text serves SQLite (3.24+) and PostgreSQL: ``ON CONFLICT`` upserts,
``excluded``, CASE rather than MIN/MAX/LEAST/GREATEST. ``"end"`` is quoted (a reserved word).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ett_collector.storage._arrays import column_insert
from ett_collector.storage._rows import FIGURE_COLUMNS, SEGMENT_COLUMNS, SPAN_COLUMNS


def quoted_columns(columns: Iterable[str]) -> str:
    """``columns`` as a quoted SQL list: ``"a", "b"`` (``"end"`` is a reserved word)."""
    return ", ".join(f'"{c}"' for c in columns)


def placeholders(ph: str, n: int) -> str:
    """``n`` positional placeholders ``ph`` as a SQL list: ``?, ?, ?``."""
    return ", ".join([ph] * n)


SPAN_INSERT = column_insert(
    "spans",
    SPAN_COLUMNS,
    (str, str, str, int, int, str, float, float, str),
    "ON CONFLICT DO NOTHING",
)
"""PostgreSQL's insert of a batch of span rows (:func:`~ett_collector.storage._rows.span_rows`)
as one statement (``_arrays.py``); SQLite runs :attr:`Statements.insert_spans` per row."""


@dataclass(frozen=True)
class Statements:
    """Every statement text, for one placeholder style."""

    ph: str
    """The positional placeholder: ``?`` (sqlite3) or ``%s`` (psycopg)."""
    insert_spans: str
    touch_jobs: str
    recount_job: str
    settle_job: str
    mark_failed: str
    delete_segments: str
    insert_segments: str
    upsert_figures: str
    load_spans: str
    get_segments: str
    figures_stamp: str

    @classmethod
    def for_paramstyle(cls, paramstyle: str) -> Statements:
        """The statements for a DBAPI ``paramstyle`` (``qmark`` or ``format``/``pyformat``)."""
        ph = "?" if paramstyle == "qmark" else "%s"

        def marks(n: int) -> str:
            return placeholders(ph, n)

        upsert_job = (
            "INSERT INTO jobs (job_id, model, team, dirty, dirty_seq, span_count, dirty_since,"
            f" first_seen, last_seen) VALUES ({marks(9)}) ON CONFLICT (job_id) DO UPDATE SET"
        )
        updates = ", ".join(f'"{c}" = excluded."{c}"' for c in FIGURE_COLUMNS[1:])
        return cls(
            ph=ph,
            insert_spans=(
                f"INSERT INTO spans ({quoted_columns(SPAN_COLUMNS)})"
                f" VALUES ({marks(len(SPAN_COLUMNS))}) ON CONFLICT DO NOTHING"
            ),
            # new spans: one more dirty_seq, dirty (since the first time it went dirty), count
            touch_jobs=(
                f"{upsert_job} model = COALESCE(excluded.model, jobs.model),"
                " team = COALESCE(excluded.team, jobs.team),"
                " dirty_seq = jobs.dirty_seq + 1,"
                " span_count = jobs.span_count + excluded.span_count,"
                " dirty_since = CASE WHEN jobs.dirty THEN jobs.dirty_since"
                " ELSE excluded.dirty_since END,"
                " dirty = excluded.dirty,"
                " last_seen = excluded.last_seen"
            ),
            recount_job=(
                f"UPDATE jobs SET span_count = (SELECT count(*) FROM spans WHERE job_id = {ph})"
                f' + (SELECT COALESCE(SUM("count"), 0) FROM window_runs WHERE job_id = {ph})'
                f" WHERE job_id = {ph}"
            ),
            # Locks the job row first, so concurrent saves of one job queue up (PostgreSQL);
            # updates nothing (rowcount 0) when figures of a newer sequence are stored already,
            # and clears dirty only when no ingest came after the spans the summary saw.
            settle_job=(
                "INSERT INTO jobs (job_id, model, team, dirty, dirty_seq, span_count,"
                " dirty_since, first_seen, last_seen, computed_seq)"
                f" VALUES ({marks(10)}) ON CONFLICT (job_id) DO UPDATE SET"
                " dirty = CASE WHEN jobs.dirty_seq = excluded.dirty_seq"
                " THEN excluded.dirty ELSE jobs.dirty END,"
                " computed_seq = excluded.computed_seq, failure = NULL, failed_seq = NULL"
                " WHERE jobs.computed_seq <= excluded.computed_seq"
            ),
            # a failed recompute: the reason kept, dirty cleared unless spans came since
            mark_failed=(
                f"UPDATE jobs SET failure = {ph}, failed_seq = {ph},"
                f" dirty = CASE WHEN dirty_seq = {ph} THEN {ph} ELSE dirty END"
                f" WHERE job_id = {ph} AND computed_seq <= {ph}"
            ),
            delete_segments=f"DELETE FROM segments WHERE job_id = {ph}",
            insert_segments=(
                f"INSERT INTO segments ({quoted_columns(SEGMENT_COLUMNS)})"
                f" VALUES ({marks(len(SEGMENT_COLUMNS))})"
            ),
            upsert_figures=(
                f"INSERT INTO job_figures ({quoted_columns(FIGURE_COLUMNS)})"
                f" VALUES ({marks(len(FIGURE_COLUMNS))})"
                f" ON CONFLICT (job_id) DO UPDATE SET {updates}"
            ),
            load_spans=(
                f"SELECT {quoted_columns(SPAN_COLUMNS)} FROM spans WHERE job_id = {ph}"
                " ORDER BY start, trace_id, span_id"
            ),
            get_segments=(
                'SELECT seg, attempt, start, "end", category, kind, component FROM segments'
                f" WHERE job_id = {ph} ORDER BY start, seg, part"
            ),
            figures_stamp=(
                "SELECT j.dirty, j.failure, j.computed_seq, f.computed_at, f.span_count,"
                " f.last_span_end FROM jobs j LEFT JOIN job_figures f ON f.job_id = j.job_id"
                f" WHERE j.job_id = {ph}"
            ),
        )
