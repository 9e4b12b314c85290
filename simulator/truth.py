"""Ground truth: the figures of each job, from what the simulator planted (docs/metrics.md).

Computed from the planted intervals of :mod:`ett_simulator._plan` (the start-up charged along the
critical path the simulator built, the cut-outs it planted, the checkpoint the next attempt
restored), never from the collector's code, so tests check the collector against an independent
account. Field names are the read API's (``GET /api/v1/jobs/{id}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from ett import semconv as sc
from ett_collector.domain.model import TimeSplit

from ._plan import AttemptPlan, Interval, JobPlan

_FAILURE = sc.ComponentValues.FAILURE.value
_SCHEDULER = sc.ComponentValues.SCHEDULER.value
_CHECKPOINT = sc.ComponentValues.CHECKPOINT.value


_HEAD: Final = ("job_id", "model", "team", "state")
"""The fields that open a line of ``--truth``, before the :class:`TimeSplit`'s."""


@dataclass(frozen=True, slots=True)
class Truth(TimeSplit):
    """What the simulator knows it generated for one job (seconds, percentages 0-100): the
    domain's :class:`TimeSplit` and the fields below."""

    job_id: str
    model: str
    team: str
    state: str
    tts_s: float | None
    ttr_s: list[float | None]
    failures: int
    failure_causes: dict[str, int]
    unsaved_s: float
    checkpoint_blocking_s: float
    lost_by_component: dict[str, float]
    attempts: list[dict[str, Any]]
    world_size: int
    standalone_publish: bool
    span_count: int = 0
    train_s: float = 0.0
    phase_s: dict[str, list[float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The object written as one line of ``--truth`` (without the per-phase samples)."""
        out = asdict(self)
        del out["phase_s"]
        return {key: out.pop(key) for key in _HEAD} | out


class _Tally:
    def __init__(self) -> None:
        self.ms = {"productive": 0, "idle": 0, "failure": 0}
        self.lost: dict[str, int] = {}
        self.unsaved = 0
        self.blocking = 0

    def charge(self, category: str, component: str, ms: int) -> None:
        if ms <= 0:
            return
        self.ms[category] += ms
        self.lost[component] = self.lost.get(component, 0) + ms

    def charge_all(self, category: str, intervals: list[Interval]) -> None:
        for s, e, comp in intervals:
            self.charge(category, comp, e - s)


def _clip(intervals: list[Interval], lo: int, hi: int) -> list[Interval]:
    return [(max(s, lo), min(e, hi), c) for s, e, c in intervals if min(e, hi) > max(s, lo)]


def _training(t: _Tally, a: AttemptPlan) -> None:
    assert a.first is not None and a.progress is not None
    lo, hi = a.first, a.progress
    cut = _clip(a.cutouts, lo, hi)
    t.charge_all("idle", cut)
    t.blocking += sum(e - s for s, e, c in cut if c == _CHECKPOINT)
    clean = (hi - lo) - sum(e - s for s, e, _ in cut)
    unsaved = 0
    if a.failed:
        since = lo if a.restored_snapshot is None else max(lo, a.restored_snapshot)
        if since < hi:
            unsaved = (hi - since) - sum(e - s for s, e, _ in _clip(cut, since, hi))
    t.charge("failure", _FAILURE, unsaved)
    t.unsaved += unsaved
    t.ms["productive"] += clean - unsaved


def _tally(job: JobPlan) -> _Tally:
    """Every planted millisecond of ``job`` charged: the restart gaps to the scheduler, each
    attempt's start-up (idle on the first attempt, failure after a failure), its training and
    its end (failure after a failure, else its shutdown, idle). AssertionError when the charges
    do not tile the wall time."""
    t = _Tally()
    attempts = job.attempts
    for i, a in enumerate(attempts):
        if i > 0:
            t.charge("failure", _SCHEDULER, a.alloc - attempts[i - 1].end)
        if a.first is None:
            t.charge_all("failure" if a.failed else "idle", a.startup)
            continue
        t.charge_all("idle" if i == 0 else "failure", a.startup)
        _training(t, a)
        assert a.progress is not None
        if a.failed:
            t.charge("failure", _FAILURE, a.end - a.progress)
        else:
            t.charge_all("idle", a.shutdown)
    wall = attempts[-1].end - attempts[0].alloc
    total = sum(t.ms.values())
    if total != wall:
        raise AssertionError(f"{job.job_id}: planted segments sum to {total} ms, wall {wall} ms")
    return t


def _failures(attempts: list[AttemptPlan]) -> tuple[dict[str, int], list[float | None]]:
    """The failed attempts' causes (count by cause) and each failure's time to recover: from
    its end to the next attempt's first batch (None when no next attempt trained)."""
    causes: dict[str, int] = {}
    ttr: list[float | None] = []
    for i, a in enumerate(attempts):
        if not a.failed:
            continue
        assert a.cause is not None
        causes[a.cause] = causes.get(a.cause, 0) + 1
        nxt = attempts[i + 1] if i + 1 < len(attempts) else None
        ttr.append(None if nxt is None or nxt.first is None else (nxt.first - a.end) / 1000)
    return causes, ttr


def _attempt_json(a: AttemptPlan) -> dict[str, Any]:
    return {
        "attempt": a.number,
        "alloc": a.alloc / 1000,
        "first_batch": None if a.first is None else a.first / 1000,
        "end": a.end / 1000,
        "end_reason": a.end_reason,
        "critical_rank": a.critical_rank,
    }


def compute_truth(job: JobPlan, span_count: int = 0) -> Truth:
    """The figures of ``job`` from its planted attempts (percentages of the wall time)."""
    t = _tally(job)
    attempts = job.attempts
    wall = attempts[-1].end - attempts[0].alloc
    causes, ttr = _failures(attempts)
    first = attempts[0]
    last = attempts[-1]
    lost = {k: v / 1000 for k, v in sorted(t.lost.items(), key=lambda kv: (-kv[1], kv[0]))}
    phase_s: dict[str, list[float]] = {}
    for a in attempts:
        for name, values in a.phase_ms.items():
            phase_s.setdefault(name, []).extend(v / 1000 for v in values)

    def pct(ms: int) -> float:
        return 100.0 * ms / wall if wall > 0 else 0.0

    return Truth(
        job_id=job.job_id,
        model=job.model,
        team=job.team,
        state="failed" if last.failed else "completed",
        wall_s=wall / 1000,
        productive_s=t.ms["productive"] / 1000,
        idle_s=t.ms["idle"] / 1000,
        failure_s=t.ms["failure"] / 1000,
        ett_pct=pct(t.ms["productive"]),
        idle_pct=pct(t.ms["idle"]),
        failure_pct=pct(t.ms["failure"]),
        tts_s=None if first.first is None else (first.first - first.alloc) / 1000,
        ttr_s=ttr,
        failures=len(ttr),
        failure_causes=causes,
        unsaved_s=t.unsaved / 1000,
        checkpoint_blocking_s=t.blocking / 1000,
        lost_by_component=lost,
        attempts=[_attempt_json(a) for a in attempts],
        world_size=job.world_size,
        standalone_publish=job.standalone,
        span_count=span_count,
        train_s=job.train_ms / 1000,
        phase_s=phase_s,
    )


_SECONDS = ("wall_s", "productive_s", "idle_s", "failure_s", "unsaved_s", "checkpoint_blocking_s")
_EXACT = ("state", "failures", "failure_causes")


def _close(a: float | None, b: Any, tol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - float(b)) <= tol


def differences(
    truth: Truth, figures: Mapping[str, Any], tol_s: float = 1e-3, components: bool = True
) -> list[str]:
    """Where a job's figures from the read API differ from its truth, one line each (empty:
    they agree within ``tol_s`` seconds). ``components`` also compares ``lost_by_component``."""
    out: list[str] = []
    for key in _SECONDS:
        if not _close(getattr(truth, key), figures.get(key), tol_s):
            out.append(f"{key}: truth {getattr(truth, key)}, collector {figures.get(key)}")
    for key in _EXACT:
        if getattr(truth, key) != figures.get(key):
            out.append(f"{key}: truth {getattr(truth, key)}, collector {figures.get(key)}")
    if not _close(truth.tts_s, figures.get("tts_s"), tol_s):
        out.append(f"tts_s: truth {truth.tts_s}, collector {figures.get('tts_s')}")
    ttr = list(figures.get("ttr_s") or [])
    if len(ttr) != len(truth.ttr_s) or not all(
        _close(a, b, tol_s) for a, b in zip(truth.ttr_s, ttr, strict=False)
    ):
        out.append(f"ttr_s: truth {truth.ttr_s}, collector {ttr}")
    if components:
        theirs: Mapping[str, float] = figures.get("lost_by_component") or {}
        for comp in sorted(set(truth.lost_by_component) | set(theirs)):
            a, b = truth.lost_by_component.get(comp, 0.0), theirs.get(comp, 0.0)
            if not _close(a, b, tol_s):
                out.append(f"lost_by_component[{comp}]: truth {a}, collector {b}")
    return out
