"""The one query layer behind the CLI, the HTTP read API and the dashboards.

What they ask: docs/metrics.md, "What a user can ask".

Freshness: reads never wait on a recompute. Lists (jobs, lost time) answer the stored figures at
once; each job carries its ``computed_at``, and the pipeline's background worker keeps them fresh.
A read of one job whose spans are newer than its figures answers its stored figures at once with
``fresh: false`` and makes sure the job's recompute is under way (single-flight: concurrent
readers share one recompute). Only a job with spans but no figures yet waits for its first
figures, at most ``read_wait_s``; past the bound :class:`NotReady`. With ``wait_fresh`` (the CLI,
where no background worker runs) a read of a dirty job waits up to ``read_wait_s`` for figures
that include its newest spans, as a person at a terminal expects.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..schemas import (
    GROUP_BYS,
    MAX_LIST,
    STATES,
    JobJSON,
    JobRowJSON,
    LostTimeJSON,
    SegmentJSON,
)
from ..settings import DEFAULT_READ_RECHECK_S, DEFAULT_READ_WAIT_S
from ..write.pipeline import Pipeline
from .answers import JobAnswers

_RELATIVE = re.compile(r"^\s*(?:now\s*-\s*|-\s*)?(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.ASCII)
"""A duration before now: ``7d``, also written ``-7d`` or ``now-7d`` (Grafana's form)."""
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class QueryError(ValueError):
    """A query the caller got wrong (the API answers 400, the CLI exits 2)."""


class NotFound(LookupError):
    """No such job."""


class NotReady(LookupError):
    """The job has spans but no figures yet, and its first recompute passed the read bound (the
    API answers 503 with Retry-After)."""


class NotComputedHere(LookupError):
    """The job has spans but no figures, on a database that cannot compute them (a hot standby,
    read-only sessions): the primary's collector computes them and they replicate (the API
    answers 404, the CLI exits 1)."""


class RecomputeFailed(RuntimeError):
    """The job's figures could not be computed (its last recompute raised; the API answers 500
    with the reason). A new span for the job retries it."""


def _looks_like_a_date(text: str) -> bool:
    """Whether ``text`` is eight digits that make a date (``20261201``, ISO 8601's basic form):
    read as unix seconds it would be a day of 1970, which no one means."""
    if len(text) != 8 or not text.isdigit():
        return False
    try:
        datetime.strptime(text, "%Y%m%d")
    except ValueError:
        return False
    return True


def parse_instant(text: str | None, now: float) -> float | None:
    """``7d``/``12h``/``30m`` before ``now`` (also ``-7d``, ``now-7d``), ``now``, ISO 8601, or
    unix seconds; None if empty."""
    if text is None or text.strip() == "":
        return None
    if text.strip() == "now":
        return now
    m = _RELATIVE.match(text)
    if m:
        return now - float(m.group(1)) * _UNIT_S[m.group(2)]
    unreadable = QueryError(
        f"cannot read time {text!r}: use ISO 8601 (2026-11-29T08:00:00Z), unix seconds, "
        "now, or a duration before now such as 7d, 12h, 30m (or -7d, now-7d)"
    )
    if not text.isascii():  # float() and fromisoformat() read other scripts' digits too
        raise unreadable
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):  # float() reads 'nan' and 'inf' too
            raise unreadable
        if _looks_like_a_date(text.strip()):
            raise QueryError(
                f"time {text!r} reads as unix seconds in 1970 but looks like a date: write "
                f"{text.strip()[:4]}-{text.strip()[4:6]}-{text.strip()[6:]} (ISO 8601)"
            )
        return seconds
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise unreadable from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


class Query:
    """Read-side answers: stored figures, never recomputed by a list read."""

    def __init__(
        self,
        pipeline: Pipeline,
        clock: Callable[[], float] = time.time,
        read_wait_s: float = DEFAULT_READ_WAIT_S,
        wait_fresh: bool = False,
        cache_jobs: int = 0,
        recheck_s: float = DEFAULT_READ_RECHECK_S,
    ) -> None:
        self.pipeline = pipeline
        self.store = pipeline.store
        self.clock = clock
        self.read_wait_s = read_wait_s
        self.wait_fresh = wait_fresh
        self.answers = JobAnswers(cache_jobs) if cache_jobs > 0 and not wait_fresh else None
        """The last encoded answer of up to ``cache_jobs`` jobs (:meth:`job_body`); None: off."""
        self.recheck_s = recheck_s
        """How long a kept answer's stamp, once checked, is trusted without a lookup (0: never);
        this pipeline's own changes mark it unchecked at once."""
        if self.answers is not None:
            pipeline.watch(self.answers.mark_unchecked)

    def job(self, job_id: str) -> JobJSON:
        """One job's figures (every field of section 5), with ``computed_at`` and ``fresh``
        (False while spans newer than the figures await their recompute).

        When the job's last recompute failed, the figures from before it (if any) come with
        ``fresh: false`` and ``error`` saying why; with none, :class:`RecomputeFailed`."""
        return self._answer(job_id, *self._stored(job_id))

    def _answer(
        self, job_id: str, fresh: bool, failure: str | None, job: JobJSON | None
    ) -> JobJSON:
        if job is None:
            raise self._missing(job_id, fresh, failure)
        job["fresh"] = fresh and failure is None
        if failure is not None:
            job["error"] = f"the newest figures could not be computed: {failure}"
        return job

    def job_body(self, job_id: str, encode: Callable[[Any], bytes]) -> bytes:
        """:meth:`job`'s answer encoded by ``encode``, the same bytes, with its side effects
        (a dirty job's recompute scheduled). With ``cache_jobs``, the answer of a job whose
        :meth:`Store.figures_stamp` is unchanged since its last read comes from
        :attr:`answers` (one indexed lookup instead of the summary's read, decode and encode);
        within ``recheck_s`` of that lookup, and while this process's pipeline changed nothing
        of the job, without the lookup.
        """
        answers = self.answers
        if answers is None:
            return encode(self.job(job_id))
        if self.recheck_s > 0:
            trusted = answers.trusted(job_id, self.recheck_s)
            if trusted is not None:
                trusted_stamp, trusted_body = trusted
                if trusted_stamp.dirty:  # as job() does, make sure its recompute is under way
                    self.pipeline.schedule(job_id, dirty=True)
                return trusted_body
        token = answers.token()  # before the lookup: a change marked after it is not missed
        checked = answers.clock()
        stamp = self.store.figures_stamp(job_id)
        if stamp is None or stamp.computed_at is None:  # unknown, or no figures: the plain read
            return encode(self.job(job_id))
        kept = answers.get(job_id, stamp, checked, token)
        if kept is not None:
            if stamp.dirty:  # as job() does, make sure its recompute is under way
                self.pipeline.schedule(job_id, dirty=True)
            return kept
        fresh, failure, job = self._stored(job_id)
        body = encode(self._answer(job_id, fresh, failure, job))
        assert job is not None  # figures are never removed
        if (
            fresh is not stamp.dirty
            and failure == stamp.failure
            and job.get("computed_at") == stamp.computed_at
            and job.get("span_count") == stamp.span_count
            and job.get("last_span_end") == stamp.last_span_end
        ):  # what was read is what the stamp names (nothing saved in between): keep it
            answers.put(job_id, stamp, body, checked, token)
        return body

    def segments(self, job_id: str) -> list[SegmentJSON]:
        """A job's stored segments in time order (for timelines), on the terms of :meth:`job`."""
        fresh, failure, job = self._stored(job_id)
        if job is None:
            raise self._missing(job_id, fresh, failure)
        return self.store.get_segments(job_id)

    def _stored(self, job_id: str) -> tuple[bool, str | None, JobJSON | None]:
        """Whether the job's figures include every acknowledged span, why its last recompute
        failed (None: it did not), and its stored figures (None: none yet).

        Never waits for a job that has figures (its recompute is scheduled when it is dirty);
        a job with spans but no figures yet is waited for, at most ``read_wait_s``."""
        if self.wait_fresh:
            fresh = self.pipeline.fresh(job_id, self.read_wait_s)
            _, failure, job = self.store.job_state(job_id)
            return fresh, failure, job
        dirty, failure, job = self.store.job_state(job_id)  # one query: the hot read
        if not dirty:
            return True, failure, job
        self.pipeline.schedule(job_id, dirty=True)
        if job is not None:
            return False, failure, job
        fresh = self.pipeline.fresh(job_id, self.read_wait_s)
        _, failure, job = self.store.job_state(job_id)
        return fresh, failure, job

    def jobs(
        self,
        state: str | None = None,
        model: str | None = None,
        team: str | None = None,
        since: str | None = None,
        limit: int = 1000,
    ) -> list[JobRowJSON]:
        """Stored jobs, newest first, filtered by state, model, team and end time."""
        if state is not None and state not in STATES:
            raise QueryError(f"state must be one of {', '.join(STATES)}; got {state!r}")
        if not 1 <= limit <= MAX_LIST:
            raise QueryError(f"limit must be between 1 and {MAX_LIST:,}; got {limit}")
        return self.store.list_jobs(
            state=state,
            model=model,
            team=team,
            since=parse_instant(since, self.clock()),
            limit=limit,
        )

    def lost_time(
        self, group_by: str = "component", since: str | None = None, until: str | None = None
    ) -> list[LostTimeJSON]:
        """Stored idle and failure seconds in ``[since, until]`` grouped by ``group_by``, largest
        first. ``until`` defaults to now: the window ends there even where a stored segment runs
        past it (a sender's clock a little ahead)."""
        if group_by not in GROUP_BYS:
            raise QueryError(f"group_by must be one of {', '.join(GROUP_BYS)}; got {group_by!r}")
        now = self.clock()
        lo, hi = parse_instant(since, now), parse_instant(until, now)
        if hi is None:
            hi = now
            if lo is not None and lo > now:
                raise QueryError("since is after now: give an until after it")
        if lo is not None and hi < lo:
            raise QueryError("until is before since")
        return self.store.lost_time(group_by, lo, hi)

    def pending_jobs(self) -> int:
        """How many jobs have spans newer than their stored figures (the worker's backlog)."""
        return self.store.span_counts()["dirty_jobs"]

    def _missing(self, job_id: str, fresh: bool, failure: str | None) -> Exception:
        if failure is not None:
            return RecomputeFailed(
                f"the figures of job {job_id!r} could not be computed: {failure}"
            )
        if fresh:
            return NotFound(f"no job {job_id!r}")
        if self.pipeline.read_only:  # nothing here will ever compute them
            return NotComputedHere(
                f"job {job_id!r} has spans but no figures in this read-only database: figures "
                "are computed by the primary's collector (`ett serve` on the primary) and "
                "reach a standby by replication"
            )
        return NotReady(
            f"job {job_id!r} has spans but its figures are not computed yet; try again shortly"
        )
