"""A fleet: which jobs exist (model, team, world size, arrival) and their generation, in order.

Each job draws from its own random stream seeded by ``(seed, index)``, so a job does not change
when the fleet around it grows, and the same arguments give the same spans byte for byte.

The history ends where its window ends, at ``start + days`` (with the default start, ``now``): no
span of it ends later. The ``jobs`` training jobs arrive uniformly over the window and are drawn
as always; a job that would still be running at the end (its training, a restart, or the publish
job after it, crossing the end) is left out whole: none of its spans is sent and it has no truth,
and :func:`generate` reports it through ``on_dropped``. Jobs are never cut short, so the history
holds no half jobs that would look presumed dead. The ``--live`` jobs are not history: they start
now and run on in real time.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ett import semconv

from ._jobs import JobSpec, SimJob, generate_job
from .profile import Profile
from .regression import Regression, check_regressions, format_instant
from .straggler import Straggler, check_stragglers
from .truth import Truth, compute_truth

_EARLIEST_S = 0.0
_LATEST_S = 16_725_225_600.0  # 2500-01-01: span instants are unsigned 64-bit nanoseconds


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """What ``ett simulate`` was asked for. ``start`` is unix seconds (default: now - days);
    the history is the window ``[start, start + days]`` (see :meth:`window`)."""

    profile: Profile
    jobs: int = 20
    days: float = 7.0
    seed: int = 0
    start: float | None = None
    regressions: tuple[Regression, ...] = ()
    live: int = 0
    live_window_s: float = semconv.DEFAULT_WINDOW_S
    stragglers: tuple[Straggler, ...] = ()
    """Planted straggler ranks (``--straggler``)."""

    def __post_init__(self) -> None:
        if self.jobs < 0:
            raise ValueError(f"jobs must be >= 0, got {self.jobs}")
        if self.live < 0:
            raise ValueError(f"live must be >= 0, got {self.live}")
        if not self.days > 0 or not math.isfinite(self.days):
            raise ValueError(f"days must be a number > 0, got {self.days}")
        if self.start is not None and not math.isfinite(self.start):
            raise ValueError(f"start must be unix seconds, got {self.start}")
        check_regressions(self.regressions, self.profile)
        check_stragglers(self.stragglers, self.profile)

    def window(self, now: float) -> tuple[float, float]:
        """The history's ``(start, end)`` in unix seconds: from ``start`` (default ``now - days``)
        to ``start + days``; no span of the history ends after ``end``. ValueError when the window
        does not lie between 1970 and 2500 (instants OTLP can carry)."""
        start = self.start if self.start is not None else now - self.days * 86400
        end = start + self.days * 86400
        if start < _EARLIEST_S or end > _LATEST_S:
            raise ValueError(
                f"the history (start {_when(start)}, days {self.days:g}) would end at "
                f"{_when(end)}; it must lie between 1970-01-01 and 2500-01-01"
            )
        return start, end


def _when(instant: float) -> str:
    try:
        return format_instant(round(instant))
    except (OverflowError, ValueError, OSError):
        return f"{instant:.0f} unix seconds"


def history_job_id(seed: int, i: int) -> str:
    """The id of the ``i``-th history job of the fleet of ``seed``: the same in every run, so
    that a run replayed with the same ``--start`` changes nothing."""
    return f"sim{seed}-{i:05d}"


def job_specs(fleet: FleetSpec, now: float | None = None) -> list[JobSpec]:
    """The fleet's jobs in arrival order: history first, then the live ones (starting now).

    History jobs carry the window's end (``until_ms``): :func:`generate` leaves out those that
    would still be running then. Live jobs carry none."""
    now = time.time() if now is None else now
    start, end = fleet.window(now)
    until_ms = math.floor(end * 1000)
    specs: list[JobSpec] = []
    for i in range(fleet.jobs):
        stream = f"ett-simulate:{fleet.seed}:{i}"
        rng = random.Random(stream)
        arrival_ms = round((start + rng.random() * fleet.days * 86400) * 1000)
        job_id = history_job_id(fleet.seed, i)
        specs.append(_drawn(rng, stream, fleet.profile, job_id, arrival_ms, until_ms))
    specs.sort(key=lambda s: (s.arrival_ms, s.job_id))
    stamp = int(now)
    for i in range(fleet.live):
        stream = f"ett-simulate-live:{fleet.seed}:{stamp}:{i}"
        job_id = f"live{fleet.seed}-{stamp}-{i}"
        spec = _drawn(random.Random(stream), stream, fleet.profile, job_id, round(now * 1000), None)
        specs.append(replace(spec, live=True, window_s=fleet.live_window_s))
    return specs


def _drawn(
    rng: random.Random,
    stream: str,
    prof: Profile,
    job_id: str,
    arrival_ms: int,
    until_ms: int | None,
) -> JobSpec:
    """A job of the fleet whose model, team and world size ``rng`` (the random stream named
    ``stream``) draws, in that order; the job's own stream is ``stream:job``."""
    return JobSpec(
        job_id=job_id,
        model=rng.choice(list(prof.models)),
        team=rng.choice(prof.teams),
        world_size=rng.choices(list(prof["fleet.ranks"]), list(prof["fleet.rank_weights"]))[0],
        arrival_ms=arrival_ms,
        seed=f"{stream}:job",
        until_ms=until_ms,
    )


def generate(
    fleet: FleetSpec,
    specs: list[JobSpec] | None = None,
    on_dropped: Callable[[JobSpec], None] | None = None,
) -> Iterator[tuple[SimJob, Truth]]:
    """Every job of the fleet (and its publish job) with its truth, in arrival order.

    A history job that would still be running at the history's end (a span of it, of a restart
    or of its publish job ending after ``spec.until_ms``) is left out whole: nothing of it is
    yielded and ``on_dropped(spec)`` is called. It is generated first (and then discarded), so
    the jobs that are kept do not change."""
    for spec in specs if specs is not None else job_specs(fleet):
        jobs = generate_job(spec, fleet.profile, fleet.regressions, fleet.stragglers)
        if spec.until_ms is not None and last_ms(jobs) > spec.until_ms:
            if on_dropped is not None:
                on_dropped(spec)
            continue
        for job in jobs:
            yield job, compute_truth(job.plan, job.span_count)


def last_ms(jobs: list[SimJob]) -> int:
    """The latest instant (unix ms) of these jobs: the end of their last span or attempt."""
    return max(
        max((span[2] for job in jobs for rank in job.ranks for span in rank.spans), default=0),
        max((a.end for job in jobs for a in job.plan.attempts), default=0),
    )
