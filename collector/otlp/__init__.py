"""OTLP/HTTP trace ingestion: export bodies (protobuf or JSON, gzip) in, span records out."""

from collector.otlp._decode import decode_traces
from collector.otlp._encode import encode_export_response, encode_status, grpc_code
from collector.otlp._result import DecodeResult, OtlpError
from collector.otlp._transport import (
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
