"""The ``requests`` session the OTLP exporter sends through (``session=`` of its constructor).

What it adds to a plain session, request by request:

- it records each answer in an :class:`~ett._answers.HttpStatus` (the status code, the spans
  an OTLP partial success rejected, a refusal's reason), so that the export queue knows what
  the collector said;
- it sends the token of :class:`~ett._credentials.Credentials` as it is now (an
  ``ETT_TOKEN_FILE`` rotated while the job runs), and after a 401 or 403 reads the token file
  again and, when the token changed, sends the request again, once, with the new one;
- it verifies the collector's certificate with the CA the OTLP settings name
  (``OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE``, which the exporter sets as the session's
  ``verify``): a plain session lets ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE`` in the
  environment replace it (requests' ``trust_env``), so a trainer whose environment names the
  system bundle failed every TLS export, said as "collector unreachable?". The session's
  ``verify`` is passed with each request, which the environment does not override; proxies
  from the environment are still honoured, and without a configured CA the environment's
  bundle is used as before. A TLS failure is said as one (:func:`tls_problem`);
- with ``fail_fast`` (the spool is on) a request that got no answer, or a retryable status,
  raises :class:`CollectorAway`, so that the exporter gives the batch up at once (it goes to
  the spool) instead of sleeping in its own retry loop.

It works with the exporter's every 1.x version: older ones call ``post`` with the headers set on
the session, newer ones ``request`` with the headers per request; both end in
:meth:`requests.Session.request`.
"""

from __future__ import annotations

import os
import ssl
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
            if kwargs.get("verify") is None:  # the configured CA, not REQUESTS_CA_BUNDLE's
                kwargs["verify"] = self.verify
            authorization = credentials.authorization() if credentials.token_file else None
            if authorization is not None:
                given = kwargs.get("headers") or {}
                headers = {k: v for k, v in given.items() if k.lower() != "authorization"}
                kwargs["headers"] = {**headers, "authorization": authorization}
            try:
                response = super().request(method, url, *args, **kwargs)
            except requests.RequestException as exc:
                status.record(None, problem=tls_problem(exc, requests_ca(kwargs["verify"])))
                if fail_fast:
                    raise CollectorAway("no answer: ETT keeps the spans in its spool") from exc
                raise
            status.record(response.status_code, rejected_in(response), response_reason(response))
            return response

    return ExportSession()


def tls_problem(exc: BaseException, ca: str) -> str:
    """What a request that got no answer met, when it is TLS: ``"TLS certificate verification
    failed (self-signed certificate) against <ca>"``, ``"TLS failed (<reason>)"``; ``""`` for
    anything else (a refused connection, a time-out). ``ca`` says which CA bundle was used."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        err = todo.pop()
        if id(err) in seen or len(seen) > 32:
            continue
        seen.add(id(err))
        if isinstance(err, ssl.SSLCertVerificationError):
            why = err.verify_message or err.reason or str(err)
            return f"TLS certificate verification failed ({why}) against {ca}"
        if isinstance(err, ssl.SSLError):
            return f"TLS failed ({err.reason or err})"
        linked = (err.__cause__, err.__context__, getattr(err, "reason", None), *err.args)
        todo.extend(link for link in linked if isinstance(link, BaseException))
    return ""


def requests_ca(verify: Any) -> str:
    """The CA bundle a ``requests`` call with ``verify`` checks the collector against."""
    if isinstance(verify, str):
        return f"the CA file {verify}"
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        if os.environ.get(name):
            return f"{name} {os.environ[name]}"
    return "the default CA bundle (set OTEL_EXPORTER_OTLP_CERTIFICATE to the collector's CA)"
