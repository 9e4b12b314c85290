"""Spans for a job whose raw spans retention pruned: refused at ingest, never stored.

Such a job's figures are kept as they were and never recomputed (``_retention.py``): a span
stored for it would sit outside its figures for good, and no later pass would delete it. So
:meth:`Store.accept` leaves those spans out of the transaction and says which jobs they were
of (:class:`Ingested`); the API answers them as an OTLP partial success.

A prune that begins while an ingest of the job is under way: the ingest's update of the job's
row (``touch_jobs``) waits for the mark's commit (PostgreSQL), and the check after it
(:func:`pruned_marks`, a statement of its own, so it reads the mark) makes the transaction roll
back and start again without that job's spans (:class:`PrunedMeanwhile`); a mark that comes
after the ingest's update finds the job dirty and not quiet, and waits for a later pass. On
SQLite the ingest takes the write lock at its start (``BEGIN IMMEDIATE``), so the check at its
start holds until its commit.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import NamedTuple

from sqlalchemy import Connection

from ett_collector.storage._sql import placeholders

PRUNED_FAILURE = "its raw spans were pruned"
"""How the failure a recompute of a pruned job records begins (``pipeline.pruned_reason``): what
spans stored for it after the prune, by an older collector, leave (``Retention._sweep``)."""

_IDS_AT_ONCE = 500
"""Job ids per lookup (SQLite's bound on parameters of one statement is far above it)."""


class Refusal(NamedTuple):
    """The spans of one pruned job left out of an ingest."""

    spans_pruned_at: float
    """When retention began deleting the job's raw spans (the collector's clock)."""
    spans: int
    """How many spans of the request were refused."""


class Ingested(NamedTuple):
    """What :meth:`Store.accept` did with a batch of spans."""

    touched: set[str]
    """The jobs that got new spans (none when every span was a duplicate)."""
    refused: dict[str, Refusal]
    """The jobs whose raw spans were pruned, and their spans left out."""


class PrunedMeanwhile(Exception):
    """An ingest found jobs of its batch marked for pruning after its check (rolled back)."""

    def __init__(self, pruned: dict[str, float]) -> None:
        super().__init__(sorted(pruned))
        self.pruned = pruned


def pruned_marks(conn: Connection, ph: str, job_ids: Iterable[str]) -> dict[str, float]:
    """``{job_id: spans_pruned_at}`` of those of ``job_ids`` whose raw spans retention pruned
    (or is pruning)."""
    ids = sorted(set(job_ids))
    out: dict[str, float] = {}
    for i in range(0, len(ids), _IDS_AT_ONCE):
        part = ids[i : i + _IDS_AT_ONCE]
        sql = (
            "SELECT job_id, spans_pruned_at FROM jobs"
            f" WHERE job_id IN ({placeholders(ph, len(part))}) AND spans_pruned_at IS NOT NULL"
        )
        out.update((row[0], float(row[1])) for row in conn.exec_driver_sql(sql, tuple(part)))
    return out


def refusals(job_ids: Collection[str], pruned: dict[str, float]) -> dict[str, Refusal]:
    """The refusal of each pruned job among ``job_ids`` (one id per refused span)."""
    counts: dict[str, int] = {}
    for job_id in job_ids:
        if job_id in pruned:
            counts[job_id] = counts.get(job_id, 0) + 1
    return {job_id: Refusal(pruned[job_id], n) for job_id, n in counts.items()}
