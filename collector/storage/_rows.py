"""Conversions between the domain's values and table rows (plain tuples, in column order)."""

from __future__ import annotations

import json
import json.encoder
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ett import semconv
from ett_collector.domain.model import JobSummary, SpanRecord
from ett_collector.schemas import SegmentJSON, job_json, segment_json_of

_Scanner = Callable[[Any, int], Sequence[str]]


def _make_scanner() -> _Scanner:
    """A function ``(value, 0) -> chunks`` whose ``"".join`` is compact JSON of ``value``.

    Compact: no spaces, UTF-8 kept. ``json.dumps`` with options builds an encoder per call and
    ``JSONEncoder.encode`` builds its C scanner per call; for the ingest hot path the C scanner is
    built once, here (a third faster per span). Falls back to ``JSONEncoder.encode`` where the C
    accelerator is missing or its signature differs.
    """
    slow = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

    def fallback(value: Any, _level: int) -> Sequence[str]:
        return (slow(value),)

    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return fallback

    def default(o: Any) -> Any:
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    try:
        # markers, default, encoder, indent, key_sep, item_sep, sort_keys, skipkeys, allow_nan
        args = (None, default, json.encoder.encode_basestring, None, ":", ",", False, False, True)
        scan: _Scanner = make(*args)
        sample = {"a": [1, 2.5, None, True, "é\n"], "b": {"c": float("inf")}}
        if "".join(scan(sample, 0)) != slow(sample):
            return fallback
    except Exception:
        return fallback
    return scan


_scan = _make_scanner()


def encode_json(value: Any) -> str:
    """Compact JSON text of ``value``."""
    return "".join(_scan(value, 0))


SPAN_COLUMNS = (
    "trace_id",
    "span_id",
    "job_id",
    "attempt",
    "rank",
    "name",
    "start",
    "end",
    "attributes",
)
"""Columns of a span row, in the order of :func:`span_rows`."""

FIGURE_COLUMNS = (
    "job_id",
    "state",
    "model",
    "team",
    "alloc",
    "end",
    "wall_s",
    "productive_s",
    "idle_s",
    "failure_s",
    "ett_pct",
    "idle_pct",
    "failure_pct",
    "tts_s",
    "failures",
    "unsaved_s",
    "checkpoint_blocking_s",
    "span_count",
    "last_span_end",
    "computed_at",
    "summary",
)
"""Columns of a ``job_figures`` row, in the order of :func:`figures_row`."""

SEGMENT_COLUMNS = (
    "job_id",
    "seg",
    "part",
    "attempt",
    "start",
    "end",
    "category",
    "kind",
    "component",
    "share",
    "model",
    "team",
)
"""Columns of a ``segments`` row, in the order of :func:`segment_rows`."""


def span_rows(records: Iterable[SpanRecord]) -> list[tuple[Any, ...]]:
    """Span rows for ``records`` (attributes as compact JSON text, encoded once)."""
    scan, join = _scan, "".join
    return [
        (
            r.trace_id,
            r.span_id,
            r.job_id,
            r.attempt,
            r.rank,
            r.name,
            r.start,
            r.end,
            join(scan(a if type(a) is dict else dict(a), 0)) if (a := r.attributes) else "{}",
        )
        for r in records
    ]


def job_identities(records: Sequence[SpanRecord]) -> dict[str, tuple[int, str | None, str | None]]:
    """``job_id -> (spans in batch, model, team)``; model and team from the newest span that
    has them. Scans back from the end and stops once every job has both (usually at once)."""
    counts = Counter(r.job_id for r in records)
    known: dict[str, list[str | None]] = {job_id: [None, None] for job_id in counts}
    pending = len(known)
    model_key, team_key = semconv.MODEL, semconv.TEAM
    for r in reversed(records):
        info = known[r.job_id]
        if info[0] is not None and info[1] is not None:
            continue
        attrs = r.attributes
        if info[0] is None and (model := attrs.get(model_key)) is not None:
            info[0] = str(model)
        if info[1] is None and (team := attrs.get(team_key)) is not None:
            info[1] = str(team)
        if info[0] is not None and info[1] is not None:
            pending -= 1
            if not pending:
                break
    return {job_id: (n, known[job_id][0], known[job_id][1]) for job_id, n in counts.items()}


def spans_from_rows(
    rows: Sequence[Sequence[Any]],
    known: Mapping[Any, Any] | None = None,
    into: dict[Any, Any] | None = None,
) -> list[SpanRecord]:
    """Spans of rows selected in :data:`SPAN_COLUMNS` order, in row order.

    All attributes are decoded by one ``json.loads`` of a JSON array (about 2x faster than one
    call per row). A ``(trace_id, span_id)`` repeated (stored twice with different starts) is
    kept once: its first row. ``known``: records of rows decoded before, by row (reused as they
    are: records are immutable); ``into`` receives the record of every row of ``rows``.
    """
    if not rows:
        return []
    out: list[SpanRecord]
    if known is None and into is None:  # nothing remembered: decode every row
        attributes = json.loads("[" + ",".join([row[8] for row in rows]) + "]")
        out = [
            SpanRecord(trace_id, span_id, name, start, end, job_id, attempt, rank, attrs)
            for (trace_id, span_id, job_id, attempt, rank, name, start, end, _), attrs in zip(
                rows, attributes, strict=True
            )
        ]
        return _first_of_each(out)
    known = known or {}
    missing = [row for row in rows if row not in known]
    made: dict[Any, SpanRecord] = {}
    if missing:
        attributes = json.loads("[" + ",".join([row[8] for row in missing]) + "]")
        made = {
            row: SpanRecord(
                trace_id=row[0],
                span_id=row[1],
                name=row[5],
                start=row[6],
                end=row[7],
                job_id=row[2],
                attempt=row[3],
                rank=row[4],
                attributes=attrs,
            )
            for row, attrs in zip(missing, attributes, strict=True)
        }
    out = [known.get(row) or made[row] for row in rows]
    if into is not None:
        into.update(zip(rows, out, strict=True))
    return _first_of_each(out)


def _first_of_each(out: list[SpanRecord]) -> list[SpanRecord]:
    """``out`` with each ``(trace_id, span_id)`` once: its first."""
    if len({(s.trace_id, s.span_id) for s in out}) == len(out):
        return out
    seen: set[tuple[str, str]] = set()
    unique: list[SpanRecord] = []
    for s in out:
        key = (s.trace_id, s.span_id)
        if key not in seen:
            seen.add(key)
            unique.append(s)
    return unique


class DecodedRows:
    """What the last load of each of the ``jobs`` most recently loaded jobs decoded, by job,
    within ``rows`` rows in all.

    A stored span row never changes (a replay conflicts and is ignored), so a row read again
    decodes to the same record or run parts: a live job's load, which rereads every raw row
    of the job for the few that arrived since, decodes only the new ones. Each load replaces
    its job's entry with what it read, so an entry holds one load's rows (rows compacted away
    drop out). A load of more than ``rows`` rows is not kept (:meth:`fits`). Thread-safe.
    """

    def __init__(self, jobs: int = 64, rows: int = 200_000) -> None:
        self.jobs = jobs
        """How many jobs' entries are kept (0: none)."""
        self.rows = rows
        """How many rows all entries hold at most."""
        self._by_job: OrderedDict[str, tuple[int, Any]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def fits(self, n_rows: int) -> bool:
        """Whether a load of ``n_rows`` rows is kept."""
        return self.jobs > 0 and n_rows <= self.rows

    def get(self, job_id: str) -> Any:
        """The job's entry (None when not kept)."""
        with self._lock:
            kept = self._by_job.get(job_id)
        return None if kept is None else kept[1]

    def put(self, job_id: str, n_rows: int, entry: Any) -> None:
        """Keep ``entry`` (of ``n_rows`` rows) as the job's, dropping the least recently put
        jobs' beyond ``jobs`` entries or ``rows`` rows."""
        with self._lock:
            old = self._by_job.pop(job_id, None)
            self._held -= 0 if old is None else old[0]
            self._by_job[job_id] = (n_rows, entry)
            self._held += n_rows
            while len(self._by_job) > self.jobs or self._held > self.rows:
                self._held -= self._by_job.popitem(last=False)[1][0]


def figures_row(summary: JobSummary, computed_at: float) -> tuple[Any, ...]:
    """The ``job_figures`` row of ``summary``, its full ``job_json()`` as JSON included."""
    s = summary
    return (
        s.job_id,
        str(s.state),
        s.model,
        s.team,
        s.alloc,
        s.end,
        s.wall_s,
        s.productive_s,
        s.idle_s,
        s.failure_s,
        s.ett_pct,
        s.idle_pct,
        s.failure_pct,
        s.tts_s,
        s.failures,
        s.unsaved_s,
        s.checkpoint_blocking_s,
        s.span_count,
        s.last_span_end,
        computed_at,
        encode_json(job_json(s)),
    )


def segment_rows(summary: JobSummary) -> list[tuple[Any, ...]]:
    """One row per (segment, component); a component's ``share`` is 1/len(components).

    A segment without components (productive) gives one row with component None and share 1.
    """
    rows: list[tuple[Any, ...]] = []
    job_id, model, team = summary.job_id, summary.model, summary.team
    for seg, s in enumerate(summary.segments):
        components: Sequence[str | None] = s.components or (None,)
        share = 1.0 / len(components)
        category, kind = str(s.category), str(s.kind)
        for part, component in enumerate(components):
            rows.append(
                (
                    job_id,
                    seg,
                    part,
                    s.attempt,
                    s.start,
                    s.end,
                    category,
                    kind,
                    component,
                    share,
                    model,
                    team,
                )
            )
    return rows


def segments_from_rows(rows: Iterable[Sequence[Any]]) -> list[SegmentJSON]:
    """``segment_json()`` objects from rows ``(seg, attempt, start, end, category, kind,
    component)`` sorted by segment then part."""
    out: list[SegmentJSON] = []
    current = -1
    for seg, attempt, start, end, category, kind, component in rows:
        if seg != current:
            current = seg
            out.append(segment_json_of(attempt, start, end, category, kind, ()))
        if component is not None:
            out[-1]["components"].append(component)
    return out
