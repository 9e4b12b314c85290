"""OTLP/HTTP trace ingestion: export bodies (protobuf or JSON, gzip) in, span records out."""

from ett_collector.otlp._decode import decode_traces
from ett_collector.otlp._encode import encode_export_response, encode_status, grpc_code
from ett_collector.otlp._result import DecodeResult, OtlpError
from ett_collector.otlp._transport import (
    JSON_CONTENT_TYPE,
    PROTOBUF_CONTENT_TYPE,
    media_type,
    response_content_type,
)

__all__ = [
    "JSON_CONTENT_TYPE",
    "PROTOBUF_CONTENT_TYPE",
    "DecodeResult",
    "OtlpError",
    "decode_traces",
    "encode_export_response",
    "encode_status",
    "grpc_code",
    "media_type",
    "response_content_type",
]
