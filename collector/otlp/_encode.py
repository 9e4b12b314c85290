"""Encoding OTLP/HTTP responses: ``ExportTraceServiceResponse`` and ``google.rpc.Status``."""

from __future__ import annotations

import json
from typing import Final, cast

from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ett_collector.otlp._result import DecodeResult

_GRPC_CODE_BY_HTTP_STATUS: Final = {
    400: 3,  # INVALID_ARGUMENT
    401: 16,  # UNAUTHENTICATED
    403: 7,  # PERMISSION_DENIED
    404: 5,  # NOT_FOUND
    405: 12,  # UNIMPLEMENTED
    408: 4,  # DEADLINE_EXCEEDED
    413: 8,  # RESOURCE_EXHAUSTED (gRPC's answer to a message over the size limit)
    415: 12,  # UNIMPLEMENTED (unsupported encoding)
    429: 14,  # UNAVAILABLE (retryable, as OTLP/HTTP says)
    500: 13,  # INTERNAL
    501: 12,  # UNIMPLEMENTED
    502: 14,  # UNAVAILABLE
    503: 14,  # UNAVAILABLE
    504: 14,  # UNAVAILABLE
}
_GRPC_UNKNOWN: Final = 2
_MAX_GRPC_CODE: Final = 16


def grpc_code(code: int) -> int:
    """The gRPC status code for ``code``: an HTTP status (>= 100) is mapped, a gRPC code kept."""
    if 0 <= code <= _MAX_GRPC_CODE:
        return code
    return _GRPC_CODE_BY_HTTP_STATUS.get(code, _GRPC_UNKNOWN)


def encode_export_response(result: DecodeResult, as_json: bool) -> bytes:
    """The body of a successful export: ``ExportTraceServiceResponse``.

    When spans were rejected it carries ``partial_success`` with ``rejected_spans`` and
    ``error_message`` (OTLP partial success); otherwise it is empty.
    """
    if as_json:
        if not result.rejected:
            return b"{}"
        partial = {
            # proto3 JSON writes int64 as a string.
            "rejectedSpans": str(result.rejected),
            "errorMessage": result.rejected_message,
        }
        return json.dumps({"partialSuccess": partial}).encode()
    response = ExportTraceServiceResponse()
    if result.rejected:
        response.partial_success.rejected_spans = result.rejected
        response.partial_success.error_message = result.rejected_message
    return cast(bytes, response.SerializeToString())


def encode_status(code: int, message: str, as_json: bool) -> bytes:
    """The body of an error answer: ``google.rpc.Status`` with a gRPC code and ``message``.

    ``code`` may be the HTTP status of the answer (400 gives 3 INVALID_ARGUMENT, 413 gives
    8 RESOURCE_EXHAUSTED, 415 gives 12 UNIMPLEMENTED, ...) or a gRPC code (0-16), kept as is.
    """
    status_code = grpc_code(code)
    if as_json:
        return json.dumps({"code": status_code, "message": message}).encode()
    return cast(bytes, Status(code=status_code, message=message).SerializeToString())
