"""Turning decoded spans into :class:`SpanRecord` values: identity, validation and counting.

Both wire formats feed a :class:`SpanBatch`: once per resource (:meth:`SpanBatch.resource`),
then once per span (:meth:`SpanBatch.add`). Identity follows docs/metrics.md,
"The spans it reads": resource attributes, overridden by span attributes.
"""

from __future__ import annotations

from typing import Any, Final

from ett import semconv
from ett_collector.domain.model import SpanRecord
from ett_collector.otlp._limits import (
    MAX_INDEX,
    attributes_problem,
    identity_problem,
    name_problem,
)
from ett_collector.otlp._result import DecodeResult

_JOB_ID: Final = semconv.JOB_ID
_ATTEMPT: Final = semconv.ATTEMPT
_RANK: Final = semconv.RANK
_NAMESPACE: Final = semconv.NAMESPACE
_KNOWN_ATTRIBUTES: Final = semconv.KNOWN_ATTRIBUTES
_MAX_PROBLEMS_SHOWN: Final = 3
EARLIEST_START_NS: Final = 946_684_800 * 10**9
"""2000-01-01 00:00 UTC: a span that starts before it comes from a clock that was never set (a
host's uptime counted from 1970) or carries a bad time, and is refused where the ingest route
asks (:class:`SpanBatch` ``received_ns``): kept, one rank's 1970 would stretch its job's wall
time over 57 years."""

Attributes = dict[str, Any]
"""Decoded attributes: str, bool, int, float, None, list (array) or dict (kvlist) values."""

Identity = tuple[str, int, int] | str
"""``(job_id, attempt, rank)``, or the reason the span has no valid identity."""


def _index(value: Any) -> int | None:
    """An int in ``0..MAX_INDEX`` from an int attribute or a decimal string; None otherwise."""
    if type(value) is int:
        return value if 0 <= value <= MAX_INDEX else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        number = int(value)
        return number if number <= MAX_INDEX else None
    return None


def resolve_identity(attrs: Attributes) -> Identity:
    """The span's ``(job_id, attempt, rank)`` from merged attributes, or why it has none."""
    job_id = attrs.get(_JOB_ID)
    if job_id is None:
        return f"lacks {_JOB_ID}"
    if not isinstance(job_id, str) or not job_id:
        return f"has {_JOB_ID} {job_id!r}, not a non-empty string"
    indexes: list[int] = []
    for key in (_ATTEMPT, _RANK):
        raw = attrs.get(key)
        if raw is None:
            return f"lacks {key}"
        value = _index(raw)
        if value is None:
            return f"has {key} {raw!r:.40}, not a non-negative integer (limit {MAX_INDEX})"
        indexes.append(value)
    return job_id, indexes[0], indexes[1]


def count_unknown(attrs: Attributes, skip: Attributes | None = None) -> int:
    """How many keys of ``attrs`` (not in ``skip``) are under ``ett.`` but not in the vocabulary."""
    if _KNOWN_ATTRIBUTES.issuperset(attrs):
        return 0
    n = 0
    for key in attrs.keys() - _KNOWN_ATTRIBUTES:
        if key.startswith(_NAMESPACE) and (skip is None or key not in skip):
            n += 1
    return n


class ResourceContext:
    """One resource's attributes, its identity, its count of unknown ``ett.`` keys, why its
    attributes break a limit (None when they do not), and whether they were found within every
    per-value limit as they were decoded (``checked``)."""

    __slots__ = ("attrs", "checked", "identity", "problem", "unknown")

    def __init__(self, attrs: Attributes, checked: bool = False) -> None:
        self.attrs = attrs
        self.identity = resolve_identity(attrs)
        self.unknown = count_unknown(attrs)
        self.checked = checked
        self.problem = None if checked else attributes_problem(attrs)


class SpanBatch:
    """Accumulates the records of one request and the counts of :class:`DecodeResult`."""

    __slots__ = (
        "_known_names",
        "_name_problems",
        "ahead_ns",
        "latest_end_ns",
        "problems",
        "received_ns",
        "records",
        "rejected",
        "unknown_attrs",
        "unknown_names",
    )

    def __init__(self, received_ns: int | None = None, ahead_ns: int = 0) -> None:
        self.received_ns = received_ns
        """When given (the receiving clock), spans that end more than ``ahead_ns`` after it, or
        start before :data:`EARLIEST_START_NS`, are refused alone."""
        self.ahead_ns = ahead_ns
        self.latest_end_ns = None if received_ns is None else received_ns + ahead_ns
        self.records: list[SpanRecord] = []
        self.rejected = 0
        self.problems: list[str] = []
        self.unknown_names = 0
        self.unknown_attrs = 0
        self._known_names: dict[str, bool] = {}
        self._name_problems: dict[str, str | None] = {}

    def resource(self, attrs: Attributes, checked: bool = False) -> ResourceContext:
        """Start a resource: its attributes apply to the spans added with the returned context.
        ``checked``: the decoder found each attribute within every per-value limit, the identity
        values' included (``_limits.within_identity_limits``), and not too many of them."""
        return ResourceContext(attrs, checked)

    def add(
        self,
        res: ResourceContext,
        trace_id: str,
        span_id: str,
        ids_ok: bool,
        name: str,
        start_ns: int,
        end_ns: int,
        attrs: Attributes,
        checked: bool = False,
    ) -> None:
        """Validate one span and keep it as a record, or count it as rejected.

        ``trace_id`` and ``span_id`` are lower-case hex; ``ids_ok`` says whether they are valid
        (16 and 8 bytes, not all zero). ``attrs`` are the span's own attributes; ``checked``: as
        for :meth:`resource`. When the span's and its resource's attributes are both checked,
        only the span's name is left to check (once per name and batch).
        """
        if attrs:
            merged = {**res.attrs, **attrs}
            if _JOB_ID in attrs or _ATTEMPT in attrs or _RANK in attrs:
                identity = resolve_identity(merged)
            else:
                identity = res.identity
        else:
            merged = res.attrs.copy()
            identity = res.identity
        if not ids_ok:
            self._reject(name, trace_id, span_id, "has an invalid trace id or span id")
        elif start_ns <= 0:
            self._reject(
                name,
                trace_id,
                span_id,
                "lacks a start time"
                if start_ns == 0
                else f"has a negative start time ({start_ns} ns)",
            )
        elif end_ns < start_ns:
            self._reject(
                name, trace_id, span_id, f"ends before it starts ({end_ns} < {start_ns} ns)"
            )
        elif isinstance(identity, str):
            self._reject(name, trace_id, span_id, identity)
        elif (latest := self.latest_end_ns) is not None and (
            end_ns > latest or start_ns < EARLIEST_START_NS
        ):
            self._reject(name, trace_id, span_id, self._implausible(start_ns, end_ns))
        elif problem := (
            self._name_problem(name)
            if checked and res.checked
            else (
                res.problem
                or (attributes_problem(attrs) if attrs and not checked else None)
                or identity_problem(name, merged)
            )
        ):
            self._reject(name, trace_id, span_id, problem)
        else:
            job_id, attempt, rank = identity
            known = self._known_names.get(name)
            if known is None:
                known = self._known_names[name] = semconv.is_known_span_name(name)
            if not known:
                self.unknown_names += 1
            self.unknown_attrs += res.unknown
            if attrs:
                self.unknown_attrs += count_unknown(attrs, res.attrs)
            self.records.append(
                SpanRecord(
                    trace_id,
                    span_id,
                    name,
                    start_ns / 1e9,
                    end_ns / 1e9,
                    job_id,
                    attempt,
                    rank,
                    merged,
                )
            )

    def _implausible(self, start_ns: int, end_ns: int) -> str:
        """Why a span's times cannot be a real span's as it arrives."""
        if start_ns < EARLIEST_START_NS:
            return f"starts before 2000-01-01 UTC ({start_ns} ns): is the sender's clock set?"
        ahead_s = (end_ns - (self.received_ns or 0)) / 1e9
        shown = f"{ahead_s:,.0f} s" if ahead_s < 1e6 else f"{ahead_s / 86400:,.0f} days"
        return (
            f"ends {shown} after the collector's clock, more than ETT_MAX_CLOCK_AHEAD_S="
            f"{self.ahead_ns / 1e9:g} s allows: is the sender's clock ahead?"
        )

    def _name_problem(self, name: str) -> str | None:
        """:func:`name_problem`, remembered per name for the batch."""
        try:
            return self._name_problems[name]
        except KeyError:
            problem = self._name_problems[name] = name_problem(name)
            return problem

    def reject(self, name: str, trace_id: str, span_id: str, reason: str) -> None:
        """Count a span the decoder could not read (a field of the wrong type) as rejected: the
        other spans of the request are kept (OTLP partial success)."""
        self._reject(name, trace_id, span_id, reason)

    def _reject(self, name: str, trace_id: str, span_id: str, reason: str) -> None:
        self.rejected += 1
        if len(self.problems) < _MAX_PROBLEMS_SHOWN:
            shown = ascii(name[:64])  # the name may be the problem (too long, NUL, surrogate)
            self.problems.append(f"span {shown} (trace {trace_id}, span {span_id}) {reason}")

    def result(self) -> DecodeResult:
        """The :class:`DecodeResult` of everything added."""
        message = ""
        if self.rejected:
            noun = "span" if self.rejected == 1 else "spans"
            message = f"{self.rejected} {noun} rejected: " + "; ".join(self.problems)
            if self.rejected > len(self.problems):
                message += "; ..."
        return DecodeResult(
            records=self.records,
            rejected=self.rejected,
            rejected_message=message,
            unknown_span_names=self.unknown_names,
            unknown_attributes=self.unknown_attrs,
        )
