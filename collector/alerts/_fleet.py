"""The fleet as the alerts see it: one row of facts per job, grouped by model or team, summed
over rolling windows.

A job belongs to window ``W`` at instant ``t`` when its end (for a live job: its last span)
falls in ``(t - W, t]``. Sums over a window come from prefix sums over the group's jobs sorted by
end, so one window of one group costs two binary searches: the backtest steps through 30 days
this way without rescanning the fleet.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ett_collector.domain.model import JobState
from ett_collector.schemas import NO_LABEL

from .rules import COMPONENTS, GroupKey

if TYPE_CHECKING:
    from sqlalchemy import Engine

T = TypeVar("T")

UNKNOWN = NO_LABEL
"""The label value of a job without a model or team."""

SUMMED = ("wall", "productive", "idle", "failure", "blocking", "unsaved", "tts_sum", "tts_n")
"""The per-job figures summed over a window (``tts_n``: jobs whose time to start is known)."""


@dataclass(frozen=True, slots=True)
class Straggling:
    """The top rank of one attempt by compute per step (``loop_facts``)."""

    attempt: int
    rank: int
    score: float
    """Its compute per step over the other ranks' median, over the attempt."""
    ratios: tuple[tuple[float, int], ...]
    """``(ratio, windows)`` of its steady windows against the others at the same time, highest
    first (truncated: ``collector/domain/_loop_facts.py``)."""

    def windows_at(self, threshold: float) -> int:
        """Its windows with a ratio at or above ``threshold``."""
        return sum(n for r, n in self.ratios if r >= threshold)


@dataclass(frozen=True, slots=True)
class Seconds:
    """The seconds the alerts sum: of one job (:class:`JobFacts`) or of a window's jobs
    (:class:`WindowSums`)."""

    wall: float
    productive: float
    idle: float
    failure: float
    blocking: float
    unsaved: float


@dataclass(frozen=True, slots=True)
class JobFacts(Seconds):
    """What the alerts need of one job (from its stored summary)."""

    job_id: str
    model: str
    team: str
    state: str
    alloc: float
    end: float
    tts: float | None
    ttr: tuple[float, ...] = ()
    causes: dict[str, int] = field(default_factory=dict)
    lost: dict[str, float] = field(default_factory=dict)
    """Lost seconds by component; components outside :data:`COMPONENTS` are folded into other."""
    restarts: tuple[float, ...] = ()
    """Allocation instants of attempts after the first."""
    gpus: int = 1
    """Ranks of the job's widest attempt (at least 1): a lost second costs this many GPU-seconds."""
    trained: bool = True
    """Whether the job trained (reached a first batch); False for standalone jobs such as a
    publishing job, whose figures are not rates of training time."""
    failures: int = 0
    """Failed attempts."""
    throughput: float | None = None
    """Samples per rank-second of the job's loop (its stored ``loop_facts``, kept for ended
    jobs: ``collector/domain/_loop_facts.py``); None when not known."""
    loop_rank_s: float = 0.0
    """Rank-seconds the job spent stepping (outside stalls)."""
    stragglers: tuple[Straggling, ...] = ()
    """Per attempt with two or more timed ranks: its top rank and how long it straggled."""
    checkpoint_mode: str | None = None
    """``async`` when at least half of the job's saves were async, ``sync`` when fewer, None
    without a save or in figures stored before the count existed."""
    compile_cache: str | None = None
    """The cache outcome of the first attempt's start-up compiles (``hit``, ``miss``,
    ``partial``, ``off``: the summary's ``startup_compile_cache``), None without a start-up
    compile or in figures stored before the field existed."""
    first_batch: float | None = None
    """When the first attempt reached its first batch (None: it did not, or not yet)."""
    startup: dict[str, float] = field(default_factory=dict)
    """Seconds of each component in the first attempt's start-up, whole once ``first_batch``
    has come (``ett_collector.storage.first_startups``; components outside :data:`COMPONENTS`
    folded into other)."""
    saves: tuple[tuple[float, float], ...] = ()
    """``(end, blocking seconds)`` of each checkpoint save that blocked training, in order
    (``ett_collector.storage.checkpoint_saves``); whole once ended, the job running or not."""
    hours: float = field(init=False, repr=False, compare=False)
    """Its wall time in hours (derived)."""
    rates: dict[str, float] = field(init=False, repr=False, compare=False)
    """Lost seconds of every component of :data:`COMPONENTS` per wall hour (derived): the
    regression rule reads these for every baseline job at every instant a replay steps to, so
    they are divided once, here."""

    def __post_init__(self) -> None:
        hours = self.wall / 3600.0
        per = max(hours, 1e-9)
        object.__setattr__(self, "hours", hours)
        object.__setattr__(self, "rates", {c: self.lost.get(c, 0.0) / per for c in COMPONENTS})

    def group(self, by: GroupKey) -> str:
        """The job's model or team."""
        return self.model if by is GroupKey.MODEL else self.team

    def figure(self, name: str) -> float:
        """One of :data:`SUMMED` for this job."""
        if name == "tts_sum":
            return self.tts or 0.0
        if name == "tts_n":
            return 0.0 if self.tts is None else 1.0
        value: float = getattr(self, name)
        return value


def _folded(seconds: dict[str, Any]) -> dict[str, float]:
    """Seconds by component, those outside :data:`COMPONENTS` folded into other."""
    out: dict[str, float] = {}
    for comp, value in seconds.items():
        key = comp if comp in COMPONENTS else "other"
        out[key] = out.get(key, 0.0) + float(value)
    return out


def facts_from_summary(
    summary: dict[str, Any],
    startup: dict[str, float] | None = None,
    saves: Sequence[tuple[float, float]] = (),
) -> JobFacts:
    """Facts of one job from its ``JobSummary.to_dict()``, the seconds by component of its
    first start-up (``startup``; none when not given) and its checkpoint saves (``saves``)."""
    attempts = summary.get("attempts") or []
    first = next((a for a in attempts if a.get("attempt", 0) == 0), None)
    first_batch = None if first is None else first.get("first_batch")
    return JobFacts(
        job_id=summary["job_id"],
        model=summary.get("model") or UNKNOWN,
        team=summary.get("team") or UNKNOWN,
        state=summary["state"],
        alloc=float(summary["alloc"]),
        end=float(summary["end"]),
        wall=float(summary["wall_s"]),
        productive=float(summary["productive_s"]),
        idle=float(summary["idle_s"]),
        failure=float(summary["failure_s"]),
        blocking=float(summary["checkpoint_blocking_s"]),
        unsaved=float(summary["unsaved_s"]),
        tts=None if summary.get("tts_s") is None else float(summary["tts_s"]),
        ttr=tuple(float(x) for x in summary.get("ttr_s") or () if x is not None),
        causes={str(k): int(v) for k, v in (summary.get("failure_causes") or {}).items()},
        lost=_folded(summary.get("lost_by_component") or {}),
        restarts=tuple(float(a["alloc"]) for a in attempts if a.get("attempt", 0) > 0),
        gpus=max([len(a.get("ranks") or ()) for a in attempts] + [1]),
        trained=summary.get("tts_s") is not None or float(summary["productive_s"]) > 0,
        failures=int(summary.get("failures") or 0),
        checkpoint_mode=_checkpoint_mode(summary.get("checkpoint_blocking_stats")),
        compile_cache=_str_or_none(summary.get("startup_compile_cache")),
        first_batch=None if first_batch is None else float(first_batch),
        startup=_folded(startup or {}) if first_batch is not None else {},
        saves=tuple((float(e), float(x)) for e, x in saves),
        **_loop(summary.get("loop_facts")),
    )


def _checkpoint_mode(stats: Any) -> str | None:
    """A job's checkpoint mode from its ``checkpoint_blocking_stats`` (None: not known)."""
    if not isinstance(stats, dict) or "async_count" not in stats or not stats.get("count"):
        return None
    return "async" if 2 * int(stats["async_count"]) >= int(stats["count"]) else "sync"


def _str_or_none(value: Any) -> str | None:
    """A stored word, or None when it is missing, empty or not a string."""
    return value if isinstance(value, str) and value else None


def _loop(facts: Any) -> dict[str, Any]:
    """The :class:`JobFacts` fields of a stored ``loop_facts`` (none when absent)."""
    if not isinstance(facts, dict):
        return {}
    rate = facts.get("samples_per_rank_s")
    return {
        "throughput": None if rate is None else float(rate),
        "loop_rank_s": float(facts.get("loop_rank_s") or 0.0),
        "stragglers": tuple(
            Straggling(
                attempt=int(s["attempt"]),
                rank=int(s["rank"]),
                score=float(s["score"]),
                ratios=tuple((float(r), int(n)) for r, n in s.get("ratios") or ()),
            )
            for s in facts.get("stragglers") or ()
        ),
    }


def load_facts(engine: Engine, since: float | None) -> list[JobFacts]:
    """:func:`ett_collector.alerts._reads.load_facts` (kept here for the modules that import it
    from the fleet model; the read itself lives beside the service)."""
    from ._reads import load_facts as read  # lazy: the fleet model imports no storage

    return read(engine, since)


Save = tuple[float, float, JobFacts]
"""One checkpoint save of a group: its end, its blocking seconds and its job."""


@dataclass(frozen=True, slots=True)
class WindowSums(Seconds):
    """Sums over the jobs of one group in one window (every figure of :data:`SUMMED`)."""

    jobs: int
    tts_sum: float
    tts_n: float
    lost: dict[str, float]

    def minus(self, other: WindowSums) -> WindowSums:
        """These sums less ``other``'s (the baseline is the long window less the recent one)."""
        return WindowSums(
            jobs=self.jobs - other.jobs,
            wall=self.wall - other.wall,
            productive=self.productive - other.productive,
            idle=self.idle - other.idle,
            failure=self.failure - other.failure,
            blocking=self.blocking - other.blocking,
            unsaved=self.unsaved - other.unsaved,
            tts_sum=self.tts_sum - other.tts_sum,
            tts_n=self.tts_n - other.tts_n,
            lost={c: self.lost.get(c, 0.0) - other.lost.get(c, 0.0) for c in COMPONENTS},
        )


class _Group:
    """One group's jobs sorted by end, with prefix sums of every summed figure."""

    def __init__(self, jobs: Sequence[JobFacts]) -> None:
        self.jobs = sorted(jobs, key=lambda j: (j.end, j.job_id))
        self.ends = [j.end for j in self.jobs]
        self.running = [0]
        """``running[i]``: how many of the first ``i`` jobs are running (prefix counts)."""
        for j in self.jobs:
            self.running.append(self.running[-1] + (j.state == JobState.RUNNING))
        self.prefix: dict[str, list[float]] = {}
        for name in (*SUMMED, *(f"lost:{c}" for c in COMPONENTS)):
            acc, out = 0.0, [0.0]
            for j in self.jobs:
                acc += j.lost.get(name[5:], 0.0) if name.startswith("lost:") else j.figure(name)
                out.append(acc)
            self.prefix[name] = out
        self.starters = sorted(
            (j for j in self.jobs if j.first_batch is not None),
            key=lambda j: (j.first_batch, j.job_id),
        )
        self.first_batches = [j.first_batch or 0.0 for j in self.starters]
        self.saves = sorted(
            ((end, x, j) for j in self.jobs for end, x in j.saves),
            key=lambda s: (s[0], s[2].job_id),
        )
        self.save_ends = [s[0] for s in self.saves]

    def span(self, lo: float, hi: float) -> tuple[int, int]:
        """Index range of jobs with end in ``(lo, hi]``."""
        return _between(self.ends, lo, hi)

    def sums(self, lo: float, hi: float) -> WindowSums:
        i, k = self.span(lo, hi)
        p = self.prefix

        def s(name: str) -> float:
            return p[name][k] - p[name][i]

        return WindowSums(
            jobs=k - i,
            lost={c: s(f"lost:{c}") for c in COMPONENTS},
            **{name: s(name) for name in SUMMED},
        )

    def members(self, lo: float, hi: float) -> list[JobFacts]:
        i, k = self.span(lo, hi)
        return self.jobs[i:k]

    def window(self, lo: float, hi: float) -> Window:
        """The jobs, first start-ups and saves in ``(lo, hi]``."""
        ranges = (
            self.span(lo, hi),
            _between(self.first_batches, lo, hi),
            _between(self.save_ends, lo, hi),
        )
        return Window(self, ranges)


def _between(keys: Sequence[float], lo: float, hi: float) -> tuple[int, int]:
    """Index range of the sorted ``keys`` in ``(lo, hi]``."""
    return bisect.bisect_right(keys, lo), bisect.bisect_right(keys, hi)


@dataclass(frozen=True, slots=True)
class Window:
    """Which of a group's jobs, first start-ups and saves fall in one window: index ranges into
    the group's lists (by end, by first batch, by save end), bisected once and sliced on demand.
    Equal ranges, equal samples (the inputs of :meth:`Fleet.memo`)."""

    group: _Group
    ranges: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    """Of :meth:`members`, :meth:`started` and :meth:`saves`, in that order."""

    def members(self) -> list[JobFacts]:
        """The jobs that ended in the window, by end."""
        i, k = self.ranges[0]
        return self.group.jobs[i:k]

    def ended(self) -> list[JobFacts]:
        """The jobs of :meth:`members` that are not running (a replay's fleet has few running
        jobs: then the slice itself, without a pass over it)."""
        i, k = self.ranges[0]
        jobs = self.group.jobs[i:k]
        if self.group.running[k] == self.group.running[i]:
            return jobs
        return [j for j in jobs if j.state != JobState.RUNNING]

    def started(self) -> list[JobFacts]:
        """The jobs whose first attempt reached its first batch in the window, by that instant."""
        i, k = self.ranges[1]
        return self.group.starters[i:k]

    def saves(self) -> list[Save]:
        """The checkpoint saves that ended in the window, ``(end, blocking seconds, job)`` each,
        by end."""
        i, k = self.ranges[2]
        return self.group.saves[i:k]


class Fleet:
    """The jobs grouped by model and by team, ready for windowed sums at any instant."""

    def __init__(self, jobs: Iterable[JobFacts]) -> None:
        self.jobs = list(jobs)
        self._memo: dict[Hashable, tuple[Hashable, Any]] = {}
        self._groups: dict[GroupKey, dict[str, _Group]] = {}
        for by in GroupKey:
            buckets: dict[str, list[JobFacts]] = {}
            for j in self.jobs:
                buckets.setdefault(j.group(by), []).append(j)
            self._groups[by] = {k: _Group(v) for k, v in sorted(buckets.items())}

    def groups(self, by: GroupKey) -> list[str]:
        """The group values seen (sorted)."""
        return list(self._groups[by])

    def sums(self, by: GroupKey, key: str, t: float, window_s: float) -> WindowSums:
        """Sums over the group's jobs that ended in ``(t - window_s, t]``."""
        return self._groups[by][key].sums(t - window_s, t)

    def members(self, by: GroupKey, key: str, t: float, window_s: float) -> list[JobFacts]:
        """The group's jobs that ended in ``(t - window_s, t]``, by end."""
        return self._groups[by][key].members(t - window_s, t)

    def window(self, by: GroupKey, key: str, t: float, window_s: float) -> Window:
        """The group's jobs that ended in ``(t - window_s, t]`` (:meth:`members`), its jobs
        (running ones too) whose first attempt reached its first batch then, and its checkpoint
        saves (running jobs' too) that ended then (:class:`Window`)."""
        return self._groups[by][key].window(t - window_s, t)

    def memo(self, slot: Hashable, inputs: Hashable, compute: Callable[..., T], *args: Any) -> T:
        """``compute(*args)``, or its value from the last call of ``slot`` when that call had
        the same ``inputs``: a replay steps through instants where most groups' samples did
        not change (another group's job ended), and one value per slot bounds the memory."""
        kept = self._memo.get(slot)
        if kept is not None and kept[0] == inputs:
            value: T = kept[1]
            return value
        value = compute(*args)
        self._memo[slot] = (inputs, value)
        return value

    def live(self, by: GroupKey, key: str, state: str) -> list[JobFacts]:
        """The group's jobs whose stored state is ``state`` (running, presumed_dead)."""
        return [j for j in self._groups[by][key].jobs if j.state == state]

    def first_end(self) -> float | None:
        """The earliest job end (None: no jobs)."""
        return min((j.end for j in self.jobs), default=None)


def max_restarts(jobs: Iterable[JobFacts], t: float, window_s: float) -> tuple[int, str | None]:
    """The most restarts of one job in ``(t - window_s, t]``, and that job."""
    best, who = 0, None
    for j in jobs:
        n = sum(1 for a in j.restarts if t - window_s < a <= t)
        if n > best:
            best, who = n, j.job_id
    return best, who
