"""Read answers that aggregate on the server for the dashboards: the fleet over time, the filter
values, and one job's per-rank activity. Beside :class:`ett_collector.read.query.Query`, on its
store.

So that no page downloads every job's segments: the fleet answer's size depends on the number of
time buckets and keys (models, teams, components), never on the number of jobs.
"""

from __future__ import annotations

from typing import Any

from .activity import activity
from .query import NotFound, Query, QueryError, parse_instant

DEFAULT_WINDOW = "7d"
"""The fleet window when none is given."""


class Overview:
    """Fleet and job-activity answers over the same store and freshness rules as ``query``."""

    def __init__(self, query: Query) -> None:
        self.query = query

    # kept alike: the read API's parameters (text instants, checked here) mirror the query's
    def fleet(
        self,
        since: str | None = None,
        until: str | None = None,
        by: str = "fleet",
        bucket: str | None = None,
        model: str | None = None,
        team: str | None = None,
        state: str | None = None,
        limit: int = 10,
    ) -> dict[str, Any]:
        """ETT/idle/failure per bucket (by fleet, model or team), lost GPU-hours by component
        over time and ranked, and the worst jobs of ``[since, until]`` (default: the last 7 days).
        """
        now = self.query.clock()
        lo = parse_instant(since or DEFAULT_WINDOW, now)
        hi = parse_instant(until, now) or now
        assert lo is not None
        if hi <= lo:
            raise QueryError("until must be after since")
        if state is not None and state not in _states():
            raise QueryError(f"state must be one of {', '.join(_states())}; got {state!r}")
        if limit < 0 or limit > 1000:
            raise QueryError("limit must be between 0 and 1000")
        try:
            return self.query.store.fleet_overview(
                lo, hi, by=by, bucket=bucket, model=model, team=team, state=state, limit=limit
            )
        except ValueError as exc:
            raise QueryError(str(exc)) from exc

    def facets(self) -> dict[str, list[str]]:
        """The models, teams and states a filter can choose from."""
        out = self.query.store.facets()
        out["states"] = list(_states())
        return out

    def checkpoint_advice(
        self, since: str | None = None, model: str | None = None, team: str | None = None
    ) -> dict[str, Any]:
        """Checkpoint interval in use vs Young's optimum, per model (pooled) and per job."""
        lo = parse_instant(since, self.query.clock())
        return self.query.store.checkpoint_advice(lo, model, team)

    def activity(self, job_id: str) -> dict[str, Any]:
        """The job's start-up phases per rank, checkpoints, restores, compiles and failures,
        with ``spans_pruned`` and ``spans_pruned_at`` (unix seconds; None while kept).

        Read from its raw spans, so a job whose raw spans retention began to delete
        (``spans_pruned_at`` set: some may be gone already) answers empty lists, saying so,
        and not what part of them, or its folded windows and spans that came after the prune,
        would give. Its figures and segments are kept, so it is still a job: only a job the
        store does not hold (never seen, or pruned whole) is :class:`NotFound`."""
        store = self.query.store
        pruned_at = store.spans_pruned_at(job_id)  # set as retention begins on them
        spans = store.load_spans(job_id) if pruned_at is None else []
        if not spans and pruned_at is None and store.figures_stamp(job_id) is None:
            raise NotFound(f"no job {job_id!r}")
        answer: dict[str, Any] = activity(spans)
        answer["spans_pruned"] = pruned_at is not None
        answer["spans_pruned_at"] = pruned_at
        return answer


def _states() -> tuple[str, ...]:
    from ..domain.model import JobState

    return tuple(s.value for s in JobState)
