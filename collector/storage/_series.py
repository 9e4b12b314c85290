"""The step-time series of folded windows: what compaction keeps of each window's performance.

A window run (``_runs.py``) keeps a rank's first and last step and its summed samples, which
is all the rules of docs/metrics.md read; the step time, throughput and compute time of each window
(docs/metrics.md, "Inside the loop") would be gone. So compaction, in the transaction that
folds raw windows into runs, adds each window it folds (never a replay: one lying inside a
stored run) to ``window_series``: per (attempt, rank) and bucket of :data:`SERIES_S` seconds
(the bucket of the window's start) the windows, steps (``last - first + 1``), samples and
seconds (``end - start``), of the windows carrying ``ett.window.wait_s`` their steps,
seconds and summed wait, and the first window's start and the last window's end (migration
0012: when in its minute the rank trained, which the throughput series spreads the bucket's
samples over). Adding is order-free, like the fold: counts add, the first start is the least
and the last end the greatest. With 10 s windows a row stands for 6 windows of a rank: about
15 bytes per folded window in SQLite, within the compaction target of 100 bytes per ingested
span (``tests/performance/bench_step_series.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from ett import semconv as sc
from ett_collector.domain._points import Point, point_of_window
from ett_collector.domain.model import SpanRecord
from ett_collector.storage._arrays import column_insert
from ett_collector.storage._runs import Run
from ett_collector.storage._sql import placeholders, quoted_columns

SERIES_S = 60.0
"""Seconds of one ``window_series`` bucket (a fixed resolution: 1440 rows per rank and day)."""

SERIES_COLUMNS = (
    "job_id",
    "attempt",
    "rank",
    "bucket",
    "windows",
    "steps",
    "samples",
    "seconds",
    "timed_steps",
    "timed_s",
    "wait_s",
    "first_start",
    "last_end",
)
"""Columns of a ``window_series`` row, in the order of :func:`series_rows`."""

_SUMMED = SERIES_COLUMNS[4:11]
_FIRST, _LAST = 11, 12
"""The indexes of ``first_start`` (the least is kept) and ``last_end`` (the greatest)."""


def _kept(column: str, keep: str) -> str:
    """``column`` set to the stored or the new value, the one ``keep`` (``<`` or ``>``) holds
    for; NULL when either is (a bucket stored before migration 0012 does not say when in its
    minute its windows were: neither does any bucket it is added to)."""
    stored, new = f'window_series."{column}"', f'excluded."{column}"'
    return (
        f'"{column}" = CASE WHEN {stored} IS NULL OR {new} IS NULL THEN NULL'
        f" WHEN {new} {keep} {stored} THEN {new} ELSE {stored} END"
    )


_ADD_TO_STORED = "ON CONFLICT (job_id, attempt, rank, bucket) DO UPDATE SET " + ", ".join(
    [
        *(f'"{c}" = window_series."{c}" + excluded."{c}"' for c in _SUMMED),
        _kept("first_start", "<"),
        _kept("last_end", ">"),
    ]
)
"""A bucket already stored gets the new one's counts and seconds added, and the earlier first
start and later last end of the two."""


def upsert_sql(ph: str) -> str:
    """Insert a bucket, or add to the stored one (SQLite and PostgreSQL alike)."""
    cols = quoted_columns(SERIES_COLUMNS)
    values = placeholders(ph, len(SERIES_COLUMNS))
    return f"INSERT INTO window_series ({cols}) VALUES ({values}) {_ADD_TO_STORED}"


def merged(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """``window_series`` rows with one row per key, the rows of a repeated key added up as
    the upsert adds them (one statement may not update a row twice)."""
    out: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        key = tuple(row[:4])
        if (have := out.get(key)) is None:
            out[key] = list(row)
            continue
        for i in range(4, _FIRST):
            have[i] += row[i]
        first, last = row[_FIRST], row[_LAST]
        have[_FIRST] = None if None in (first, have[_FIRST]) else min(first, have[_FIRST])
        have[_LAST] = None if None in (last, have[_LAST]) else max(last, have[_LAST])
    return [tuple(r) for r in out.values()]


SERIES_UPSERT = column_insert(
    "window_series",
    SERIES_COLUMNS,
    (str, int, int, float, int, int, int, float, int, float, float, float, float),
    _ADD_TO_STORED,
    unique=merged,
)
"""PostgreSQL's :func:`upsert_sql` of a batch of buckets as one statement (``_arrays.py``),
the rows of a repeated key summed first (:func:`merged`)."""


def load_sql(ph: str) -> str:
    """A job's buckets, by (attempt, rank, bucket)."""
    return (
        f"SELECT {quoted_columns(SERIES_COLUMNS)} FROM window_series WHERE job_id = {ph}"
        " ORDER BY attempt, rank, bucket"
    )


def _steps(w: Run) -> int:
    first, last = w.raw[0], w.raw[1]
    if type(first) is int and type(last) is int and last >= first:
        return last - first + 1
    return 0


def series_rows(job_id: str, windows: Iterable[Run]) -> list[tuple[Any, ...]]:
    """``window_series`` rows (:data:`SERIES_COLUMNS` order) summing single ``windows``."""
    acc: dict[tuple[int, int, float], list[float]] = {}
    for w in windows:
        bucket = (w.start // SERIES_S) * SERIES_S
        cell = acc.setdefault(
            (w.attempt, w.rank, bucket), [0, 0, 0, 0.0, 0, 0.0, 0.0, w.start, w.end]
        )
        steps, seconds = _steps(w), max(0.0, w.end - w.start)
        samples = w.raw[2] if type(w.raw[2]) is int and w.raw[2] >= 0 else 0  # as point_of_window
        cell[0] += 1
        cell[1] += steps
        cell[2] += samples
        cell[3] += seconds
        wait = w.wait_s
        if wait is not None:
            cell[4] += steps
            cell[5] += seconds
            cell[6] += min(max(0.0, wait), seconds)
        cell[7] = min(cell[7], w.start)
        cell[8] = max(cell[8], w.end)
    return [
        (job_id, a, r, b, int(c[0]), int(c[1]), int(c[2]), c[3], int(c[4]), c[5], c[6], c[7], c[8])
        for (a, r, b), c in sorted(acc.items())
    ]


def not_replays(stored: Sequence[Run], fresh: Iterable[Run]) -> list[Run]:
    """The ``fresh`` windows that do not lie inside a ``stored`` run of their rank (those are
    replays, which the fold drops), each interval of a rank once (:func:`distinct`)."""
    by_rank: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for r in stored:
        by_rank.setdefault((r.attempt, r.rank), []).append((r.start, r.end))
    return distinct(
        w
        for w in fresh
        if not any(s <= w.start and w.end <= e for s, e in by_rank.get((w.attempt, w.rank), ()))
    )


_W = TypeVar("_W", Run, SpanRecord)


def distinct(windows: Iterable[_W]) -> list[_W]:
    """``windows`` with each (attempt, rank, start, end) once, the first kept: a window sent
    again under new span ids (an emitter that rebuilds its spans to retry them) is the same
    window. Counted twice while raw and once when folded after its first, the loop figures of
    a job depended on when it came (a time probe: 161 windows and 1,610 s for 100 of 1,000 s)."""
    seen: set[tuple[int, int, float, float]] = set()
    out: list[_W] = []
    for w in windows:
        key = (w.attempt, w.rank, w.start, w.end)
        if key not in seen:
            seen.add(key)
            out.append(w)
    return out


def points_of_rows(rows: Sequence[Sequence[Any]]) -> list[Point]:
    """Domain points of ``window_series`` rows selected in :data:`SERIES_COLUMNS` order, by
    (attempt, rank, bucket): each bucket is a point from its start over the bucket, or over its
    windows' seconds when they are longer (one window of 227 s stood for a 60 s bucket, and a
    stall under it was matched against 60 s of it: slow time and the slowest windows' spans
    were wrong), that trained from its first window's start to its last window's end
    (:func:`legacy_trained` for a bucket stored without them, ``placed`` False)."""
    out = []
    for i, (_, a, r, b, n, st, sm, sec, ts, tsec, wait, first, last) in enumerate(rows):
        placed = first is not None and last is not None
        if not placed:
            first, last = legacy_trained(rows, i)
        out.append(
            Point(
                attempt=int(a),
                rank=int(r),
                start=float(b),
                end=float(b) + max(SERIES_S, float(sec)),
                windows=int(n),
                steps=int(st),
                samples=int(sm),
                seconds=float(sec),
                timed_steps=int(ts),
                timed_s=float(tsec),
                wait_s=float(wait),
                first_start=float(first),
                last_end=float(last),
                placed=placed,
            )
        )
    return out


def legacy_trained(rows: Sequence[Sequence[Any]], i: int) -> tuple[float, float]:
    """When the windows of ``rows[i]``, a bucket stored before migration 0012 (no first start
    nor last end), trained, guessed from its neighbours (``rows`` by attempt, rank and bucket)
    and its windows' seconds, as if they followed each other: a bucket whose rank has one the
    minute after and none the minute before is the loop's start, at the end of its minute; one
    with a bucket before and none after is its end, at the start of its minute; else (amid the
    loop, or alone) the whole minute, as before 0012."""
    key, bucket, seconds = tuple(rows[i][1:3]), float(rows[i][3]), float(rows[i][7])

    def beside(j: int, at: float) -> bool:
        return 0 <= j < len(rows) and tuple(rows[j][1:3]) == key and float(rows[j][3]) == at

    before, after = beside(i - 1, bucket - SERIES_S), beside(i + 1, bucket + SERIES_S)
    whole = bucket + max(SERIES_S, seconds)
    if after and not before:
        return bucket + SERIES_S - min(SERIES_S, seconds), whole
    if before and not after:
        return bucket, bucket + seconds
    return bucket, whole


def job_points(
    spans: Sequence[SpanRecord], rows: Sequence[Sequence[Any]], retention_s: float | None
) -> list[Point]:
    """A job's points (the step-time view, the per-model view and the alerts' loop facts all
    read a job this way): its ``window_series`` buckets, then its raw training windows, each a
    point of its own, except those that end more than ``retention_s`` (the raw window
    retention) before its newest window: those are added to the buckets they are folded into.

    So the points depend on the spans alone, not on when compaction ran: it folds only windows
    that end before that line (its cutoff is a newest window less ``retention_s``), but which
    of them it has folded yet depends on how the batches arrived, and raw windows as points of
    their own made the loop figures differ (an operator probe: 32 of 428 jobs between a one- and
    a two-worker collector fed the same spans, one job's slow time 53.2 s against 0.07 s).
    ``retention_s`` None (raw windows kept): every raw window is a point."""
    raw = distinct(s for s in spans if s.name == sc.SPAN_TRAIN_WINDOW)
    if raw and retention_s is not None:
        line = max(s.end for s in raw) - retention_s
        due = [Run.of(s) for s in raw if s.end < line]
        if due:  # into their buckets, stored or not: (attempt, rank, bucket) order kept
            rows = merged([*rows, *series_rows(due[0].job_id, due)])
            rows.sort(key=lambda r: (r[1], r[2], r[3]))
            raw = [s for s in raw if s.end >= line]
    points = points_of_rows(rows)
    for s in raw:
        p = point_of_window(s)
        if p is not None:
            points.append(p)
    return points
