"""The entry point of the OTLP layer: an OTLP/HTTP trace export body in, span records out."""

from __future__ import annotations

from collections.abc import Callable

from ett_collector.otlp._batch import SpanBatch
from ett_collector.otlp._json import decode_json
from ett_collector.otlp._protobuf import decode_protobuf
from ett_collector.otlp._result import DecodeResult
from ett_collector.otlp._transport import read_body, request_is_json


def decode_traces(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    max_bytes: int,
    on_payload: Callable[[int], None] | None = None,
    received_ns: int | None = None,
    ahead_ns: int = 0,
) -> DecodeResult:
    """Decode the body of ``POST /v1/traces`` into :class:`SpanRecord` values.

    ``content_type`` picks the encoding (``application/x-protobuf`` or ``application/json``,
    parameters allowed; anything else raises :class:`OtlpError` 415). ``content_encoding`` may be
    gzip (inflated incrementally) or absent; others raise 415. A body over ``max_bytes`` before or
    after decompression raises 413; a malformed one 400. Spans without a valid identity are
    counted as rejected in the result, and the others are still returned.

    ``on_payload`` is told the size of the payload as it is inflated and once decompressed,
    before it is parsed (the ingest route charges it to its in-flight budget, which may refuse
    by raising).

    ``received_ns``: when given (the collector's clock), a span that ends more than ``ahead_ns``
    after it, or starts before 2000 (:data:`~ett_collector.otlp._batch.EARLIEST_START_NS`), is
    rejected as implausible.
    """
    as_json = request_is_json(content_type)
    payload = read_body(body, content_encoding, max_bytes, on_payload)
    if on_payload is not None:
        on_payload(len(payload))
    batch = SpanBatch(received_ns, ahead_ns)
    if as_json:
        decode_json(payload, batch)
    else:
        decode_protobuf(payload, batch)
    return batch.result()
