"""Compact heartbeats: contiguous ``ett.train.window`` spans of a rank folded into runs.

A rank's windows tile its training time: each starts where the previous one ended and its first
step follows the previous one's last (the library writes ``last + 1``; an emitter of the user's
own may write ``last``, a last step exclusive, or skip steps: only a step that goes back breaks
a run). Such a chain is stored as one ``window_runs`` row and given to the domain as one window
record spanning ``[first start, last end]``, with the first window's ids and attributes, the
last window's ``ett.step.last``, the summed ``ett.samples`` and ``count`` (the windows it stands
for). Every rule of docs/metrics.md that reads windows reads only the latest end
(``progress(a)``, ``end(a)``, liveness), the earliest start, the ranks and the attributes other
than the three counters, so the figures from runs equal the figures from the raw windows; a
break in time, a step going back or any other attribute changed starts a new run, so every gap
is kept. ``ett.window.wait_s`` (a measurement that differs in every window) is a counter
too: a run does not keep it; compaction keeps it, with each window's steps, samples and
seconds, in the per-rank series of ``_series.py`` (docs/metrics.md, "Inside the loop").

Folding is order-free: the runs of a set of windows are the same whatever order they arrived in
and however many times compaction ran over them. A window that lies inside a stored run is a
replay of one of its windows (a rank's windows never overlap) and is dropped.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ett import semconv
from ett_collector.domain.model import AttrValue, SpanRecord
from ett_collector.storage._rows import encode_json

WINDOW = semconv.SPAN_TRAIN_WINDOW
"""The span name that is folded."""

CONTIGUOUS_EPS_S = 1e-3
"""How far a window's start may be from its predecessor's end and still continue its run
(emitters end one window and start the next at the same nanosecond; the float seconds of that
instant can differ in the last bits)."""

BREAK_REASONS = ("steps_missing", "steps_back", "attributes")
"""Why a window that starts where its rank's run ends starts a run of its own: a step counter
missing (not an int), a first step before the run's last (a counter that went back: a restart
within the attempt), or other attributes that differ (``Run.break_reason``)."""

RUN_COLUMNS = (
    "job_id",
    "attempt",
    "rank",
    "start",
    "trace_id",
    "span_id",
    "end",
    "step_first",
    "step_last",
    "samples",
    "count",
    "attributes",
)
"""Columns of a ``window_runs`` row, in the order of :func:`run_rows`."""


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


_SF, _SL, _SM = semconv.STEP_FIRST, semconv.STEP_LAST, semconv.SAMPLES
_SW = semconv.WINDOW_WAIT_S


@dataclass(slots=True)
class Run:
    """A run being folded: its first window's identity and attributes but the counters
    (``others``; ``raw`` keeps the first window's own counter values: steps, samples and
    ``ett.window.wait_s``), and the run's span."""

    job_id: str
    attempt: int
    rank: int
    trace_id: str
    span_id: str
    start: float
    end: float
    step_first: int | None
    step_last: int | None
    samples: int | None
    count: int
    others: dict[str, AttrValue]
    raw: tuple[Any, Any, Any, Any]
    base: SpanRecord | None = None

    @property
    def wait_s(self) -> float | None:
        """The first window's ``ett.window.wait_s`` (None when absent or not a number)."""
        wait = self.raw[3]
        return float(wait) if type(wait) in (int, float) else None

    @classmethod
    def of(cls, record: SpanRecord) -> Run:
        """The run of one window record (or of a stored run)."""
        run = cls.of_attrs(
            job_id=record.job_id,
            attempt=record.attempt,
            rank=record.rank,
            trace_id=record.trace_id,
            span_id=record.span_id,
            start=record.start,
            end=record.end,
            count=record.count,
            attrs=dict(record.attributes),
        )
        run.base = record
        return run

    @classmethod
    def of_attrs(
        cls,
        job_id: str,
        attempt: int,
        rank: int,
        trace_id: str,
        span_id: str,
        start: float,
        end: float,
        count: int,
        attrs: dict[str, AttrValue],
    ) -> Run:
        """The run of one window; ``attrs`` is taken over (its counters popped)."""
        first, last, samples, others, raw = window_parts(attrs)
        return cls(
            job_id=job_id,
            attempt=attempt,
            rank=rank,
            trace_id=trace_id,
            span_id=span_id,
            start=start,
            end=end,
            step_first=first,
            step_last=last,
            samples=samples,
            count=count,
            others=others,
            raw=raw,
        )

    def continued_by(self, nxt: Run) -> bool:
        """True when ``nxt`` starts where this run ends, its steps do not go back
        (``nxt.first >= last``: the library's ``last + 1``, an emitter's exclusive last step
        ``last`` and a skip alike), and it says the same about everything else."""
        last, first = self.step_last, nxt.step_first
        return (
            last is not None
            and first is not None
            and first >= last
            and -CONTIGUOUS_EPS_S <= nxt.start - self.end <= CONTIGUOUS_EPS_S
            and nxt.step_last is not None
            and (self.samples is None) is (nxt.samples is None)
            and self.others == nxt.others
        )

    def break_reason(self, nxt: Run) -> str | None:
        """Why ``nxt``, starting where this run ends, does not continue it (a label of
        :data:`BREAK_REASONS`); None when it continues it or does not start at its end."""
        if not -CONTIGUOUS_EPS_S <= nxt.start - self.end <= CONTIGUOUS_EPS_S:
            return None
        last, first = self.step_last, nxt.step_first
        if last is None or first is None or nxt.step_last is None:
            return "steps_missing"
        if first < last:
            return "steps_back"
        if (self.samples is None) is not (nxt.samples is None) or self.others != nxt.others:
            return "attributes"
        return None

    def absorb(self, nxt: Run) -> None:
        self.end = nxt.end
        self.step_last = nxt.step_last
        if self.samples is not None and nxt.samples is not None:
            self.samples += nxt.samples
        self.count += nxt.count

    def _attrs(self, counters: bool) -> dict[str, AttrValue]:
        attrs = dict(self.others)
        first, last, samples, wait = self.raw
        if first is not None:
            attrs[_SF] = first
        if counters and self.count == 1 and wait is not None:  # a window's own measurement
            attrs[_SW] = wait
        if counters:
            if self.count > 1:  # the run's own counters, not its first window's
                last, samples = self.step_last, self.samples
            if last is not None:
                attrs[_SL] = last
            if samples is not None:
                attrs[_SM] = samples
        return attrs

    def record(self) -> SpanRecord:
        """The run as one window record (the first window itself when nothing was merged)."""
        b = self.base
        if b is not None and self.count == b.count and self.end == b.end:
            return b
        return SpanRecord(
            trace_id=self.trace_id,
            span_id=self.span_id,
            name=WINDOW,
            start=self.start,
            end=self.end,
            job_id=self.job_id,
            attempt=self.attempt,
            rank=self.rank,
            attributes=self._attrs(True),
            count=self.count,
        )

    def key(self) -> tuple[int, int, float, str, str]:
        """The ``window_runs`` key but the job: (attempt, rank, start, trace id, span id)."""
        return (self.attempt, self.rank, self.start, self.trace_id, self.span_id)

    def row(self) -> tuple[Any, ...]:
        """The run's ``window_runs`` row (:data:`RUN_COLUMNS` order): the first window's
        attributes without ``ett.step.last`` and ``ett.samples``, which its columns hold."""
        return (
            self.job_id,
            self.attempt,
            self.rank,
            self.start,
            self.trace_id,
            self.span_id,
            self.end,
            self.step_first,
            self.step_last,
            self.samples,
            self.count,
            encode_json(self._attrs(False)),
        )


WindowParts = tuple[
    int | None, int | None, int | None, dict[str, AttrValue], tuple[Any, Any, Any, Any]
]
"""What a window's attributes make of a :class:`Run`: its three counters (None unless ints),
the other attributes and the counters' raw values (``ett.window.wait_s`` last). Never mutated
once made, so shared by the runs of every load that reads the same row (see
:class:`ett_collector.storage._rows.DecodedRows`)."""


def window_parts(attrs: dict[str, AttrValue]) -> WindowParts:
    """The :data:`WindowParts` of a window's ``attrs`` (taken over: its counters popped)."""
    first = attrs.pop(_SF, None)
    last = attrs.pop(_SL, None)
    samples = attrs.pop(_SM, None)
    wait = attrs.pop(_SW, None)
    return (
        first if type(first) is int else None,
        last if type(last) is int else None,
        samples if type(samples) is int else None,
        attrs,
        (first, last, samples, wait),
    )


def run_key(r: Run) -> tuple[float, float, str, str]:
    return (r.start, r.end, r.trace_id, r.span_id)


def fold_runs(stored: Iterable[Run], fresh: Iterable[Run]) -> tuple[list[Run], int]:
    """Fold ``fresh`` windows into ``stored`` runs (see :func:`fold`), as runs."""
    groups = group_runs(stored, fresh)
    out: list[Run] = []
    dropped = 0
    for runs, new in groups.values():
        runs.sort(key=run_key)
        folded, n = fold_group(runs, new)
        out += folded
        dropped += n
    return out, dropped


def group_runs(
    stored: Iterable[Run], fresh: Iterable[Run]
) -> dict[tuple[int, int], tuple[list[Run], list[Run]]]:
    """``stored`` runs and ``fresh`` windows by (attempt, rank): the ranks of ``stored`` first,
    then the new ones in the order of ``fresh``."""
    groups: dict[tuple[int, int], tuple[list[Run], list[Run]]] = {}
    for r in stored:
        groups.setdefault((r.attempt, r.rank), ([], []))[0].append(r)
    for r in fresh:
        groups.setdefault((r.attempt, r.rank), ([], []))[1].append(r)
    return groups


def fold_group(runs: list[Run], new: list[Run]) -> tuple[list[Run], int]:
    """One (attempt, rank)'s fold: its stored ``runs`` (sorted by key) with its ``new``
    windows; returns the runs (pieces are absorbed in place) and how many windows were dropped
    as replays."""
    dropped = 0
    if runs and new:
        starts = [r.start for r in runs]
        kept: list[Run] = []
        for w in new:
            i = bisect.bisect_right(starts, w.start) - 1
            if i >= 0 and w.end <= runs[i].end:
                dropped += 1
            else:
                kept.append(w)
        new = kept
    pieces = sorted(runs + new, key=run_key) if new else runs
    folded: list[Run] = []
    for p in pieces:
        if folded and folded[-1].continued_by(p):
            folded[-1].absorb(p)
        else:
            folded.append(p)
    return folded, dropped


def fold(
    stored: Iterable[SpanRecord], windows: Iterable[SpanRecord]
) -> tuple[list[SpanRecord], int]:
    """Fold raw ``windows`` into the ``stored`` runs of the same job; returns every resulting
    run as a window record (stored runs of ranks without a new window included, unchanged) and
    how many windows were dropped as replays (lying inside a stored run of their rank).

    ``stored`` runs of one (attempt, rank) must not overlap (those :func:`fold` returns never do
    when the windows of a rank do not).
    """
    runs, dropped = fold_runs(map(Run.of, stored), map(Run.of, windows))
    return [r.record() for r in runs], dropped


def runs_of_rows(
    rows: Sequence[Sequence[Any]],
    known: Mapping[Any, Any] | None = None,
    into: dict[Any, Any] | None = None,
) -> list[Run]:
    """Window runs of raw ``spans`` rows (:data:`ett_collector.storage._rows.SPAN_COLUMNS` order),
    without building span records; a (trace id, span id) repeated is kept once.

    ``known``: :data:`WindowParts` of rows decoded before, by row (their JSON is not decoded
    again); ``into`` receives the parts of every row of ``rows``."""
    if not rows:
        return []
    if known is None and into is None:  # nothing remembered: the plain loop
        decoded = json.loads("[" + ",".join([row[8] for row in rows]) + "]")
        seen: dict[tuple[str, str], Run] = {}
        make = Run.of_attrs
        for (trace, span, job, attempt, rank, _, start, end, _), attrs in zip(
            rows, decoded, strict=True
        ):
            if (trace, span) not in seen:
                seen[(trace, span)] = make(job, attempt, rank, trace, span, start, end, 1, attrs)
        return list(seen.values())
    known = known or {}
    missing = [row for row in rows if row not in known]
    parts: dict[Any, WindowParts] = {}
    if missing:
        decoded = json.loads("[" + ",".join([row[8] for row in missing]) + "]")
        parts = {row: window_parts(attrs) for row, attrs in zip(missing, decoded, strict=True)}
    seen = {}
    for row in rows:
        trace, span, job, attempt, rank, _, start, end, _ = row
        p = known.get(row) or parts[row]
        if into is not None:
            into[row] = p
        if (trace, span) not in seen:
            first, last, samples, others, raw = p
            seen[(trace, span)] = Run(
                job, attempt, rank, trace, span, start, end, first, last, samples, 1, others, raw
            )
    return list(seen.values())


def with_runs(spans: Sequence[SpanRecord], stored: Iterable[SpanRecord]) -> list[SpanRecord]:
    """A job's raw ``spans`` (in storage order) with their windows folded into the ``stored``
    runs: what the domain is fed. Ordered by start, trace id and span id, as storage loads."""
    windows = [s for s in spans if s.name == WINDOW]
    stored = list(stored)
    if not windows and not stored:
        return list(spans)
    runs, _ = fold(stored, windows)
    out = [s for s in spans if s.name != WINDOW] + runs
    out.sort(key=lambda s: (s.start, s.trace_id, s.span_id))
    return out


def with_window_rows(
    rows: Sequence[Sequence[Any]],
    stored: Sequence[SpanRecord],
    known: Mapping[Any, Any] | None = None,
    into: dict[Any, Any] | None = None,
) -> tuple[list[Sequence[Any]], list[SpanRecord]]:
    """A job's raw ``spans`` rows (:data:`ett_collector.storage._rows.SPAN_COLUMNS` order) split:
    the rows of spans other than windows, and the windows folded into the ``stored`` runs.

    The same records as :func:`with_runs` of the rows' spans, but a raw window never becomes a
    span record of its own: its row is folded straight into a run (the load of a live job reads
    hundreds of raw windows per rank for a few runs). ``known`` and ``into``: as for
    :func:`runs_of_rows`."""
    others = [row for row in rows if row[5] != WINDOW]
    if len(others) == len(rows) and not stored:
        return others, []
    windows = runs_of_rows([row for row in rows if row[5] == WINDOW], known, into)
    runs, _ = fold_runs(map(Run.of, stored), windows)
    return others, [r.record() for r in runs]


def run_rows(runs: Iterable[SpanRecord]) -> list[tuple[Any, ...]]:
    """``window_runs`` rows (:data:`RUN_COLUMNS` order) of run records from :func:`fold`."""
    return [Run.of(r).row() for r in runs]


def runs_from_rows(rows: Sequence[Sequence[Any]]) -> list[SpanRecord]:
    """Run records from ``window_runs`` rows selected in :data:`RUN_COLUMNS` order."""
    if not rows:
        return []
    decoded = json.loads("[" + ",".join([row[11] for row in rows]) + "]")
    out = []
    for row, attrs in zip(rows, decoded, strict=True):
        job_id, attempt, rank, start, trace_id, span_id, end, _, last, samples, count, _ = row
        if last is not None:
            attrs[_SL] = last
        if samples is not None:
            attrs[_SM] = samples
        out.append(
            SpanRecord(trace_id, span_id, WINDOW, start, end, job_id, attempt, rank, attrs, count)
        )
    return out
