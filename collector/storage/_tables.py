"""The collector's SQL schema as SQLAlchemy Core tables (the migrations create the same).

The tables:

- ``spans``: every raw span, kept so that history can be recomputed (see its key below).
- ``jobs``: one row per job seen, with the bookkeeping of recomputation (``dirty``, ``dirty_seq``).
- ``job_figures``: the last computed summary of a job (indexed columns plus the full JSON).
- ``job_performance``: the performance figures of a job whose raw spans are pruned, as they were.
- ``window_runs`` and ``window_compaction``: heartbeat windows folded into runs (see below).
- ``window_series``: the step time, throughput and waits of the folded windows, per rank at a
  fixed resolution (``collector/storage/_series.py``).
- ``segments``: one row per (segment, component) of the last computed summary, with its ``share``
  of the segment's seconds, and the job's model and team copied in so lost time groups without a
  join.
- ``job_totals``, ``job_cells`` and ``fleet_cells``: the segments summed per job, per job and
  hour or day, and per hour or day over the fleet, kept with the segments (the Fleet page's
  rollup: ``collector/storage/_fleet_cells.py``).

Times are unix seconds in double precision. ``start`` and ``end`` are column names, so hand-written
SQL must quote ``"end"`` (a reserved word).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    text,
)

from ett_collector.domain.model import Category, GroupBy

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names, so that migrations name things the same on SQLite and PostgreSQL."""

LOST_CATEGORIES = (Category.IDLE.value, Category.FAILURE.value)
"""The categories of lost time (idle and failure)."""

LOST_PREDICATE = "category IN ({})".format(", ".join(f"'{c}'" for c in LOST_CATEGORIES))
"""SQL of "a lost-time row", spelled the same in the partial indexes and in the queries (a query
uses a partial index only when its WHERE clause carries the index's predicate)."""

LOST_GROUP_COLUMNS: dict[str, str] = {
    GroupBy.COMPONENT.value: "component",
    GroupBy.JOB.value: "job_id",
    GroupBy.MODEL.value: "model",
    GroupBy.TEAM.value: "team",
}
"""The lost-time ``group_by`` values and the ``segments`` column each groups on."""

metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""Every table of the collector."""


def _job_ref(*, primary_key: bool = False) -> Column[str]:
    """A ``job_id`` column referring to ``jobs`` (its rows are deleted with their job): the key,
    or else a non-null column."""
    fk = ForeignKey("jobs.job_id", ondelete="CASCADE")
    if primary_key:
        return Column("job_id", String(), fk, primary_key=True)
    return Column("job_id", String(), fk, nullable=False)


spans = Table(
    "spans",
    metadata,
    Column("trace_id", String(), nullable=False),
    Column("span_id", String(), nullable=False),
    Column("job_id", String(), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("rank", Integer, nullable=False),
    Column("name", String(), nullable=False),
    Column("start", Double, nullable=False),
    Column("end", Double, nullable=False),
    Column("attributes", Text, nullable=False),
    PrimaryKeyConstraint("job_id", "start", "trace_id", "span_id", name="pk_spans"),
    sqlite_with_rowid=False,
)
"""Raw spans; ``attributes`` is compact JSON text of the merged attributes.

The key leads with ``(job_id, start)``, not ``(trace_id, span_id)``: span ids are random, and a
random key scatters every insert over the whole index (measured on SQLite: 4-8x slower ingest,
worse as the table grows), while job and time put new spans at the right edge of a few hot pages.
It also clusters a job's spans in time order for :meth:`Store.load_spans`. A replayed span is
byte-identical (same job and start), so it still conflicts; a span id repeated with a different
start is kept, and ``load_spans`` drops such repeats."""

# kept alike: each table spells its own columns (alike in shape only; the migrations match)
jobs = Table(
    "jobs",
    metadata,
    Column("job_id", String(), primary_key=True),
    Column("model", String()),
    Column("team", String()),
    Column("dirty", Boolean, nullable=False),
    Column("dirty_seq", Integer, nullable=False),
    Column("span_count", Integer, nullable=False),
    Column("dirty_since", Double, nullable=False),
    Column("first_seen", Double, nullable=False),
    Column("last_seen", Double, nullable=False),
    Column("computed_seq", Integer, nullable=False, server_default=text("0")),
    Column("failed_seq", Integer),
    Column("failure", Text),
    Column("pruned", Integer, nullable=False, server_default=text("0")),
    Column("spans_pruned_at", Double),
    Index("ix_jobs_dirty", "dirty", "dirty_since"),
)
"""Jobs seen. ``dirty_seq`` grows with every ingest that brings the job new spans; ``dirty`` is
cleared by a summary computed at the latest ``dirty_seq``; ``span_count`` counts its stored spans.
``computed_seq`` is the ``dirty_seq`` the stored figures were computed at: a summary computed at
an older one is never saved over them (several collectors may recompute one job at once).
``failure`` is why the last recompute failed (NULL after a success) and ``failed_seq`` the
``dirty_seq`` it failed at: the job is retried once a new span arrives. ``pruned`` (0-3) and
``spans_pruned_at``: how far retention has deleted the job's data and when it began on its raw
spans (NULL: kept; migration 0007); its figures stay as stored and
are never recomputed again (``collector/storage/_retention.py``). Times here are the
collector's clock."""

job_figures = Table(
    "job_figures",
    metadata,
    _job_ref(primary_key=True),
    Column("state", String(), nullable=False),
    Column("model", String()),
    Column("team", String()),
    Column("alloc", Double, nullable=False),
    Column("end", Double, nullable=False),
    Column("wall_s", Double, nullable=False),
    Column("productive_s", Double, nullable=False),
    Column("idle_s", Double, nullable=False),
    Column("failure_s", Double, nullable=False),
    Column("ett_pct", Double, nullable=False),
    Column("idle_pct", Double, nullable=False),
    Column("failure_pct", Double, nullable=False),
    Column("tts_s", Double),
    Column("failures", Integer, nullable=False),
    Column("unsaved_s", Double, nullable=False),
    Column("checkpoint_blocking_s", Double, nullable=False),
    Column("span_count", Integer, nullable=False),
    Column("last_span_end", Double, nullable=False),
    Column("computed_at", Double, nullable=False),
    Column("summary", Text, nullable=False),
    Index("ix_job_figures_end", "end"),
    Index("ix_job_figures_state_end", "state", "end"),
    Index("ix_job_figures_model_end", "model", "end"),
    Index("ix_job_figures_team_end", "team", "end"),
)
"""The last computed figures of each job; ``summary`` is ``schemas.job_json()`` as JSON text."""

job_performance = Table(
    "job_performance",
    metadata,
    _job_ref(primary_key=True),
    Column("kept_at", Double, nullable=False),
    Column("productive_s", Double),
    Column("rank_samples_per_s", Double),
    Column("rank_s", Double, nullable=False),
    Column("figures", Text, nullable=False),
    Column("windows", Text),
)
"""The "Inside the loop" figures of a job whose raw spans retention deletes, kept as they were
computed from them just before (migration 0011, ``collector/storage/_kept_performance.py``):
``figures`` (JSON) and the per-model facts, and ``windows``, the points of its raw windows for
the throughput series (JSON; NULL once its runs and series are deleted too)."""

segments = Table(
    "segments",
    metadata,
    _job_ref(),
    Column("seg", Integer, nullable=False),
    Column("part", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("start", Double, nullable=False),
    Column("end", Double, nullable=False),
    Column("category", String(32), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("component", String()),
    Column("share", Double, nullable=False),
    Column("model", String()),
    Column("team", String()),
    PrimaryKeyConstraint("job_id", "seg", "part", name="pk_segments"),
    Index("ix_segments_start", "start"),
    Index("ix_segments_end", "end"),
    *(
        Index(
            f"ix_segments_lost_by_{key}",
            column,
            "category",
            "end",
            "start",
            "share",
            sqlite_where=text(LOST_PREDICATE),
            postgresql_where=text(LOST_PREDICATE),
        )
        for key, column in LOST_GROUP_COLUMNS.items()
    ),
)
"""Segments of the last computed summary: ``seg`` is the segment's index in the job, ``part`` the
index of its component (productive segments: one part, ``component`` NULL, ``share`` 1).

The ``ix_segments_lost_by_*`` partial covering indexes serve lost time: one per grouping key, in
GROUP BY order, over idle and failure rows only, so SQLite aggregates in index order without a
temporary sort (about 3x faster over a fleet)."""

window_runs = Table(
    "window_runs",
    metadata,
    Column("job_id", String(), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("rank", Integer, nullable=False),
    Column("start", Double, nullable=False),
    Column("trace_id", String(), nullable=False),
    Column("span_id", String(), nullable=False),
    Column("end", Double, nullable=False),
    Column("step_first", BigInteger),
    Column("step_last", BigInteger),
    Column("samples", BigInteger),
    Column("count", Integer, nullable=False),
    Column("attributes", Text, nullable=False),
    PrimaryKeyConstraint(
        "job_id", "attempt", "rank", "start", "trace_id", "span_id", name="pk_window_runs"
    ),
    sqlite_with_rowid=False,
)
"""Runs of contiguous ``ett.train.window`` spans of one (job, attempt, rank): ``[start, end]``
from the first window's start to the last one's end, ``step_first``/``step_last`` of the first and
last windows, ``samples`` summed, ``count`` windows. ``trace_id``, ``span_id`` and ``attributes``
are the first window's (its other attributes are those of every window of the run). The domain
reads a run as one window (``collector/storage/_runs.py``)."""

window_compaction = Table(
    "window_compaction",
    metadata,
    Column("job_id", String(), nullable=False),
    Column("compacted_to", Double, nullable=False),
    PrimaryKeyConstraint("job_id", name="pk_window_compaction"),
)
"""Per job, the instant up to which raw windows (ending before it) were folded into runs."""

window_series = Table(
    "window_series",
    metadata,
    Column("job_id", String(), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("rank", Integer, nullable=False),
    Column("bucket", Double, nullable=False),
    Column("windows", Integer, nullable=False),
    Column("steps", BigInteger, nullable=False),
    Column("samples", BigInteger, nullable=False),
    Column("seconds", Double, nullable=False),
    Column("timed_steps", BigInteger, nullable=False),
    Column("timed_s", Double, nullable=False),
    Column("wait_s", Double, nullable=False),
    Column("first_start", Double, nullable=True),
    Column("last_end", Double, nullable=True),
    PrimaryKeyConstraint("job_id", "attempt", "rank", "bucket", name="pk_window_series"),
    sqlite_with_rowid=False,
)
"""The compacted windows' step-time series (issue 26): per (job, attempt, rank) and bucket of
``SERIES_S`` seconds (``bucket``: its start; a window falls in the bucket of its start), the
windows folded, their steps, samples and seconds, of those carrying ``ett.window.wait_s``
the steps, seconds and wait, and the first window's start and the last window's end (NULL in
buckets stored before migration 0012) (``collector/storage/_series.py``)."""

job_totals = Table(
    "job_totals",
    metadata,
    _job_ref(primary_key=True),
    Column("model", String()),
    Column("team", String()),
    Column("state", String(), nullable=False),
    Column("first", Double, nullable=False),
    Column("last", Double, nullable=False),
    Column("seconds", Double, nullable=False),
    Column("lost_s", Double, nullable=False),
    Column("lost_gpu_s", Double, nullable=False),
    Index("ix_job_totals_last", "last"),
)
"""Per job with segments: its segments' span ``[first, last]``, their seconds (times ``share``),
the lost (idle + failure) seconds and lost GPU-seconds (seconds times the attempt's ranks), and
the model, team and state they were stored with. A job whose segments all fall inside a window
contributes exactly these to it."""

job_cells = Table(
    "job_cells",
    metadata,
    _job_ref(),
    Column("grain", Integer, nullable=False),
    Column("t", Double, nullable=False),
    Column("category", String(32), nullable=False),
    Column("component", String(), nullable=False),
    Column("seconds", Double, nullable=False),
    Column("gpu_s", Double, nullable=False),
    PrimaryKeyConstraint("job_id", "grain", "t", "category", "component", name="pk_job_cells"),
)
"""A job's segment seconds cut at the edges of each hour (``grain`` 3600) and each day (86400)
starting at ``t``, per category and component (``''`` for productive time, ``other`` for lost time
that names none), with GPU-seconds."""

fleet_cells = Table(
    "fleet_cells",
    metadata,
    Column("grain", Integer, nullable=False),
    Column("t", Double, nullable=False),
    Column("model", String(), nullable=False),
    Column("team", String(), nullable=False),
    Column("state", String(), nullable=False),
    Column("category", String(32), nullable=False),
    Column("component", String(), nullable=False),
    Column("seconds", Double, nullable=False),
    Column("gpu_s", Double, nullable=False),
    Column("jobs", Integer, nullable=False),
    PrimaryKeyConstraint(
        "grain", "t", "model", "team", "state", "category", "component", name="pk_fleet_cells"
    ),
)
"""``job_cells`` summed over the jobs of one model, team and state (``''`` for no model or team),
with the number of ``jobs`` in the sum (a cell is deleted when it reaches 0). Its size depends on
hours, days and keys, never on the number of jobs."""
