"""Inside the loop, per model: slow time lost and throughput per rank over a window (issue 26).

The Fleet page ranks models by slow time (``GET /api/v1/models/performance``) and Prometheus
reads the same figures (``ett_model_*``, :mod:`ett_collector.read.metrics_performance`). Per model,
over its jobs that ended (or, live, last reported) in ``[since, now]``:

- ``slow_s``: the sum of the jobs' slow time (``collector/domain/_performance.py``: the seconds
  by which windows' mean steps ran beyond the job's own ideal step time); ``stepping_s``: the
  sum of those jobs' stepping time (the same windows' seconds, stalls left out);
  ``slow_pct = 100 * slow_s / stepping_s`` (never above 100); ``productive_s``: the sum of
  those jobs' ETT productive seconds;
- ``samples_per_s_per_rank``: the median over the jobs of each job's median rank throughput
  (a rank's samples over its training windows' seconds);
- ``ideal_step_s``: the median over the jobs of their ideal step times (jobs of one model may
  differ in batch size: a hint, not a baseline);
- ``straggler_jobs``: jobs whose straggler rank is named; ``straggler_score``: the highest
  top-rank score of the jobs' attempts (``collector/domain/_performance.py``: a rank's compute
  per step over the other ranks' median, over the attempt), None without two timed ranks;
- ``rank_s``: the rank-seconds of the jobs' training windows (what a slower step costs in GPU
  time).

Cheap by construction: a job's facts are computed once per recompute of its figures (memoised
on its ``computed_at``), at most :data:`MAX_JOBS` jobs (the newest) are read per answer, and a
whole answer is reused for :data:`CACHE_S` seconds. A job whose raw spans retention pruned gives
the facts kept when they went (``collector/storage/_kept_performance.py``), the same as before.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..domain._performance import performance
from ..domain._throughput import rank_rate, rank_seconds
from ..storage._series import job_points
from .query import Query, QueryError, parse_instant

MAX_JOBS = 500
"""The most jobs (the newest) one answer reads."""
CACHE_S = 30.0
"""How long one answer is reused (per window and filters)."""
DEFAULT_SINCE = "7d"
MAX_ANSWERS = 64
"""The most answers (windows and filters) kept for reuse."""


@dataclass(frozen=True)
class JobFacts:
    """One job's performance facts (None where the job has no training window)."""

    model: str | None
    slow_s: float | None
    productive_s: float
    stepping_s: float
    """The base of the job's slow time: its ``stepping_s`` (a job pruned with figures kept
    before 2026-12-06 has none: its productive seconds, the base its ``slow_pct`` had, or its
    slow time where that is more, so that no share passes 100 %)."""
    rank_samples_per_s: float | None
    ideal_step_s: float | None
    straggler: bool
    straggler_score: float | None
    rank_s: float


def _job_facts(
    row: Any, perf: dict[str, Any], rank_samples_per_s: float | None, rank_s: float
) -> JobFacts:
    """A job's facts from its performance figures ``perf`` and its rank rate and seconds."""
    slow = perf["slow_s"]
    ideal = perf["ideal_step_s"]
    productive = float(row["wall_s"]) * float(row["ett_pct"]) / 100.0
    stepping = perf.get("stepping_s")
    if not isinstance(stepping, int | float):  # kept before 2026-12-06
        stepping = max(productive, float(slow) if isinstance(slow, int | float) else 0.0)
    return JobFacts(
        model=row["model"],
        slow_s=float(slow) if isinstance(slow, int | float) else None,
        productive_s=productive,
        stepping_s=float(stepping),
        rank_samples_per_s=rank_samples_per_s,
        ideal_step_s=float(ideal) if isinstance(ideal, int | float) else None,
        straggler=perf.get("straggler") is not None,
        straggler_score=_top_score(perf["stragglers"]),
        rank_s=rank_s,
    )


class ModelPerformance:
    """Per-model performance answers over ``query``'s store (see the module docstring)."""

    def __init__(self, query: Query, cache_s: float = CACHE_S, max_jobs: int = MAX_JOBS) -> None:
        self.query = query
        self.cache_s = cache_s
        self.max_jobs = max_jobs
        self._lock = threading.Lock()
        self._jobs: dict[str, tuple[float, JobFacts | None]] = {}
        self._answers: dict[tuple[Any, ...], tuple[float, dict[str, Any]]] = {}

    def _facts(self, row: Any) -> JobFacts | None:
        job_id, stamp = str(row["job_id"]), float(row["computed_at"])
        with self._lock:
            known = self._jobs.get(job_id)
        if known is not None and known[0] == stamp:
            return known[1]
        facts = None
        kept = self.query.store.kept_performance(job_id)
        if kept is not None:  # its raw spans were pruned: the facts of before
            if kept.figures.get("points"):
                facts = _job_facts(row, kept.figures, kept.rank_samples_per_s, kept.rank_s)
        else:
            spans, rows = self.query.store.load_performance(job_id)
            points = job_points(spans, rows, self.query.store.compactor.retention_s)
            if points:
                perf = performance(points, spans)
                facts = _job_facts(row, perf, rank_rate(points), rank_seconds(points))
        with self._lock:
            self._jobs[job_id] = (stamp, facts)
        return facts

    def models(
        self, since: str | None = None, model: str | None = None, team: str | None = None
    ) -> dict[str, Any]:
        """``{since, until, jobs_read, truncated, models: [...]}``, most slow seconds first."""
        key = (since or DEFAULT_SINCE, model, team)
        now_m = time.monotonic()
        with self._lock:
            cached = self._answers.get(key)
        if cached is not None and now_m - cached[0] < self.cache_s:
            return cached[1]
        now = self.query.clock()
        lo = parse_instant(since or DEFAULT_SINCE, now)
        if lo is None or lo >= now:
            raise QueryError("since must be before now")
        rows = self.query.store.list_jobs(model=model, team=team, since=lo, limit=self.max_jobs)
        facts = [f for f in (self._facts(r) for r in rows) if f is not None]
        answer = {
            "since": lo,
            "until": now,
            "jobs_read": len(rows),
            "truncated": len(rows) >= self.max_jobs,
            "models": _by_model(facts),
        }
        with self._lock:
            if len(self._answers) >= MAX_ANSWERS:  # windows and filters come from the URL
                self._answers.clear()
            self._answers[key] = (now_m, answer)
            live = {str(r["job_id"]) for r in rows}
            if len(self._jobs) > 4 * self.max_jobs:  # forget jobs no longer read
                self._jobs = {k: v for k, v in self._jobs.items() if k in live}
        return answer


def _top_score(attempts: Any) -> float | None:
    """The highest ``score`` of the per-attempt straggler entries (None: no entry)."""
    scores = [float(a["score"]) for a in attempts]
    return max(scores) if scores else None


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _by_model(facts: list[JobFacts]) -> list[dict[str, Any]]:
    groups: dict[str | None, list[JobFacts]] = {}
    for f in facts:
        groups.setdefault(f.model, []).append(f)
    out: list[dict[str, Any]] = []
    for name, jobs in groups.items():
        timed = [j for j in jobs if j.slow_s is not None]
        slow = sum(j.slow_s or 0.0 for j in timed)
        productive = sum(j.productive_s for j in timed)
        stepping = sum(j.stepping_s for j in timed)
        out.append(
            {
                "model": name,
                "jobs": len(jobs),
                "jobs_with_ideal": len(timed),
                "slow_s": round(slow, 6),
                "productive_s": round(productive, 6),
                "stepping_s": round(stepping, 6),
                "slow_pct": round(100.0 * slow / stepping, 4) if stepping > 0 else None,
                "samples_per_s_per_rank": _median([j.rank_samples_per_s for j in jobs]),
                "ideal_step_s": _median([j.ideal_step_s for j in jobs]),
                "straggler_jobs": sum(1 for j in jobs if j.straggler),
                "straggler_score": max(
                    (j.straggler_score for j in jobs if j.straggler_score is not None),
                    default=None,
                ),
                "rank_s": round(sum(j.rank_s for j in jobs), 3),
            }
        )
    out.sort(key=lambda m: (-float(m["slow_s"]), str(m["model"])))
    return out
