"""A fleet: which jobs exist (model, team, world size, arrival) and their generation, in order.

Each job draws from its own random stream seeded by ``(seed, index)``, so a job does not change
when the fleet around it grows, and the same arguments give the same spans byte for byte.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ett import semconv

from ._jobs import JobSpec, SimJob, generate_job
from .profile import Profile
from .regression import Regression, check_regressions
from .truth import Truth, compute_truth


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """What ``ett simulate`` was asked for. ``start`` is unix seconds (default: now - days)."""

    profile: Profile
    jobs: int = 20
    days: float = 7.0
    seed: int = 0
    start: float | None = None
    regressions: tuple[Regression, ...] = ()
    live: int = 0
    live_window_s: float = semconv.DEFAULT_WINDOW_S

    def __post_init__(self) -> None:
        if self.jobs < 0:
            raise ValueError(f"jobs must be >= 0, got {self.jobs}")
        if self.live < 0:
            raise ValueError(f"live must be >= 0, got {self.live}")
        if not self.days > 0:
            raise ValueError(f"days must be > 0, got {self.days}")
        check_regressions(self.regressions, self.profile)


def job_specs(fleet: FleetSpec, now: float | None = None) -> list[JobSpec]:
    """The fleet's jobs in arrival order: history first, then the live ones (starting now)."""
    now = time.time() if now is None else now
    start = fleet.start if fleet.start is not None else now - fleet.days * 86400
    prof = fleet.profile
    models = list(prof.models)
    sizes = list(prof["fleet.ranks"])
    weights = list(prof["fleet.rank_weights"])
    specs: list[JobSpec] = []
    for i in range(fleet.jobs):
        rng = random.Random(f"ett-simulate:{fleet.seed}:{i}")
        arrival = start + rng.random() * fleet.days * 86400
        specs.append(
            JobSpec(
                job_id=f"sim{fleet.seed}-{i:05d}",
                model=rng.choice(models),
                team=rng.choice(prof.teams),
                world_size=rng.choices(sizes, weights)[0],
                arrival_ms=round(arrival * 1000),
                seed=f"ett-simulate:{fleet.seed}:{i}:job",
            )
        )
    specs.sort(key=lambda s: (s.arrival_ms, s.job_id))
    stamp = int(now)
    for i in range(fleet.live):
        rng = random.Random(f"ett-simulate-live:{fleet.seed}:{stamp}:{i}")
        specs.append(
            JobSpec(
                job_id=f"live{fleet.seed}-{stamp}-{i}",
                model=rng.choice(models),
                team=rng.choice(prof.teams),
                world_size=rng.choices(sizes, weights)[0],
                arrival_ms=round(now * 1000),
                seed=f"ett-simulate-live:{fleet.seed}:{stamp}:{i}:job",
                live=True,
                window_s=fleet.live_window_s,
            )
        )
    return specs


def generate(
    fleet: FleetSpec, specs: list[JobSpec] | None = None
) -> Iterator[tuple[SimJob, Truth]]:
    """Every job of the fleet (and its publish job) with its truth, in arrival order."""
    for spec in specs if specs is not None else job_specs(fleet):
        for job in generate_job(spec, fleet.profile, fleet.regressions):
            yield job, compute_truth(job.plan, job.span_count)
