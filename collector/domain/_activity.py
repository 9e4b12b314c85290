"""What a job's ranks did, from its raw spans: the detail behind a job's figures.

The figures (``docs/metrics.md``) say how much time went where; the activity says which rank did
what and when, so a timeline can show the critical rank, the stragglers, each checkpoint's
blocking and persist parts, and each compile with its cache outcome. Pure: spans in, frozen
records out; a checkpoint is committed by the figures' own rule (:func:`checkpoints_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ett import semconv as sc

from ._checkpoints import checkpoints_of
from .model import AttrValue, SpanRecord


@dataclass(frozen=True, slots=True)
class StartupPhase:
    """One rank's start-up phase (``ett.startup.<phase>``) and the component it is charged to."""

    attempt: int
    rank: int
    phase: str
    component: AttrValue
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class FirstBatch:
    """The instant a rank's first batch ended (``ett.first_batch``), and its step."""

    attempt: int
    rank: int
    at: float
    step: int | None


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """One ``(attempt, step)`` save over every rank.

    ``blocking_s = save_end − save_start`` (earliest save start to latest save end);
    ``persist_s = persist_end − save_end`` (latest persist end; None without a persist span);
    ``committed_at`` is when the figures count it committed (:func:`checkpoints_of`).
    """

    attempt: int
    step: int
    mode: AttrValue
    bytes: int | None
    save_start: float
    save_end: float
    persist_end: float | None
    blocking_s: float
    persist_s: float | None
    committed_at: float | None


@dataclass(frozen=True, slots=True)
class Restore:
    """One rank's ``ett.startup.checkpoint_load`` and the step it restored."""

    attempt: int
    rank: int
    step: int | None
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Compile:
    """One ``ett.compile``: ``duration_s = end − start``; ``in_startup`` when it began before
    the rank's first batch ended (or the rank never trained)."""

    attempt: int
    rank: int
    start: float
    end: float
    duration_s: float
    cache: AttrValue
    frames: int | None
    in_startup: bool


@dataclass(frozen=True, slots=True)
class Failure:
    """One ``ett.failure`` event: its instant, cause, step and error type."""

    attempt: int
    rank: int
    at: float
    cause: AttrValue
    step: int | None
    error_type: AttrValue


@dataclass(frozen=True, slots=True)
class Activity:
    """A job's activity, each part in time order (checkpoints by attempt, then step)."""

    startup: tuple[StartupPhase, ...]
    first_batches: tuple[FirstBatch, ...]
    checkpoints: tuple[CheckpointRow, ...]
    restores: tuple[Restore, ...]
    compiles: tuple[Compile, ...]
    failures: tuple[Failure, ...]


@dataclass(slots=True)
class _Kinds:
    """The spans of one job sorted by ``(start, attempt, rank, name)``, split by what they are."""

    startup: list[tuple[str, SpanRecord]] = field(default_factory=list)
    first_batches: list[SpanRecord] = field(default_factory=list)
    checkpoints: list[SpanRecord] = field(default_factory=list)
    compiles: list[SpanRecord] = field(default_factory=list)
    failures: list[SpanRecord] = field(default_factory=list)


def job_activity(spans: Iterable[SpanRecord]) -> Activity:
    """The job's start-up phases per rank, first batches, checkpoint saves (blocking, persist,
    committed), restores, compiles (cache hit or miss) and failures, each in time order."""
    ordered = sorted(spans, key=lambda s: (s.start, s.attempt, s.rank, s.name))
    kinds = _split(ordered)
    return Activity(
        startup=tuple(_startup(kinds.startup)),
        first_batches=tuple(_first_batches(kinds.first_batches)),
        checkpoints=tuple(_checkpoints(kinds.checkpoints, committed_at(ordered))),
        restores=tuple(_restores(kinds.startup)),
        compiles=tuple(_compiles(kinds.compiles, _trained_at(kinds.first_batches))),
        failures=tuple(_failures(kinds.failures)),
    )


def committed_at(spans: Sequence[SpanRecord]) -> dict[tuple[int, int], float | None]:
    """``(attempt, step) -> committed_at`` by the figures' own rule (:func:`checkpoints_of`, per
    attempt: the latest persist end once every rank that saved the step has persisted it; the
    latest save end for a sync save), so a timeline marks a checkpoint committed exactly when
    the figures count it."""
    by_attempt: dict[int, list[SpanRecord]] = {}
    for s in spans:
        by_attempt.setdefault(s.attempt, []).append(s)
    return {
        (attempt, c.step): c.committed_at
        for attempt, group in by_attempt.items()
        for c in checkpoints_of(group)
        if c.step is not None
    }


def _split(ordered: Sequence[SpanRecord]) -> _Kinds:
    kinds = _Kinds()
    for s in ordered:
        if s.name.startswith(sc.SPAN_STARTUP_PREFIX):
            kinds.startup.append((s.name[len(sc.SPAN_STARTUP_PREFIX) :], s))
        elif s.name == sc.SPAN_FIRST_BATCH:
            kinds.first_batches.append(s)
        elif s.name in (sc.SPAN_CHECKPOINT_SAVE, sc.SPAN_CHECKPOINT_PERSIST):
            kinds.checkpoints.append(s)
        elif s.name == sc.SPAN_COMPILE:
            kinds.compiles.append(s)
        elif s.name == sc.SPAN_FAILURE:
            kinds.failures.append(s)
    return kinds


def _int(value: Any) -> int | None:
    """An attribute as a whole number, or None when it is missing or is not one."""
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _startup(phases: Iterable[tuple[str, SpanRecord]]) -> Iterable[StartupPhase]:
    for phase, s in phases:
        component = s.attr(sc.COMPONENT) or sc.default_component(phase)
        yield StartupPhase(s.attempt, s.rank, phase, component, s.start, s.end)


def _restores(phases: Iterable[tuple[str, SpanRecord]]) -> Iterable[Restore]:
    for phase, s in phases:
        if phase == sc.StartupPhaseValues.CHECKPOINT_LOAD.value:
            yield Restore(s.attempt, s.rank, _int(s.attr(sc.CHECKPOINT_STEP)), s.start, s.end)


def _first_batches(spans: Iterable[SpanRecord]) -> Iterable[FirstBatch]:
    for s in spans:
        yield FirstBatch(s.attempt, s.rank, s.end, _int(s.attr(sc.STEP)))


def _trained_at(first_batches: Iterable[SpanRecord]) -> dict[tuple[int, int], float]:
    """``(attempt, rank) -> the latest end of its first-batch spans``."""
    out: dict[tuple[int, int], float] = {}
    for s in first_batches:
        key = (s.attempt, s.rank)
        out[key] = max(out.get(key, s.end), s.end)
    return out


def _compiles(
    spans: Iterable[SpanRecord], trained_at: dict[tuple[int, int], float]
) -> Iterable[Compile]:
    for s in spans:
        trained = trained_at.get((s.attempt, s.rank))
        yield Compile(
            attempt=s.attempt,
            rank=s.rank,
            start=s.start,
            end=s.end,
            duration_s=s.end - s.start,
            cache=s.attr(sc.COMPILE_CACHE),
            frames=_int(s.attr(sc.COMPILE_FRAMES)),
            in_startup=trained is None or s.start < trained,
        )


def startup_compile_cache(spans: Iterable[SpanRecord]) -> str | None:
    """The compile-cache outcome of the first attempt's start-up: its ``ett.compile`` spans
    (attempt 0's, over ranks) that are :attr:`Compile.in_startup`, said as one compile says
    its lookups: ``partial`` when they found both hits and misses (a ``partial`` compile, or a
    hit beside a miss), else ``hit`` or ``miss``; ``off`` when none looked the cache up (``off``
    or unsaid); None without a start-up compile."""
    mine: dict[str, list[SpanRecord]] = {sc.SPAN_COMPILE: [], sc.SPAN_FIRST_BATCH: []}
    for s in spans:  # one pass, keeping only the few spans read (not the windows)
        if s.name in mine and s.attempt == 0:
            mine[s.name].append(s)
    if not mine[sc.SPAN_COMPILE]:
        return None
    compiles = _compiles(mine[sc.SPAN_COMPILE], _trained_at(mine[sc.SPAN_FIRST_BATCH]))
    said = {c.cache if isinstance(c.cache, str) else None for c in compiles if c.in_startup}
    if not said:
        return None
    values = sc.CompileCacheValues
    hit = bool(said & {values.HIT.value, values.PARTIAL.value})
    miss = bool(said & {values.MISS.value, values.PARTIAL.value})
    if hit and miss:
        return values.PARTIAL.value
    return values.HIT.value if hit else values.MISS.value if miss else values.OFF.value


def _failures(spans: Iterable[SpanRecord]) -> Iterable[Failure]:
    for s in spans:
        yield Failure(
            attempt=s.attempt,
            rank=s.rank,
            at=s.start,
            cause=s.attr(sc.FAILURE_CAUSE),
            step=_int(s.attr(sc.STEP)),
            error_type=s.attr(sc.ERROR_TYPE),
        )


@dataclass(slots=True)
class _Save:
    """The saves and persists of one ``(attempt, step)`` so far, over ranks."""

    mode: AttrValue = None
    bytes: int | None = None
    save_start: float | None = None
    save_end: float | None = None
    persist_end: float | None = None

    def add(self, s: SpanRecord) -> None:
        if s.name == sc.SPAN_CHECKPOINT_PERSIST:
            self.persist_end = _latest(self.persist_end, s.end)
            return
        self.save_start = s.start if self.save_start is None else min(self.save_start, s.start)
        self.save_end = _latest(self.save_end, s.end)
        self.mode = s.attr(sc.CHECKPOINT_MODE) or self.mode
        size = _int(s.attr(sc.CHECKPOINT_BYTES))
        if size is not None:
            self.bytes = (self.bytes or 0) + size


def _latest(so_far: float | None, t: float) -> float:
    return t if so_far is None else max(so_far, t)


def _checkpoints(
    spans: Iterable[SpanRecord], committed: dict[tuple[int, int], float | None]
) -> Iterable[CheckpointRow]:
    """One row per ``(attempt, step)`` with a save span (a persist whose save never arrived has
    nothing to anchor it), by attempt then step."""
    saves: dict[tuple[int, int], _Save] = {}
    for s in spans:
        step = _int(s.attr(sc.CHECKPOINT_STEP))
        if step is not None:
            saves.setdefault((s.attempt, step), _Save()).add(s)
    for (attempt, step), row in sorted(saves.items(), key=lambda kv: kv[0]):
        start, end, persisted = row.save_start, row.save_end, row.persist_end
        if start is None or end is None:
            continue
        persist_s = None if persisted is None else persisted - end
        at = committed.get((attempt, step))
        yield CheckpointRow(
            attempt, step, row.mode, row.bytes, start, end, persisted, end - start, persist_s, at
        )


_LOSS_KEYS = (sc.TELEMETRY_DROPPED_SPANS, sc.TELEMETRY_SPOOL_DROPPED_SPANS)


def telemetry_lost_spans(spans: Iterable[SpanRecord]) -> int:
    """Spans the job's emitters said they lost (an exporter queue or a spool that was full, a
    collector that refused them for good): per attempt and rank, the largest
    ``ett.telemetry.dropped_spans`` of its windows and attempt span (each a running count of
    its process) plus the largest ``ett.telemetry.spool_dropped_spans``, summed. 0 when none
    said so. The figures then miss what the lost spans said, in either direction: training runs
    from the first batch to the last progress, so a window lost mid-attempt still reads as
    training, windows lost at an attempt's end as its shutdown, a lost save as training and a
    lost failure as nothing."""
    most: dict[tuple[int, int, str], int] = {}
    lost, spool = _LOSS_KEYS
    for s in spans:  # on every recompute: two key tests a span, the rest only where one is said
        attrs = s.attributes
        if lost not in attrs and spool not in attrs:
            continue
        for key in _LOSS_KEYS:
            n = attrs.get(key)
            if type(n) is int and n > 0:
                at = (s.attempt, s.rank, key)
                most[at] = max(most.get(at, 0), n)
    return sum(most.values())
