"""HTTP framing of OTLP bodies: content type, content encoding and the size limit."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Final

from ett_collector.otlp._result import OtlpError

PROTOBUF_CONTENT_TYPE: Final = "application/x-protobuf"
"""Media type of the OTLP/HTTP binary protobuf encoding."""

JSON_CONTENT_TYPE: Final = "application/json"
"""Media type of the OTLP/HTTP JSON encoding."""

_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS
_IDENTITY: Final = frozenset({"", "identity"})
_GZIP: Final = frozenset({"gzip", "x-gzip"})


def media_type(content_type: str | None) -> str:
    """The lower-case media type of a Content-Type header, without parameters ("" when absent)."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def response_content_type(content_type: str | None) -> str:
    """The Content-Type to answer a request with: JSON for JSON requests, else protobuf."""
    if media_type(content_type) == JSON_CONTENT_TYPE:
        return JSON_CONTENT_TYPE
    return PROTOBUF_CONTENT_TYPE


def request_is_json(content_type: str | None) -> bool:
    """True when the request's Content-Type is OTLP JSON; False for protobuf.

    Raises :class:`OtlpError` (415) for any other media type.
    """
    kind = media_type(content_type)
    if kind == PROTOBUF_CONTENT_TYPE:
        return False
    if kind == JSON_CONTENT_TYPE:
        return True
    shown = content_type if content_type else "none"
    raise OtlpError(
        415,
        f"unsupported Content-Type {shown!r}: use {PROTOBUF_CONTENT_TYPE} or {JSON_CONTENT_TYPE}",
    )


def read_body(
    body: bytes,
    content_encoding: str | None,
    max_bytes: int,
    on_growth: Callable[[int], None] | None = None,
) -> bytes:
    """The request body after Content-Encoding, at most ``max_bytes`` long.

    A body (raw, or once decompressed) over ``max_bytes`` raises :class:`OtlpError` 413; gzip is
    inflated incrementally and stops as soon as the output passes the limit. An unknown encoding
    raises 415 and a corrupt gzip stream 400. ``on_growth`` is told the inflated size after each
    :data:`INFLATE_STEP` (it may refuse by raising: the ingest route's in-flight budget).
    """
    encoding = (content_encoding or "").strip().lower()
    if encoding not in _IDENTITY and encoding not in _GZIP:
        raise OtlpError(415, f"unsupported Content-Encoding {content_encoding!r}: use gzip or none")
    if len(body) > max_bytes:
        raise OtlpError(413, f"request body of {len(body)} bytes exceeds the {max_bytes} limit")
    if encoding in _IDENTITY:
        return body
    return gunzip(body, max_bytes, on_growth)


INFLATE_STEP: Final = 1 << 20
"""Bytes inflated between two reports of the size so far. In one step of the whole limit, 30
clients sending 1 GiB gzip bombs at once each inflated 32 MiB before a word (the collector
peaked at 1.1 GB, all 150 bombs answered 413 and none 429): the in-flight budget, told every
MiB, refuses them in time."""


def gunzip(data: bytes, max_bytes: int, on_growth: Callable[[int], None] | None = None) -> bytes:
    """Inflate gzip ``data`` (one or more members), refusing more than ``max_bytes`` of output,
    telling ``on_growth`` the output's size every :data:`INFLATE_STEP` bytes.

    Never produces more than ``max_bytes + 1`` bytes, so a decompression bomb costs little.
    """
    parts: list[bytes] = []
    total = 0
    rest = data
    while True:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        pending = rest
        while True:
            try:
                # max_length > 0 always (total <= max_bytes), so zlib stops by the limit plus one.
                chunk = inflater.decompress(pending, min(INFLATE_STEP, max_bytes - total + 1))
            except zlib.error as exc:
                raise OtlpError(400, f"malformed gzip body: {exc}") from None
            total += len(chunk)
            if total > max_bytes:
                raise OtlpError(
                    413, f"decompressed request body exceeds the {max_bytes} byte limit"
                )
            parts.append(chunk)
            if on_growth is not None and chunk:
                on_growth(total)
            pending = inflater.unconsumed_tail
            if inflater.eof or not (chunk or pending):
                break
        if not inflater.eof:
            # Output stopped short of the limit, so the input ran out mid-stream.
            raise OtlpError(400, "malformed gzip body: truncated stream")
        rest = inflater.unused_data
        if not rest:
            return b"".join(parts)
