"""The collector's repository: raw spans in; job figures and segments out. SQLite or PostgreSQL.

The hot path is :meth:`Store.ingest`: one transaction, one ``executemany`` of plain tuples through
the driver (no ORM objects, no per-row SQL compilation), attributes encoded once as compact JSON.
Reads of a job's figures come from the stored summary JSON, never from its spans.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, func, select, true

from collector.domain.model import JobState, JobSummary, SpanRecord
from collector.storage import _lost_time, _migrate
from collector.storage._engine import make_engine
from collector.storage._rows import (
    FIGURE_COLUMNS,
    LIST_COLUMNS,
    SEGMENT_COLUMNS,
    SPAN_COLUMNS,
    figures_row,
    segment_rows,
    segments_from_rows,
    span_from_row,
    span_rows,
)
from collector.storage._tables import job_figures, jobs
from instrument import semconv

LIVE_STATES = (JobState.RUNNING.value, JobState.PRESUMED_DEAD.value)
"""States of a job that is (or may be) still running."""


def _q(column: str) -> str:
    """A column name quoted for hand-written SQL (``end`` is a reserved word)."""
    return f'"{column}"'


def _cols(columns: Sequence[str]) -> str:
    return ", ".join(_q(c) for c in columns)


def _job_identities(records: Sequence[SpanRecord]) -> dict[str, tuple[int, str | None, str | None]]:
    """``job_id -> (spans in batch, model, team)``; model and team from the newest span that
    has them. Scans back from the end and stops once every job has both (usually at once)."""
    counts = Counter(r.job_id for r in records)
    known: dict[str, list[str | None]] = {job_id: [None, None] for job_id in counts}
    pending = len(known)
    model_key, team_key = semconv.MODEL, semconv.TEAM
    for r in reversed(records):
        info = known[r.job_id]
        if info[0] is not None and info[1] is not None:
            continue
        attrs = r.attributes
        if info[0] is None and (model := attrs.get(model_key)) is not None:
            info[0] = str(model)
        if info[1] is None and (team := attrs.get(team_key)) is not None:
            info[1] = str(team)
        if info[0] is not None and info[1] is not None:
            pending -= 1
            if not pending:
                break
    return {job_id: (n, known[job_id][0], known[job_id][1]) for job_id, n in counts.items()}


class Store:
    """Storage of spans, jobs, figures and segments behind one SQLAlchemy engine.

    ``url`` is ``sqlite:///path.db`` (the folder is created) or
    ``postgresql+psycopg://user@host:port/db``. Thread-safe: each call takes its own connection
    from the pool. Call :meth:`upgrade` once before use (``ett db upgrade`` and service start do).
    """

    def __init__(self, url: str) -> None:
        """Connect lazily to ``url``; nothing is created until :meth:`upgrade`."""
        self._engine = make_engine(url)
        self.dialect = self._engine.dialect.name
        """``sqlite`` or ``postgresql``."""
        ph = "?" if self._engine.dialect.paramstyle == "qmark" else "%s"
        self._ph = ph

        def marks(n: int) -> str:
            return ", ".join([ph] * n)

        self._sql_insert_spans = (
            f"INSERT INTO spans ({_cols(SPAN_COLUMNS)}) VALUES ({marks(len(SPAN_COLUMNS))})"
            " ON CONFLICT DO NOTHING"
        )
        job_cols = (
            "INSERT INTO jobs (job_id, model, team, dirty, dirty_seq, span_count, dirty_since,"
            f" first_seen, last_seen) VALUES ({marks(9)}) ON CONFLICT (job_id) DO UPDATE SET"
        )
        self._sql_touch_job = (
            f"{job_cols} model = COALESCE(excluded.model, jobs.model),"
            " team = COALESCE(excluded.team, jobs.team),"
            " dirty_seq = jobs.dirty_seq + 1,"
            " span_count = jobs.span_count + excluded.span_count,"
            " dirty_since = CASE WHEN jobs.dirty THEN jobs.dirty_since"
            " ELSE excluded.dirty_since END,"
            " dirty = excluded.dirty,"
            " last_seen = excluded.last_seen"
        )
        # Locks the job row first, so concurrent saves of one job queue up (PostgreSQL), and
        # clears dirty only when no ingest came after the spans the summary was computed from.
        self._sql_settle_job = (
            f"{job_cols} dirty = CASE WHEN jobs.dirty_seq = excluded.dirty_seq THEN excluded.dirty"
            " ELSE jobs.dirty END"
        )
        self._sql_insert_segments = (
            f"INSERT INTO segments ({_cols(SEGMENT_COLUMNS)})"
            f" VALUES ({marks(len(SEGMENT_COLUMNS))})"
        )
        updates = ", ".join(f"{_q(c)} = excluded.{_q(c)}" for c in FIGURE_COLUMNS[1:])
        self._sql_upsert_figures = (
            f"INSERT INTO job_figures ({_cols(FIGURE_COLUMNS)})"
            f" VALUES ({marks(len(FIGURE_COLUMNS))})"
            f" ON CONFLICT (job_id) DO UPDATE SET {updates}"
        )
        self._sql_recount_job = (
            f"UPDATE jobs SET span_count = (SELECT count(*) FROM spans WHERE job_id = {ph})"
            f" WHERE job_id = {ph}"
        )
        self._sql_load_spans = (
            f"SELECT {_cols(SPAN_COLUMNS)} FROM spans WHERE job_id = {ph}"
            " ORDER BY start, trace_id, span_id"
        )

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for tests, the dashboards' SQL checks and admin commands)."""
        return self._engine

    # --- schema ----------------------------------------------------------------------------

    def upgrade(self) -> None:
        """Bring the schema to the newest migration (idempotent; atomic on both databases)."""
        _migrate.upgrade(self._engine)

    def revision(self) -> str | None:
        """The schema revision the database is at (None before :meth:`upgrade`)."""
        return _migrate.current_revision(self._engine)

    # --- writes ----------------------------------------------------------------------------

    def ingest(self, records: Sequence[SpanRecord]) -> set[str]:
        """Store ``records`` in one transaction and mark their jobs dirty.

        Spans already stored are ignored, so a replay changes nothing. Each job of the batch
        gets its ``dirty_seq`` incremented and ``dirty`` set, and keeps the newest model and team
        seen (``semconv.MODEL``, ``semconv.TEAM``). Returns the touched job ids: the jobs of the
        batch, or an empty set when every span was a duplicate (nothing new to compute).
        """
        if not records:
            return set()
        rows = span_rows(records)
        touched = _job_identities(records)
        now = time.time()
        with self._engine.begin() as conn:
            inserted = conn.exec_driver_sql(self._sql_insert_spans, rows).rowcount
            if inserted == 0:
                return set()
            conn.exec_driver_sql(
                self._sql_touch_job,
                [
                    (job_id, model, team, True, 1, n, now, now, now)
                    for job_id, (n, model, team) in sorted(touched.items())  # one lock order
                ],
            )
            if inserted != len(rows):  # some were duplicates: count the touched jobs' spans
                conn.exec_driver_sql(
                    self._sql_recount_job, [(job_id, job_id) for job_id in sorted(touched)]
                )
        return set(touched)

    def save_summary(self, summary: JobSummary, seen_seq: int, computed_at: float) -> None:
        """Replace the job's figures and segments with ``summary``, in one transaction.

        ``seen_seq`` is the ``dirty_seq`` read (from :meth:`dirty_jobs`) before the spans were
        loaded: the job stays dirty when spans arrived since.
        """
        job_id = summary.job_id
        with self._engine.begin() as conn:
            conn.exec_driver_sql(
                self._sql_settle_job,
                (
                    job_id,
                    summary.model,
                    summary.team,
                    False,
                    seen_seq,
                    0,
                    computed_at,
                    computed_at,
                    computed_at,
                ),
            )
            conn.exec_driver_sql(f"DELETE FROM segments WHERE job_id = {self._ph}", (job_id,))
            seg_rows = segment_rows(summary)
            if seg_rows:
                conn.exec_driver_sql(self._sql_insert_segments, seg_rows)
            conn.exec_driver_sql(self._sql_upsert_figures, figures_row(summary, computed_at))

    # --- reads -----------------------------------------------------------------------------

    def load_spans(self, job_id: str) -> list[SpanRecord]:
        """Every stored span of ``job_id``, by start time (a span id seen twice: the first)."""
        with self._engine.connect() as conn:
            rows = conn.exec_driver_sql(self._sql_load_spans, (job_id,)).fetchall()
        seen: set[tuple[str, str]] = set()
        out: list[SpanRecord] = []
        for row in rows:
            key = (row[0], row[1])
            if key not in seen:
                seen.add(key)
                out.append(span_from_row(row))
        return out

    def dirty_jobs(self, limit: int = 100) -> list[tuple[str, int]]:
        """``(job_id, dirty_seq)`` of jobs needing a recompute, longest dirty first."""
        query = (
            select(jobs.c.job_id, jobs.c.dirty_seq)
            .where(jobs.c.dirty == true())
            .order_by(jobs.c.dirty_since, jobs.c.job_id)
            .limit(limit)
        )
        with self._engine.connect() as conn:
            return [(job_id, int(seq)) for job_id, seq in conn.execute(query)]

    def is_dirty(self, job_id: str) -> bool:
        """True when ``job_id`` has spans newer than its stored summary (False if unknown)."""
        with self._engine.connect() as conn:
            dirty = conn.execute(select(jobs.c.dirty).where(jobs.c.job_id == job_id)).scalar()
        return bool(dirty)

    def dirty_seq(self, job_id: str) -> int:
        """The job's current ``dirty_seq`` (0 when unknown), to pass to :meth:`save_summary`."""
        with self._engine.connect() as conn:
            seq = conn.execute(select(jobs.c.dirty_seq).where(jobs.c.job_id == job_id)).scalar()
        return int(seq or 0)

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        """The stored ``JobSummary.to_dict()`` plus ``computed_at``; None when not computed."""
        query = select(job_figures.c.summary, job_figures.c.computed_at).where(
            job_figures.c.job_id == job_id
        )
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        out: dict[str, Any] = json.loads(row[0])
        out["computed_at"] = row[1]
        return out

    def list_jobs(
        self,
        state: str | None = None,
        model: str | None = None,
        team: str | None = None,
        since: float | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        """Compact rows of computed jobs, newest end first; ``since`` keeps jobs ending >= it."""
        query = select(*(job_figures.c[c] for c in LIST_COLUMNS))
        if state is not None:
            query = query.where(job_figures.c.state == state)
        if model is not None:
            query = query.where(job_figures.c.model == model)
        if team is not None:
            query = query.where(job_figures.c.team == team)
        if since is not None:
            query = query.where(job_figures.c.end >= since)
        query = query.order_by(job_figures.c.end.desc(), job_figures.c.job_id).limit(limit)
        with self._engine.connect() as conn:
            return [dict(zip(LIST_COLUMNS, row, strict=True)) for row in conn.execute(query)]

    def get_segments(self, job_id: str) -> list[dict[str, Any]]:
        """The job's stored segments in ``segment_to_dict()`` form, by start time."""
        sql = (
            'SELECT seg, attempt, start, "end", category, kind, component FROM segments'
            f" WHERE job_id = {self._ph} ORDER BY start, seg, part"
        )
        with self._engine.connect() as conn:
            return segments_from_rows(conn.exec_driver_sql(sql, (job_id,)))

    def lost_time(
        self, group_by: str, since: float | None = None, until: float | None = None
    ) -> list[dict[str, Any]]:
        """Idle and failure seconds by ``group_by`` (component, job, model or team), clipped to
        ``[since, until]``: rows ``{key, idle_s, failure_s, lost_s}``, largest ``lost_s`` first.

        Raises:
            ValueError: for another ``group_by``.
        """
        _lost_time.lost_time_query(group_by, since, until)  # validate before connecting
        with self._engine.connect() as conn:
            return _lost_time.lost_time(conn, group_by, since, until, self._ph)

    def job_ids(self) -> list[str]:
        """Every job seen, sorted."""
        with self._engine.connect() as conn:
            return list(conn.execute(select(jobs.c.job_id).order_by(jobs.c.job_id)).scalars())

    def live_job_ids(self) -> list[str]:
        """Jobs whose stored state is running or presumed dead, sorted."""
        query = (
            select(job_figures.c.job_id)
            .where(job_figures.c.state.in_(LIVE_STATES))
            .order_by(job_figures.c.job_id)
        )
        with self._engine.connect() as conn:
            return list(conn.execute(query).scalars())

    def span_counts(self) -> dict[str, int]:
        """``{"spans": stored spans, "jobs": jobs seen, "dirty_jobs": jobs awaiting recompute}``.

        Cheap at any size: spans are counted per job at ingest, not by scanning ``spans``."""
        with self._engine.connect() as conn:
            n_spans = conn.execute(select(func.sum(jobs.c.span_count))).scalar()
            n_jobs = conn.execute(select(func.count()).select_from(jobs)).scalar_one()
            n_dirty = conn.execute(
                select(func.count()).select_from(jobs).where(jobs.c.dirty == true())
            ).scalar_one()
        return {"spans": int(n_spans or 0), "jobs": int(n_jobs), "dirty_jobs": int(n_dirty)}

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()
