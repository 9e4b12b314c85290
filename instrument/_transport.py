"""The ``requests`` session the OTLP exporter sends through (``session=`` of its constructor).

What it adds to a plain session, request by request:

- it records each answer in an :class:`~ett._answers.HttpStatus` (the status code, the spans
  an OTLP partial success rejected, a refusal's reason), so that the export queue knows what
  the collector said;
- it sends the token of :class:`~ett._credentials.Credentials` as it is now (an
  ``ETT_TOKEN_FILE`` rotated while the job runs), and after a 401 or 403 reads the token file
  again and, when the token changed, sends the request again, once, with the new one;
- with ``fail_fast`` (the spool is on) a request that got no answer, or a retryable status,
  raises :class:`CollectorAway`, so that the exporter gives the batch up at once (it goes to
  the spool) instead of sleeping in its own retry loop.

It works with the exporter's every 1.x version: older ones call ``post`` with the headers set on
the session, newer ones ``request`` with the headers per request; both end in
:meth:`requests.Session.request`.
"""

from __future__ import annotations

from typing import Any

from ._answers import RETRYABLE_STATUS, TOKEN_REFUSED, HttpStatus, rejected_in, response_reason
from ._credentials import Credentials


class CollectorAway(Exception):
    """Raised to the OTLP exporter by a ``fail_fast`` session, so that it gives up the batch at
    once (it goes to the spool) instead of sleeping in its own retry loop."""


def export_session(status: HttpStatus, credentials: Credentials, *, fail_fast: bool) -> Any:
    """A ``requests.Session`` for the OTLP exporter (module docstring); None without
    ``requests``."""
    try:
        import requests
    except ImportError:
        return None

    class ExportSession(requests.Session):
        def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
            response = self._answered(method, url, args, kwargs)
            if response.status_code in TOKEN_REFUSED and credentials.reload():
                response.close()
                response = self._answered(method, url, args, kwargs)  # the rotated token
            if fail_fast and response.status_code in RETRYABLE_STATUS:
                raise CollectorAway(f"HTTP {response.status_code}: ETT keeps the spans")
            return response

        def _answered(self, method: Any, url: Any, args: Any, kwargs: dict[str, Any]) -> Any:
            authorization = credentials.authorization() if credentials.token_file else None
            if authorization is not None:
                given = kwargs.get("headers") or {}
                headers = {k: v for k, v in given.items() if k.lower() != "authorization"}
                kwargs["headers"] = {**headers, "authorization": authorization}
            try:
                response = super().request(method, url, *args, **kwargs)
            except requests.RequestException as exc:
                status.record(None)
                if fail_fast:
                    raise CollectorAway("no answer: ETT keeps the spans in its spool") from exc
                raise
            status.record(response.status_code, rejected_in(response), response_reason(response))
            return response

    return ExportSession()
