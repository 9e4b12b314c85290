"""What decoding an OTLP export request yields: accepted records and counts, or an error."""

from __future__ import annotations

from dataclasses import dataclass

from ett_collector.domain.model import SpanRecord


class OtlpError(Exception):
    """A request the collector refuses as a whole.

    ``status`` is the HTTP status to answer with (400 malformed, 413 too large, 415 unsupported
    content type or encoding); ``message`` says why, for the client.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class DecodeResult:
    """The spans of one export request.

    ``records`` are the accepted spans. ``rejected`` counts spans refused for a missing or invalid
    identity (``ett.job.id``, ``ett.attempt``, ``ett.rank`` after merging resource and span
    attributes), invalid ids, no start time, an end before the start, or a value over a limit
    (:mod:`ett_collector.otlp._limits`: sizes, NUL characters, lone surrogates);
    ``rejected_message``
    names the first problems ("" when none). ``unknown_span_names`` counts accepted spans whose
    name is not in the vocabulary and ``unknown_attributes`` the unknown ``ett.`` keys in the
    merged attributes of accepted spans; both kinds are kept.
    """

    records: list[SpanRecord]
    rejected: int
    rejected_message: str
    unknown_span_names: int
    unknown_attributes: int
