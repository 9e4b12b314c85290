"""The collector's repository: raw spans in; job figures and segments out. SQLite or PostgreSQL.

The hot path is :meth:`Store.ingest`: one transaction, one ``executemany`` of plain tuples through
the driver (no ORM objects, no per-row SQL compilation), attributes encoded once as compact JSON.
Reads of a job's figures come from the stored summary JSON, never from its spans.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from sqlalchemy import Connection, Engine, func, select, true
from sqlalchemy.exc import DBAPIError

from ett_collector.domain.model import JobState, JobSummary, SpanRecord
from ett_collector.schemas import (
    JOB_ROW_FIELDS,
    JobJSON,
    JobRowJSON,
    SegmentJSON,
)
from ett_collector.storage import _fleet_cells, _kept_performance, _migrate
from ett_collector.storage._compaction import DEFAULT_RETENTION_S, Compactor
from ett_collector.storage._engine import SQLITE_BEGIN_OPTION, make_engine, read_snapshot
from ett_collector.storage._fleet_reads import FleetReads
from ett_collector.storage._job_locks import JobLocks
from ett_collector.storage._kept_performance import KeptPerformance
from ett_collector.storage._live_fold import fold_rows
from ett_collector.storage._pruned_ingest import (
    Ingested,
    PrunedMeanwhile,
    pruned_marks,
    refusals,
)
from ett_collector.storage._rows import (
    DecodedRows,
    figures_row,
    job_identities,
    segment_rows,
    segments_from_rows,
    span_rows,
    spans_from_rows,
)
from ett_collector.storage._runs import WINDOW, with_window_rows
from ett_collector.storage._sql import SPAN_INSERT, Statements
from ett_collector.storage._tables import job_figures, jobs


class FiguresStamp(NamedTuple):
    """:meth:`Store.figures_stamp`: what identifies one job's stored figures (the read cache's
    key); the last three None while the job has no figures."""

    dirty: bool
    """The job has spans its figures do not include yet."""
    failure: str | None
    """Why its last recompute failed (None: it did not)."""
    computed_seq: int
    """The ``dirty_seq`` its figures were computed at."""
    computed_at: float | None
    """When its stored summary was computed."""
    span_count: int | None
    """The spans its figures were computed from."""
    last_span_end: float | None
    """The end of the newest span they include."""


LOOP_FACTS = "loop_facts"
"""The stored summary's key of the job's loop facts (issue 26; ``save_summary``)."""


def _without_loop_facts(job: JobJSON) -> JobJSON:
    """A stored job as the read API shows it: the loop facts (the alerts' own) left out, their
    ``performance`` block (when computed) kept as the job's ``performance``."""
    facts = cast(dict[str, Any], job).pop(LOOP_FACTS, None)
    if isinstance(facts, dict) and isinstance(facts.get("performance"), dict):
        job["performance"] = facts["performance"]
    return job


class Store(FleetReads):
    """Storage of spans, jobs, figures and segments behind one SQLAlchemy engine.

    ``url`` is ``sqlite:///path.db`` (the folder is created) or
    ``postgresql+psycopg://user@host:port/db``. Thread-safe: each call takes its own connection
    from the pool. Call :meth:`upgrade` once before use (``ett db upgrade`` and service start do).
    Its reads across jobs (fleet, advice, lost time, summaries) are those of :class:`FleetReads`.

    ``raw_window_retention_s``: how long (on each job's own span clock) heartbeat windows stay
    raw before they are folded into runs (``collector/storage/_compaction.py``); None keeps every
    raw window and folds only when loading.

    ``loads_kept``: of how many jobs the last :meth:`load_spans` is remembered, so that the
    next load of the job decodes and folds only the rows new since (0: every load from scratch;
    the figures are the same either way); ``loads_kept_rows``: how many rows those loads hold
    in all (about 1.9 KB each; a load of more rows is not remembered).
    """

    def __init__(
        self,
        url: str,
        raw_window_retention_s: float | None = DEFAULT_RETENTION_S,
        *,
        loads_kept: int = 64,
        loads_kept_rows: int = 200_000,
    ) -> None:
        """Connect lazily to ``url``; nothing is created until :meth:`upgrade`."""
        self._engine = make_engine(url)
        self.dialect = self._engine.dialect.name
        """``sqlite`` or ``postgresql``."""
        self._sql = Statements.for_paramstyle(self._engine.dialect.paramstyle)
        self._ingests = self._engine
        """The engine of ingest transactions: on SQLite they take the write lock at once, so the
        check of pruned jobs at their start holds until they commit (``_pruned_ingest``)."""
        if self.dialect == "sqlite":
            self._ingests = self._engine.execution_options(
                **{SQLITE_BEGIN_OPTION: "BEGIN IMMEDIATE"}
            )
        self.compactor = Compactor(self._engine, self._sql.ph, raw_window_retention_s)
        """Folds old raw heartbeat windows into runs after each batch (see :mod:`._compaction`)."""
        self.locks = JobLocks(self._engine)
        """Recompute ownership of each job across processes (see :mod:`._job_locks`)."""
        self._decoded = DecodedRows(loads_kept, loads_kept_rows)
        """What each live job's last load decoded and folded: the next load decodes only the
        rows new since, and continues that fold with them (:mod:`._live_fold`)."""

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for tests, the dashboards' SQL checks and admin commands)."""
        return self._engine

    # --- schema ----------------------------------------------------------------------------

    def upgrade(self) -> list[str]:
        """Bring the schema to the newest migration (idempotent; atomic on both databases);
        returns the revisions it applied, oldest first (empty when it was there already)."""
        return _migrate.upgrade(self._engine)

    def revision(self) -> str | None:
        """The schema revision the database is at (None before :meth:`upgrade`)."""
        return _migrate.current_revision(self._engine)

    # --- writes ----------------------------------------------------------------------------

    def ingest(self, records: Sequence[SpanRecord]) -> set[str]:
        """:meth:`accept`'s touched jobs."""
        return self.accept(records).touched

    def accept(self, records: Sequence[SpanRecord]) -> Ingested:
        """Store ``records`` in one transaction and mark their jobs dirty, leaving out the spans
        of jobs whose raw spans retention pruned (``refused``: they could never be part of
        their kept figures; see :mod:`._pruned_ingest`).

        Spans already stored are ignored, so a replay changes nothing. Each job of the batch
        gets its ``dirty_seq`` incremented and ``dirty`` set, and keeps the newest model and team
        seen (``semconv.MODEL``, ``semconv.TEAM``). ``touched``: the jobs of the batch stored,
        or an empty set when every span was a duplicate (nothing new to compute).
        Then, in transactions of their own, the jobs due have their old raw windows folded into
        runs (:class:`~ett_collector.storage._compaction.Compactor`); with a raw window
        retention of 0 the batch's windows are folded in this transaction instead, never
        written raw (``Compactor.fold_batch``).
        """
        if not records:
            return Ingested(set(), {})
        pruned: dict[str, float] = {}
        while True:  # again only when a prune began meanwhile, without that job's spans
            try:
                return self._accept(records, pruned)
            except PrunedMeanwhile as exc:
                pruned.update(exc.pruned)

    def _accept(self, records: Sequence[SpanRecord], known: dict[str, float]) -> Ingested:
        ph = self._sql.ph
        now = time.time()
        windows: dict[str, list[SpanRecord]] = {}
        with self._ingests.begin() as conn:
            pruned = {**known, **pruned_marks(conn, ph, {r.job_id for r in records} - set(known))}
            refused = refusals([r.job_id for r in records], pruned)
            if refused:
                records = [r for r in records if r.job_id not in pruned]
            if self.compactor.retention_s is not None:
                for r in records:
                    if r.name == WINDOW:
                        windows.setdefault(r.job_id, []).append(r)
            fold_now = bool(windows) and self.compactor.folds_at_ingest  # windows never raw
            rows = span_rows([r for r in records if r.name != WINDOW] if fold_now else records)
            touched = job_identities(records)
            inserted = self._insert_spans(conn, rows) if rows else 0
            expected = len(rows)
            if fold_now:
                inserted += sum(self.compactor.fold_batch(conn, windows).values())
                expected += sum(map(len, windows.values()))
            if inserted == 0:
                return Ingested(set(), refused)
            conn.exec_driver_sql(
                self._sql.touch_jobs,
                [
                    (job_id, model, team, True, 1, n, now, now, now)
                    for job_id, (n, model, team) in sorted(touched.items())  # one lock order
                ],
            )
            if self.dialect == "postgresql":  # the rows are ours now: a mark since shows
                late = pruned_marks(conn, ph, touched)
                if late:
                    raise PrunedMeanwhile(late)  # rolls this transaction back
            if inserted != expected:  # some were duplicates: count the touched jobs' spans
                conn.exec_driver_sql(
                    self._sql.recount_job,
                    [(job_id, job_id, job_id) for job_id in sorted(touched)],
                )
        if windows and not fold_now:
            self.compactor.after_ingest(windows)
        return Ingested(set(touched), refused)

    def _insert_spans(self, conn: Connection, rows: list[tuple[Any, ...]]) -> int:
        """Insert span ``rows`` (a duplicate is skipped); returns how many were new: on
        PostgreSQL one statement of column arrays (:data:`SPAN_INSERT`), on SQLite
        ``executemany``."""
        return SPAN_INSERT.run(conn, rows, self._sql.insert_spans)

    def save_summary(
        self,
        summary: JobSummary,
        seen_seq: int,
        computed_at: float,
        loop: dict[str, Any] | None = None,
    ) -> bool:
        """Replace the job's figures and segments with ``summary``, in one transaction; False
        (nothing changed) when figures computed at a newer sequence are stored already.
        ``loop``: the job's loop facts for the alerts (``ett_collector.write._job_loop``), kept in
        the stored summary under ``loop_facts`` and left out of what :meth:`get_job` returns.

        ``seen_seq`` is the ``dirty_seq`` read (from :meth:`dirty_jobs`) before the spans were
        loaded: the job stays dirty when spans arrived since, and a slower recompute of the same
        job (another collector's) that read an older sequence never overwrites these figures.
        """
        job_id = summary.job_id
        with self._engine.begin() as conn:
            settled = conn.exec_driver_sql(
                self._sql.settle_job,
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
                    seen_seq,
                ),
            ).rowcount
            if settled == 0:
                return False
            conn.exec_driver_sql(self._sql.delete_segments, (job_id,))
            seg_rows = segment_rows(summary)
            if seg_rows:
                conn.exec_driver_sql(self._sql.insert_segments, seg_rows)
            _fleet_cells.replace_job(
                conn,
                job_id,
                (summary.model, summary.team, str(summary.state)),
                ((r[3], r[4], r[5], r[6], r[8], r[9]) for r in seg_rows),
                {a.attempt: len(a.ranks) for a in summary.attempts},
            )
            row = figures_row(summary, computed_at)
            if loop is not None:  # the summary JSON is a non-empty object: add one key
                facts = json.dumps(loop, separators=(",", ":"), allow_nan=False)
                row = (*row[:-1], f'{row[-1][:-1]},"{LOOP_FACTS}":{facts}}}')
            conn.exec_driver_sql(self._sql.upsert_figures, row)
        return True

    def mark_failed(self, job_id: str, seen_seq: int, reason: str) -> None:
        """Record that the recompute of ``job_id`` at ``seen_seq`` raised: ``reason`` is kept
        (read by :meth:`recompute_failure`), the stored figures stay, and the job is no longer
        awaiting recompute unless spans came since (a new span retries it)."""
        with self._engine.begin() as conn:
            conn.exec_driver_sql(
                self._sql.mark_failed, (reason, seen_seq, seen_seq, False, job_id, seen_seq)
            )

    def recompute_failure(self, job_id: str) -> str | None:
        """Why the job's last recompute failed; None when it succeeded (or never ran)."""
        with self._engine.connect() as conn:
            return conn.execute(select(jobs.c.failure).where(jobs.c.job_id == job_id)).scalar()

    def spans_pruned_at(self, job_id: str) -> float | None:
        """When retention began deleting the job's raw spans (None: kept, or an unknown job);
        such a job is never recomputed (``collector/storage/_retention.py``)."""
        with self._engine.connect() as conn:
            query = select(jobs.c.spans_pruned_at).where(jobs.c.job_id == job_id)
            return conn.execute(query).scalar()

    # --- reads -----------------------------------------------------------------------------

    def load_spans(self, job_id: str, raw: bool = False) -> list[SpanRecord]:
        """The spans of ``job_id`` the domain is fed, by start time (a span id seen twice: the
        first): its stored spans with heartbeat windows as runs, the folded runs and the raw
        windows not folded yet alike (``collector/storage/_runs.py``; the figures equal those
        of the raw windows). ``raw=True``: only the raw rows stored, windows one by one (those
        compacted into runs are not among them). The rows and the runs are read in one snapshot
        (:func:`~ett_collector.storage._engine.read_snapshot`): a compaction committed between
        the two never shows a window both raw and folded."""
        with read_snapshot(self._engine) as conn:
            cursor = conn.connection.cursor()  # the driver's plain tuples: no Row objects
            try:
                cursor.execute(self._sql.load_spans, (job_id,))
                rows = cursor.fetchall()
            finally:
                cursor.close()
            stored = [] if raw else self.compactor.load_runs(conn, job_id)
        if raw:
            return spans_from_rows(rows)
        if not self._decoded.fits(len(rows)):  # not remembered: the plain load
            others, runs = with_window_rows(rows, stored)
            return self._merged(spans_from_rows(others), runs)
        known, prev = self._decoded.get(job_id) or ({}, None)
        into: dict[Any, Any] = {}
        others = [row for row in rows if row[5] != WINDOW]
        folded = fold_rows([row for row in rows if row[5] == WINDOW], stored, known, into, prev)
        spans = spans_from_rows(others, known, into)
        self._decoded.put(job_id, len(rows), (into, folded))
        return self._merged(spans, folded.records())

    def load_performance(self, job_id: str) -> tuple[list[SpanRecord], list[Any]]:
        """A job's raw stored spans (windows one by one, as ``load_spans(raw=True)``) and its
        ``window_series`` rows (the windows compacted), read in one snapshot
        (:func:`~ett_collector.storage._engine.read_snapshot`; a compaction committed between
        two statements would show its windows raw and folded, counted twice): the input of its
        performance figures (``ett_collector.read.performance``)."""
        with read_snapshot(self._engine) as conn:
            return _kept_performance.inputs(conn, job_id)

    def kept_performance(self, job_id: str) -> KeptPerformance | None:
        """The performance figures kept of a job whose raw spans retention pruned, which its
        views serve instead of computing them from what is left; None while its raw spans are
        kept (``collector/storage/_kept_performance.py``)."""
        with self._engine.connect() as conn:
            return _kept_performance.load(conn, job_id)

    def load_series(self, job_id: str) -> list[Any]:
        """A job's ``window_series`` rows (``_series.SERIES_COLUMNS`` order)."""
        with self._engine.connect() as conn:
            return self.compactor.load_series(conn, job_id)

    @staticmethod
    def _merged(spans: list[SpanRecord], runs: list[SpanRecord]) -> list[SpanRecord]:
        if not runs:
            return spans
        out = spans + runs
        out.sort(key=lambda s: (s.start, s.trace_id, s.span_id))
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

    def get_job(self, job_id: str) -> JobJSON | None:
        """The stored ``schemas.job_json()`` plus ``computed_at``; None when not computed."""
        query = select(job_figures.c.summary, job_figures.c.computed_at).where(
            job_figures.c.job_id == job_id
        )
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        out = _without_loop_facts(cast(JobJSON, json.loads(row[0])))
        out["computed_at"] = row[1]
        return out

    def job_state(self, job_id: str) -> tuple[bool, str | None, JobJSON | None]:
        """What one job's read needs, in one query: whether spans newer than its figures await
        their recompute (:meth:`is_dirty`), why its last recompute failed
        (:meth:`recompute_failure`), and its stored figures (:meth:`get_job`); an unknown job
        is ``(False, None, None)``."""
        query = (
            select(jobs.c.dirty, jobs.c.failure, job_figures.c.summary, job_figures.c.computed_at)
            .select_from(jobs.outerjoin(job_figures, job_figures.c.job_id == jobs.c.job_id))
            .where(jobs.c.job_id == job_id)
        )
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return False, None, None
        dirty, failure, summary, computed_at = row
        if summary is None:
            return bool(dirty), failure, None
        out = _without_loop_facts(cast(JobJSON, json.loads(summary)))
        out["computed_at"] = computed_at
        return bool(dirty), failure, out

    def figures_stamp(self, job_id: str) -> FiguresStamp | None:
        """What identifies one job's read answer, by one indexed lookup without its summary
        (:class:`FiguresStamp`); None for an unknown job.

        Every save of figures writes a new ``computed_at`` (the instant its summary was
        computed at) and ``computed_seq`` in one transaction, and no two saves of one job run
        at once (its recompute lock), so an unchanged stamp means the same stored figures.
        Through the driver's cursor, outside a transaction (one statement sees one snapshot):
        a fraction of a SQLAlchemy statement's CPU, and on PostgreSQL one round trip instead of
        three (BEGIN, the query, the pool's ROLLBACK)."""
        sql, dialect = self._sql.figures_stamp, self._engine.dialect
        dbapi = self._engine.raw_connection()
        driver: Any = dbapi.driver_connection
        pg = self.dialect == "postgresql"
        try:
            if pg:
                driver.autocommit = True  # the pool hands out connections idle, rolled back
            cursor = dbapi.cursor()
            cursor.execute(sql, (job_id,))
            row = cursor.fetchone()
            cursor.close()
            if pg:
                driver.autocommit = False
        except dialect.loaded_dbapi.Error as err:  # raised as SQLAlchemy would
            dbapi.invalidate()  # never back to the pool in an unknown state
            if dialect.is_disconnect(err, driver, None):  # as SQLAlchemy does: every pooled
                self._engine.dispose(close=False)  # connection is as dead, open new ones
            raise DBAPIError.instance(sql, (job_id,), err, dialect.loaded_dbapi.Error) from err
        except BaseException:
            dbapi.invalidate()
            raise
        finally:
            dbapi.close()  # back to the pool (a no-op rollback there)
        if row is None:
            return None
        dirty, failure, seq, computed_at, span_count, last_end = row
        return FiguresStamp(
            dirty=bool(dirty),
            failure=failure,
            computed_seq=int(seq),
            computed_at=computed_at,
            span_count=span_count,
            last_span_end=last_end,
        )

    def list_jobs(
        self,
        state: str | None = None,
        model: str | None = None,
        team: str | None = None,
        since: float | None = None,
        limit: int = 1000,
    ) -> list[JobRowJSON]:
        """Compact rows of computed jobs, newest end first; ``since`` keeps jobs ending >= it."""
        query = select(*(job_figures.c[c] for c in JOB_ROW_FIELDS))
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
            return [
                cast(JobRowJSON, dict(zip(JOB_ROW_FIELDS, row, strict=True)))
                for row in conn.execute(query)
            ]

    def get_segments(self, job_id: str) -> list[SegmentJSON]:
        """The job's stored segments in ``schemas.segment_json()`` form, by start time."""
        with self._engine.connect() as conn:
            return segments_from_rows(conn.exec_driver_sql(self._sql.get_segments, (job_id,)))

    def job_ids(self) -> list[str]:
        """Every job seen, sorted."""
        with self._engine.connect() as conn:
            return list(conn.execute(select(jobs.c.job_id).order_by(jobs.c.job_id)).scalars())

    def existing_job_ids(self, job_ids: Sequence[str]) -> list[str]:
        """Which of ``job_ids`` the database holds, sorted."""
        query = select(jobs.c.job_id).where(jobs.c.job_id.in_(list(job_ids)))
        with self._engine.connect() as conn:
            return sorted(conn.execute(query).scalars())

    def similar_job_ids(self, job_id: str, n: int = 3) -> list[str]:
        """Up to ``n`` stored job ids close to ``job_id`` (a typo's suggestions), among the
        ids sharing its first two characters (at most 20,000 of them are compared)."""
        import difflib

        head = job_id[:2].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = (
            select(jobs.c.job_id).where(jobs.c.job_id.like(f"{head}%", escape="\\")).limit(20_000)
        )
        with self._engine.connect() as conn:
            ids = list(conn.execute(query).scalars())
        near = difflib.get_close_matches(job_id, ids, n=n, cutoff=0.8)
        score = [difflib.SequenceMatcher(None, job_id, x).ratio() for x in near]
        return [x for x, r in zip(near, score, strict=True) if r >= max(score) - 0.01]

    def live_job_ids(self) -> list[str]:
        """Jobs whose stored state is running, sorted: their figures move with the clock (a
        presumed-dead job's do not: it is recomputed when a span for it arrives). A job whose
        last recompute failed is left out until a new span retries it."""
        query = (
            select(job_figures.c.job_id)
            .join(jobs, jobs.c.job_id == job_figures.c.job_id)
            .where(job_figures.c.state == JobState.RUNNING.value)
            .where(jobs.c.failure.is_(None))
            .order_by(job_figures.c.job_id)
        )
        with self._engine.connect() as conn:
            return list(conn.execute(query).scalars())

    def span_counts(self) -> dict[str, int]:
        """``{"spans": stored spans, "jobs": jobs seen, "dirty_jobs": jobs awaiting recompute,
        "failed_jobs": jobs whose last recompute failed}``.

        Cheap at any size: spans are counted per job at ingest, not by scanning ``spans``."""
        with self._engine.connect() as conn:
            n_spans = conn.execute(select(func.sum(jobs.c.span_count))).scalar()
            n_jobs = conn.execute(select(func.count()).select_from(jobs)).scalar_one()
            n_dirty = conn.execute(
                select(func.count()).select_from(jobs).where(jobs.c.dirty == true())
            ).scalar_one()
            n_failed = conn.execute(
                select(func.count()).select_from(jobs).where(jobs.c.failure.is_not(None))
            ).scalar_one()
        return {
            "spans": int(n_spans or 0),
            "jobs": int(n_jobs),
            "dirty_jobs": int(n_dirty),
            "failed_jobs": int(n_failed),
        }

    def check_writable(self) -> None:
        """Raise unless the database takes a write now (readiness): rewrites the schema
        revision row in place inside a transaction that is rolled back, so nothing changes."""
        with self._engine.connect() as conn, conn.begin() as tx:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = version_num")
            tx.rollback()

    def close(self) -> None:
        """Close every pooled connection (on SQLite, refresh the planner's statistics first)."""
        if self.dialect == "sqlite":
            try:
                with self._engine.connect() as conn:
                    conn.exec_driver_sql("PRAGMA optimize")
                    conn.commit()
            except Exception:  # best effort: closing must not fail
                pass
        self.locks.close()
        self._engine.dispose()
