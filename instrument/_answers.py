"""The collector's answers to an export: which are worth retrying, which are final, and what a
final one tells the user (the OTLP/HTTP specification retries only 429, 502, 503 and 504, and no
answer at all; 401/403 mean the token, 404 the path), in the collector's own words where it
gives them."""

from __future__ import annotations

import re
from typing import Any

from ._errors import log_once

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
"""HTTP answers worth retrying (the OTLP/HTTP specification); other refusals are final."""
TOKEN_REFUSED = frozenset({401, 403})
"""Answers that refuse the token (the token file is then read again: a rotated token)."""


class HttpStatus:
    """What the collector did with the exporter's latest HTTP request (the exporter retries
    inside one export too), seen through the ``requests.Session`` handed to it
    (``ett._transport``) and the spool's sender."""

    def __init__(self) -> None:
        self.last: int | None = None
        """The status of the latest answer in this export (``None``: none yet)."""
        self.failing = False
        """True when the latest request got no answer, or a retryable status."""
        self.count = 0
        """Requests made so far."""

        self.rejected = 0
        """Spans the collector took the batch of but rejected (OTLP partial success)."""
        self.reason = ""
        """The collector's own words in its latest refusal (:func:`refusal_reason`)."""
        self.problem = ""
        """What the latest request that got no answer met, when worth saying (a TLS failure:
        ``ett._transport.tls_problem``); ``""`` otherwise."""

    def record(
        self, status: int | None, rejected: int = 0, reason: str = "", problem: str = ""
    ) -> None:
        """One request: its status (``None``: no answer), the spans its answer rejected, for a
        refusal the collector's reason, and for no answer what it met (``problem``)."""
        self.count += 1
        self.last = status
        self.failing = status is None or status in RETRYABLE_STATUS
        self.rejected += rejected
        self.reason = reason
        self.problem = problem


def refusal(endpoint: str, status: int, *, origin: str | None = None, reason: str = "") -> str:
    """The one-time warning for a final refusal: what is wrong and which setting fixes it.
    ``origin``: where the token sent came from (``ETT_TOKEN``, ``ETT_TOKEN_FILE /path``...;
    None: no token was sent); ``reason``: the collector's own words (:func:`refusal_reason`)."""
    if status in TOKEN_REFUSED:
        said = f"HTTP {status}: {reason}" if reason else f"HTTP {status}"
        if origin is None:
            what = "no token was sent"
        elif status == 401:
            what = f"it does not take the token from {origin}"
        else:
            what = f"the token from {origin} may not send spans there"
        return (
            f"ETT collector {endpoint} refused the spans ({said}): {what}; give the trainers one "
            "of its write tokens (ett serve --write-tokens, which scoped collectors use, or its "
            "--token) in ETT_TOKEN or ETT_TOKEN_FILE. Spans are dropped, not retried"
        )
    if status == 404:
        return (
            f"ETT collector {endpoint} answered HTTP 404: no OTLP traces route at that path; set "
            "OTEL_EXPORTER_OTLP_ENDPOINT to the collector's base URL (http://host:4318) or "
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT to its full .../v1/traces URL. "
            "Spans are dropped, not retried"
        )
    return (
        f"ETT collector {endpoint} answered HTTP {status}, which OTLP does not retry: "
        "the batch of spans is dropped"
    )


def refusal_reason(content: bytes, content_type: str) -> str:
    """The collector's reason in the body of a refusal: the message of an OTLP error answer
    (``google.rpc.Status``, protobuf or JSON), else the body's text, shortened; ``""`` when
    there is none (a body is never a reason to fail)."""
    if not content:
        return ""
    message = ""
    try:
        if "json" in content_type.lower():
            import json

            parsed = json.loads(content)
            if isinstance(parsed, dict):
                found = parsed.get("message") or parsed.get("detail") or parsed.get("error")
                message = found if isinstance(found, str) else ""
        elif "protobuf" in content_type.lower():
            from google.rpc.status_pb2 import Status  # the OTLP exporter's own dependency

            message = Status.FromString(content).message
    except Exception:
        message = ""
    if not message and "protobuf" not in content_type.lower():
        message = content[:2000].decode("utf-8", "replace")
    return _shorten(" ".join(message.split()), 300)


def response_reason(response: Any) -> str:
    """:func:`refusal_reason` of a ``requests`` answer that is not a success; ``""`` else."""
    try:
        if response.status_code < 400:
            return ""
        return refusal_reason(response.content, response.headers.get("content-type", ""))
    except Exception:
        return ""


def rejected_in(response: Any) -> int:
    """The spans a ``requests`` answer of 2xx says it rejected (:func:`report_partial_success`;
    0 for another status or a response of another shape)."""
    try:
        if not 200 <= response.status_code < 300:
            return 0
        content, ctype = response.content, response.headers.get("content-type", "")
    except Exception:
        return 0
    return report_partial_success(content, ctype, str(response.url), response.status_code)


def partial_success(content: bytes, content_type: str) -> tuple[int, str]:
    """``(rejected spans, the collector's message)`` of an OTLP export answer's
    ``partial_success`` (protobuf or JSON body); ``(0, "")`` when it has none or cannot be read
    (an answer is never a reason to fail)."""
    if not content:
        return 0, ""
    try:
        if "json" in content_type.lower():
            import json

            part = json.loads(content).get("partialSuccess") or {}
            return int(part.get("rejectedSpans") or 0), str(part.get("errorMessage") or "")
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        answer = ExportTraceServiceResponse.FromString(content)
        part_pb = answer.partial_success
        return int(part_pb.rejected_spans), str(part_pb.error_message)
    except Exception:  # a body of another shape: nothing to say
        return 0, ""


def not_otlp(content: bytes, content_type: str) -> str:
    """Why a success answer does not look like an OTLP collector's (``""`` when it does): an
    HTML page, or a body that does not parse as an ``ExportTraceServiceResponse`` (protobuf,
    or a JSON object). An empty body passes (a minimal receiver)."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    if "html" in ctype:
        return f"an HTML page (Content-Type {ctype})"
    if not content:
        return ""
    try:
        if "json" in ctype:
            import json

            if isinstance(json.loads(content), dict):
                return ""
        elif "protobuf" in ctype or not ctype:
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                ExportTraceServiceResponse,
            )

            ExportTraceServiceResponse.FromString(content)
            return ""
    except Exception:
        pass
    return f"a body that is not an OTLP answer (Content-Type {ctype or 'none'})"


def report_not_otlp(content: bytes, content_type: str, url: str, status: int = 200) -> None:
    """Warn once when a success answer from ``url`` is not an OTLP collector's
    (:func:`not_otlp`): a web server or proxy there takes the spans and stores nothing."""
    why = not_otlp(content, content_type)
    if why:
        log_once(
            "answers.not_otlp",
            "ETT endpoint %s answered HTTP %d with %s: it does not look like an OTLP "
            "collector, so the spans it takes are likely lost; set OTEL_EXPORTER_OTLP_ENDPOINT "
            "to the collector's base URL (http://host:4318) or OTEL_EXPORTER_OTLP_TRACES_"
            "ENDPOINT to its full .../v1/traces URL",
            url,
            status,
            why,
        )


def report_partial_success(content: bytes, content_type: str, url: str, status: int = 200) -> int:
    """Warn, once per distinct reason, that the collector at ``url`` rejected spans of a batch
    it took (OTLP partial success: the rest were stored, these are lost); returns how many.
    An answer that is not an OTLP collector's is said once (:func:`report_not_otlp`)."""
    report_not_otlp(content, content_type, url, status)
    rejected, message = partial_success(content, content_type)
    if rejected > 0:
        log_once(
            "answers.partial." + _reason(message),
            "ETT collector %s rejected %d span(s) of a batch it took (they are lost and counted "
            "as dropped; the rest were stored): %s. Said once per reason",
            url,
            rejected,
            _shorten(message) or "no reason given",
        )
    return rejected


def _reason(message: str) -> str:
    """The kind of a rejection, for saying it once: the collector's first detail (``... has
    ett.rank -1, not a non-negative integer``) with its numbers and ids left out."""
    first = message.split(";", 1)[0]
    detail = first.rsplit(")", 1)[-1] if ")" in first else first
    return re.sub(r"[0-9a-f]{8,}|-?\d+", "#", detail).strip()[:120]


def _shorten(message: str, most: int = 400) -> str:
    return message if len(message) <= most else message[: most - 1] + "…"
