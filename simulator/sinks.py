"""Where simulated spans go: a collector over OTLP/HTTP, or a database through the collector's
own ingest path (decode the same protobuf body, then ``Pipeline.ingest``, as ``POST /v1/traces``
does), which skips HTTP for speed."""

from __future__ import annotations

import gzip
import http.client
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ett import semconv

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""Answers OTLP/HTTP says to retry (with backoff, honouring ``Retry-After``)."""


class SendError(RuntimeError):
    """The collector refused a batch (or could not be reached after the retries)."""


class Sink(Protocol):
    """Takes encoded ``ExportTraceServiceRequest`` bodies."""

    def send(self, body: bytes, spans: int) -> int:
        """Deliver one body of ``spans`` spans; returns how many were accepted."""
        ...

    def close(self) -> None:
        """Flush and release resources."""
        ...

    def existing(self, job_ids: Sequence[str]) -> list[str] | None:
        """Which of ``job_ids`` the target holds already (None: it cannot say)."""
        ...


class EndpointSink:
    """POSTs bodies to ``{endpoint}/v1/traces`` over one keep-alive connection.

    Retries 429/502/503/504 and connection errors with exponential backoff (``Retry-After``
    when given), up to ``retries`` times; any other non-200 answer raises :class:`SendError`.
    """

    def __init__(
        self,
        endpoint: str,
        gzip_level: int | None = None,
        token: str | None = None,
        retries: int = 8,
        timeout_s: float = 60.0,
        backoff_s: float = 0.5,
    ) -> None:
        url = urllib.parse.urlsplit(endpoint.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(
                f"endpoint {endpoint!r} is not an http(s) URL such as http://127.0.0.1:4318"
            )
        self._url = url
        base = (url.path or "").removesuffix("/v1/traces")  # a full traces URL, as the library
        self._base = base  # and the OpenTelemetry SDKs take one
        self._path = base + "/v1/traces"
        self._gzip = gzip_level
        self._retries = retries
        self._timeout = timeout_s
        self._backoff = backoff_s
        self._headers = {"Content-Type": "application/x-protobuf"}
        if gzip_level is not None:
            self._headers["Content-Encoding"] = "gzip"
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._conn: http.client.HTTPConnection | None = None
        self.retried = 0
        """How many answers were retried (429/5xx or connection errors)."""
        self.delivered = 0
        """Spans the collector took so far."""
        self.on_retry: Callable[[str, float], None] | None = None
        """Told why and how long the sender waits before a retry (the first of an outage)."""

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = (
                http.client.HTTPSConnection
                if self._url.scheme == "https"
                else http.client.HTTPConnection
            )
            self._conn = cls(self._url.hostname or "", self._url.port, timeout=self._timeout)
        return self._conn

    def send(self, body: bytes, spans: int) -> int:
        if self._gzip is not None:
            body = gzip.compress(body, self._gzip, mtime=0)
        delay = self._backoff
        for attempt in range(self._retries + 1):
            wait: float | None = None
            try:
                conn = self._connection()
                conn.request("POST", self._path, body, self._headers)
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                why = f"cannot reach {self._where()}: {exc}"
                if attempt == self._retries:
                    raise SendError(why) from None
            else:
                if resp.status == 200:
                    taken = spans - _rejected(data)
                    self.delivered += taken
                    return taken
                why = f"{self._where()} answered {resp.status}: {_message(data, resp)}"
                if resp.status not in RETRY_STATUSES or attempt == self._retries:
                    raise SendError(why)
                wait = _retry_after(resp.getheader("Retry-After"))
            self.retried += 1
            if attempt == 0 and self.on_retry is not None:
                left = sum(min(delay * 2**i, 30.0) for i in range(self._retries - attempt))
                self.on_retry(why, left)
            time.sleep(wait if wait is not None else delay)
            delay = min(delay * 2, 30.0)
        raise AssertionError("unreachable")

    def _where(self) -> str:
        return f"{self._url.scheme}://{self._url.netloc}{self._path}"

    def existing(self, job_ids: Sequence[str]) -> list[str] | None:
        """Which of ``job_ids`` the collector holds (its read API), or None when it cannot say
        (a read token it was not given, a server that is not an ETT collector)."""
        held: list[str] = []
        for job_id in job_ids:
            path = f"{self._base}/api/v1/jobs/{urllib.parse.quote(job_id, safe='')}"
            headers = {k: v for k, v in self._headers.items() if k == "Authorization"}
            try:
                conn = self._connection()
                conn.request("GET", path, headers=headers)
                resp = conn.getresponse()
                resp.read()
            except (OSError, http.client.HTTPException):
                self.close()
                return None
            if resp.status == 200:
                held.append(job_id)
            elif resp.status != 404:
                return None
        return held

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), 60.0)
    except ValueError:
        return None


def _rejected(data: bytes) -> int:
    if not data:
        return 0
    try:
        resp = ExportTraceServiceResponse.FromString(data)
    except Exception:
        return 0
    return int(resp.partial_success.rejected_spans)


def _message(data: bytes, resp: http.client.HTTPResponse | None = None) -> str:
    """The answer's reason on one line: the OTLP status message, else the body's start (an
    HTML error page of a server that is not an ETT collector is named as such)."""
    from google.rpc.status_pb2 import Status

    ctype = "" if resp is None else (resp.getheader("Content-Type") or "")
    if "html" in ctype.lower() or data.lstrip()[:1] == b"<":
        return "an HTML page, not an OTLP answer (is an ETT collector listening there?)"
    try:
        text = Status.FromString(data).message
    except Exception:
        text = ""
    text = text or data[:200].decode(errors="replace")
    return " ".join(text.split())


class DatabaseSink:
    """Writes bodies into the collector's database through its ingest path; ``close`` then
    recomputes every job it touched, so figures are ready to read."""

    def __init__(
        self, db_url: str, window_s: float = semconv.DEFAULT_WINDOW_S, store: Any = None
    ) -> None:
        """``store``: the ``Store`` of ``db_url`` when the caller opened it already."""
        from ett_collector.storage import Store
        from ett_collector.write.pipeline import Pipeline

        self._store: Any = store if store is not None else Store(db_url)
        self._store.upgrade()
        self.pipeline: Any = Pipeline(self._store, window_s=window_s)

    def send(self, body: bytes, spans: int) -> int:
        from ett_collector.otlp import PROTOBUF_CONTENT_TYPE, decode_traces

        result = decode_traces(body, PROTOBUF_CONTENT_TYPE, None, max(len(body) + 1, 1 << 20))
        self.pipeline.ingest(result.records)
        return len(result.records)

    def existing(self, job_ids: Sequence[str]) -> list[str]:
        """Which of ``job_ids`` the database holds."""
        return list(self._store.existing_job_ids(job_ids))

    def recompute(self) -> int:
        """Recompute every dirty job; returns how many."""
        total = 0
        while (n := self.pipeline.recompute_dirty(limit=1000)) > 0:
            total += n
        return total

    def close(self) -> None:
        self.recompute()
        close = getattr(self._store, "close", None)
        if close is not None:
            close()
