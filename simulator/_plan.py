"""What the simulator planted, per attempt: the instants and charged intervals the truth is
computed from (never from the collector's code), and the shared drawing context of one job."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .profile import Dist, Profile
from .regression import Regression, stretch

Interval = tuple[int, int, str]
"""``(start_ms, end_ms, component)``."""


@dataclass(slots=True)
class Checkpoint:
    """One checkpoint of an attempt (job level: over ranks)."""

    step: int
    snapshot: int
    block_end: int
    committed: int
    attempt: int


@dataclass(slots=True)
class AttemptPlan:
    """One attempt as planted. Instants in unix ms.

    ``startup`` charges ``[alloc, first]`` (or ``[alloc, end]`` when it never trained) along the
    critical path; ``cutouts`` are the training interruptions (non-overlapping, in order);
    ``shutdown`` charges a completed attempt's ``[progress, end]``; ``restored_snapshot`` is the
    snapshot instant, in this attempt, of the checkpoint the next attempt restores (None: none
    of this attempt's checkpoints).
    """

    number: int
    alloc: int
    first: int | None = None
    progress: int | None = None
    end: int = 0
    end_reason: str | None = None
    failed: bool = False
    cause: str | None = None
    critical_rank: int | None = None
    startup: list[Interval] = field(default_factory=list)
    cutouts: list[Interval] = field(default_factory=list)
    shutdown: list[Interval] = field(default_factory=list)
    restored_snapshot: int | None = None
    phase_ms: dict[str, list[int]] = field(default_factory=dict)
    """Planted duration of each start-up phase on each rank (for the distribution tests)."""


@dataclass(slots=True)
class JobPlan:
    """A job's identity and attempts."""

    job_id: str
    model: str
    team: str
    world_size: int
    attempts: list[AttemptPlan] = field(default_factory=list)
    standalone: bool = False
    train_ms: int = 0
    """Clean training time over all attempts (for the failure-rate test)."""


@dataclass
class Draw:
    """Drawing for one job: its random stream, its profile, and the regressions that apply."""

    rng: random.Random
    profile: Profile
    model: str
    team: str
    regressions: tuple[Regression, ...]
    jitter_sigma: float

    def k(self, component: str, at_ms: int) -> float:
        """The regression factor of ``component`` for a duration starting at ``at_ms``."""
        if not self.regressions:
            return 1.0
        return stretch(self.regressions, self.model, self.team, component, at_ms / 1000.0)

    def seconds(self, dist: Dist, component: str, at_ms: int, scale: float = 1.0) -> float:
        """One draw of ``dist`` in seconds, stretched by the regressions of ``component``."""
        return dist.sample(self.rng) * scale * self.k(component, at_ms)

    def ms(self, dist: Dist, component: str, at_ms: int, scale: float = 1.0) -> int:
        """One draw in whole milliseconds (at least 1)."""
        return to_ms(self.seconds(dist, component, at_ms, scale))

    def jitter(self) -> float:
        """A per-rank factor around 1 (log-normal with the profile's rank sigma)."""
        if self.jitter_sigma == 0:
            return 1.0
        return math.exp(self.jitter_sigma * self.rng.gauss(0.0, 1.0))

    def weighted(self, weights: dict[str, float]) -> str:
        """A key drawn with probability proportional to its weight."""
        keys = [k for k, w in weights.items() if w > 0]
        return self.rng.choices(keys, [weights[k] for k in keys])[0]


def to_ms(seconds: float) -> int:
    """Seconds to whole milliseconds, at least 1."""
    return max(1, round(seconds * 1000.0))
