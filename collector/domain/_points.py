"""The points the performance figures read (issue 26): a rank's raw window or compacted bucket,
and the union of intervals a point is checked against (``_performance.py``)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from ett import semconv as sc

from .model import SpanRecord


@dataclass(frozen=True, slots=True)
class Point:
    """A rank's windows over ``[start, end]``: one raw window, or one compacted bucket."""

    attempt: int
    rank: int
    start: float
    end: float
    windows: int
    steps: int
    samples: int
    seconds: float
    timed_steps: int = 0
    timed_s: float = 0.0
    wait_s: float = 0.0
    first_start: float | None = None
    """A bucket's first window's start (None: ``start``, as for a raw window)."""
    last_end: float | None = None
    """A bucket's last window's end (None: ``end``)."""
    placed: bool = True
    """False for a bucket stored before migration 0012, whose ``first_start`` and ``last_end``
    were guessed from its neighbours (``_series.legacy_trained``), not stored."""

    @property
    def step_s(self) -> float | None:
        """Seconds per step (None without steps)."""
        return self.seconds / self.steps if self.steps > 0 else None

    @property
    def trained(self) -> tuple[float, float]:
        """When its windows trained: from the first's start to the last's end. A bucket's
        ``[start, end]`` is its whole minute, which its windows may fill only in part (a loop
        that starts or ends in it, a restart): the throughput series spreads its samples over
        this instead (``_throughput.py``)."""
        first = self.start if self.first_start is None else self.first_start
        last = self.end if self.last_end is None else self.last_end
        return first, max(first, last)

    @property
    def stalls_over(self) -> tuple[float, float]:
        """The interval its stalls are read over (``_performance.py``): when its windows trained
        (:attr:`trained`), for a bucket stored before migration 0012 its whole ``[start, end]``
        (when in its minute they trained is a guess there). Not the whole minute of every bucket:
        where the raw windows of a minute are points of their own beside its bucket (the fold
        line of the raw window retention), a stall of theirs was counted against both, and a
        save in the part of a minute where no window of the bucket ran was taken off it (a
        test job's slow time: 44.5 s raw, 43.5 s half folded, 29.5 s folded)."""
        return self.trained if self.placed else (self.start, self.end)


def point_of_window(span: SpanRecord) -> Point | None:
    """The point of one raw ``ett.train.window`` span (None when its steps are unknown)."""
    first, last = span.attributes.get(sc.STEP_FIRST), span.attributes.get(sc.STEP_LAST)
    if type(first) is not int or type(last) is not int or last < first:
        return None
    samples = span.attributes.get(sc.SAMPLES)
    wait = span.attributes.get(sc.WINDOW_WAIT_S)
    steps, seconds = last - first + 1, max(0.0, span.end - span.start)
    timed = type(wait) in (int, float)
    return Point(
        span.attempt,
        span.rank,
        span.start,
        span.end,
        1,
        steps,
        samples if type(samples) is int and samples >= 0 else 0,  # a count: -640 is none
        seconds,
        steps if timed else 0,
        seconds if timed else 0.0,
        min(max(0.0, float(wait)), seconds) if timed else 0.0,  # type: ignore[arg-type]
    )


INTERRUPTED_SHARE = 0.05
"""A point is *interrupted* (not steady) when stall spans cover more than this share of its
seconds. Not any overlap at all: a loop that fetches its batches waits a millisecond or two on
many steps (``ett.data.wait`` spans of ``DATA_WAIT_MIN_S`` and more), which left 2 of ~45 one-second
windows of the reference trainer steady and biased the ideal step by +7 % to +51 %; a
checkpoint save, an eval or a recompile covers far more of its window."""


def interrupted(point: Point, covered: float) -> bool:
    """Whether ``point``, ``covered`` seconds of which lie under stall spans, is interrupted."""
    return covered > INTERRUPTED_SHARE * max(point.seconds, 0.0)


class Intervals:
    """The union of some intervals, for overlap queries."""

    def __init__(self, intervals: Iterable[tuple[float, float]]) -> None:
        merged: list[list[float]] = []
        for s, e in sorted(intervals):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self.starts = [m[0] for m in merged]
        self.ends = [m[1] for m in merged]

    def covered(self, start: float, end: float) -> float:
        """Seconds of ``[start, end]`` inside the union."""
        total, i = 0.0, max(0, bisect.bisect_right(self.starts, start) - 1)
        while i < len(self.starts) and self.starts[i] < end:
            total += max(0.0, min(end, self.ends[i]) - max(start, self.starts[i]))
            i += 1
        return total
