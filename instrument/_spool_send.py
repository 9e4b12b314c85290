"""Delivering spooled records: one POST per record, and the draining of a dead process's file.

The body of a spooled batch is the OTLP/HTTP request as the exporter would send it, so
delivery is a plain ``POST`` of it to the traces endpoint (``urllib``: the ``flush`` command
needs nothing more than the library), one attempt per call, the headers (the token) taken from
the settings at send time. TLS follows the OTLP variables ``OTEL_EXPORTER_OTLP_(TRACES_)
CERTIFICATE`` (CA bundle), ``..._CLIENT_CERTIFICATE`` and ``..._CLIENT_KEY``.

What an answer means for a record (:func:`verdict`): 2xx delivered; no answer or 429/502/503/504
(the collector is away): stop, keep it; 401/403/404/407 (a wrong token or path: the settings,
not the spans, are wrong): stop, keep it; any other refusal (400, 413: the record itself is
refused): drop it, counted, and go on.
"""

from __future__ import annotations

import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ._answers import (
    RETRYABLE_STATUS,
    TOKEN_REFUSED,
    HttpStatus,
    refusal_reason,
    report_partial_success,
)
from ._credentials import Credentials
from ._spool import FILE_HEADER, KIND_BATCH, KIND_DROPS, Scan, try_lock
from ._transport import tls_problem

DELIVERED, KEEP, DROP = "delivered", "keep", "drop"
SETTINGS_STATUS = frozenset({401, 403, 404, 407})


def verdict(status: int | None) -> str:
    """What an answer means for the record sent (module docstring)."""
    if status is not None and 200 <= status < 300:
        return DELIVERED
    if status is None or status in RETRYABLE_STATUS or status in SETTINGS_STATUS:
        return KEEP
    return DROP


def _tls_setting(env: Mapping[str, str], name: str) -> str:
    """``OTEL_EXPORTER_OTLP_TRACES_<name>``, else ``OTEL_EXPORTER_OTLP_<name>``."""
    traces = env.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}", "").strip()
    return traces or env.get(f"OTEL_EXPORTER_OTLP_{name}", "").strip()


def _tls_context(env: Mapping[str, str]) -> ssl.SSLContext | None:
    ca, cert, key = (
        _tls_setting(env, n) for n in ("CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY")
    )
    if not (ca or cert):
        return None
    context = ssl.create_default_context(cafile=ca or None)
    if cert:
        context.load_cert_chain(cert, key or None)
    return context


class Sender:
    """POSTs request bodies to ``endpoint``: :meth:`send` returns the HTTP status, or ``None``
    when nothing answered. ``headers``: fixed ones, or :class:`~ett._credentials.Credentials`
    (a token file followed: after a 401/403 with a token that changed since, the body is sent
    again, once). Never raises."""

    def __init__(
        self,
        endpoint: str,
        headers: Mapping[str, str] | Credentials,
        *,
        timeout_s: float = 10.0,
        status: HttpStatus | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = (
            headers if isinstance(headers, Credentials) else Credentials(dict(headers))
        )
        self._timeout_s = timeout_s
        self._status = status
        self.last: int | None = None
        """The status of the latest answer (``None``: none, or no answer)."""
        self.reason = ""
        """The collector's reason in its latest refusal (:func:`~ett._answers.refusal_reason`)."""
        self.problem = ""
        """What the latest request that got no answer met, when it is TLS (``tls_problem``)."""
        env = os.environ if env is None else env
        ca = _tls_setting(env, "CERTIFICATE")
        self._ca = f"the CA file {ca}" if ca else "the system's CA bundle"
        try:
            self._tls = _tls_context(env)
        except (OSError, ValueError, ssl.SSLError):
            self._tls = None

    def send(self, body: bytes) -> int | None:
        code = self._post(body)
        if code in TOKEN_REFUSED and self.credentials.reload():
            code = self._post(body)  # the token file was rotated: its new token
        return code

    def _post(self, body: bytes) -> int | None:
        code: int | None
        rejected, reason, problem = 0, "", ""
        headers = {**self.credentials.headers(), "Content-Type": "application/x-protobuf"}
        try:  # the request too: a URL that is not http(s) raised here and ended the thread
            request = urllib.request.Request(
                self.endpoint, data=body, headers=headers, method="POST"
            )
            with urllib.request.urlopen(request, timeout=self._timeout_s, context=self._tls) as r:
                answer = r.read()
                code = int(r.status)
            ctype = r.headers.get("content-type", "")
            rejected = report_partial_success(answer, ctype, self.endpoint, code)
        except urllib.error.HTTPError as exc:
            code = int(exc.code)
            reason = _reason(exc)
        except (OSError, ValueError) as exc:
            code = None
            problem = tls_problem(exc, self._ca)
        if self._status is not None:  # spans rejected from the spool are dropped ones too
            self._status.record(code, rejected, reason, problem)
        self.last, self.reason, self.problem = code, reason, problem
        return code


def _reason(exc: urllib.error.HTTPError) -> str:
    """The collector's reason in a refusal's body (never raises)."""
    try:
        return refusal_reason(exc.read(65536), exc.headers.get("content-type", ""))
    except Exception:
        return ""


@dataclass
class Drained:
    """What draining files did: counts, and the first problem of each kind met."""

    files: int = 0
    done_files: int = 0
    skipped_live: int = 0
    records: int = 0
    spans: int = 0
    dropped_refused: int = 0
    dropped_full: int = 0
    """Spans the writers dropped because the spool was full (their drop records)."""
    bad_bytes: int = 0
    problems: list[str] = field(default_factory=list)
    stopped: int | None = -1
    """The answer that stopped delivery (``None``: no answer), or -1 when nothing stopped it."""
    timed_out: bool = False
    """The time given ran out before every record was sent."""

    @property
    def complete(self) -> bool:
        """True when nothing stopped the delivery (files held by live processes aside)."""
        return self.stopped == -1 and not self.timed_out


def drain_file(path: Path, sender: Sender, out: Drained, deadline: float) -> None:
    """Deliver the records of the spool file at ``path`` if no live process holds it: removed
    once all are delivered (a bad tail is reported in ``out`` and dropped); when delivery stops,
    what is left is written back (the delivered records cut off). Never raises."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return  # gone meanwhile: another reader took it
    except OSError as exc:
        out.problems.append(f"{path}: cannot open it ({exc.strerror})")
        return
    with os.fdopen(fd, "r+b") as f:
        if not try_lock(fd):
            out.skipped_live += 1
            return
        try:
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                return  # replaced meanwhile
        except OSError:
            return
        out.files += 1
        _drain_open(path, f, sender, out, deadline)


def _drain_open(path: Path, f: BinaryIO, sender: Sender, out: Drained, deadline: float) -> None:
    scan = Scan(f)
    sent_to = 0
    stopped = False
    for end, record in scan:
        if record.kind == KIND_DROPS:
            out.dropped_full += record.drops
            sent_to = end
            continue
        if record.kind != KIND_BATCH:
            continue
        if time.monotonic() > deadline:
            out.timed_out = stopped = True
            break
        status = sender.send(record.body)
        outcome = verdict(status)
        if outcome == KEEP:
            out.stopped = status
            stopped = True
            break
        if outcome == DROP:
            out.dropped_refused += record.spans
        else:
            out.records += 1
            out.spans += record.spans
        sent_to = end
    size = os.fstat(f.fileno()).st_size
    if not stopped and scan.problem is not None:
        out.bad_bytes += size - scan.good_end
        out.problems.append(f"{path}: {scan.problem} at byte {scan.good_end}")
    try:
        if not stopped:
            os.unlink(path)
            out.done_files += 1
            _remove_if_empty(path.parent)
        elif sent_to:
            _cut_front(f, sent_to, scan.good_end)
    except OSError as exc:
        out.problems.append(f"{path}: {exc.strerror}")


def _cut_front(f: BinaryIO, start: int, end: int) -> None:
    """Keep only the header and the records in ``[start, end)`` of the open file ``f``."""
    f.seek(start)
    rest = f.read(end - start)
    f.seek(0)
    f.write(FILE_HEADER + rest)
    f.truncate()
    f.flush()


def _remove_if_empty(folder: Path) -> None:
    """Remove a job's folder once its last file is delivered (a writer creates it again)."""
    try:
        folder.rmdir()
    except OSError:
        pass  # not empty (another rank's file), or gone
