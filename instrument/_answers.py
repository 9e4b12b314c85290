"""The collector's answers to an export: which are worth retrying, which are final, and what a
final one tells the user (the OTLP/HTTP specification retries only 429, 502, 503 and 504, and no
answer at all; 401/403 mean the token, 404 the path)."""

from __future__ import annotations

from typing import Any

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
"""HTTP answers worth retrying (the OTLP/HTTP specification); other refusals are final."""


class HttpStatus:
    """What the collector did with the exporter's latest HTTP request (the exporter retries
    inside one export too), seen through the ``requests.Session`` handed to it."""

    def __init__(self) -> None:
        self.last: int | None = None
        """The status of the latest answer in this export (``None``: none yet)."""
        self.failing = False
        """True when the latest request got no answer, or a retryable status."""
        self.count = 0
        """Requests made so far."""

    def record(self, status: int | None) -> None:
        self.count += 1
        self.last = status
        self.failing = status is None or status in RETRYABLE_STATUS

    def session(self) -> Any:
        """A ``requests.Session`` that records here (``None`` without ``requests``)."""
        try:
            import requests
        except ImportError:
            return None
        record = self.record

        class WatchedSession(requests.Session):
            def request(self, *args: Any, **kwargs: Any) -> Any:
                try:
                    response = super().request(*args, **kwargs)
                except requests.RequestException:
                    record(None)
                    raise
                record(response.status_code)
                return response

        return WatchedSession()


def refusal(endpoint: str, status: int) -> str:
    """The one-time warning for a final refusal: what is wrong and which setting fixes it."""
    if status in (401, 403):
        return (
            f"ETT collector {endpoint} refused the spans (HTTP {status}): wrong or missing token; "
            "set ETT_TOKEN to the token the collector was started with (ett serve --token). "
            "Spans are dropped, not retried"
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
