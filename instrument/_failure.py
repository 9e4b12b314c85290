"""Failure causes from exceptions (``ett.failure.cause``) and their ``error.type``.

Classification looks at the exception and its chain (``__cause__`` / ``__context__``) by class
name and message, so it needs no torch import:

- ``oom``: ``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError``), ``MemoryError``, or a
  message saying "out of memory";
- ``nccl_timeout``: a message naming NCCL and a timeout, or a ``DistBackendError`` /
  ``DistNetworkError`` / ``DistStoreError`` (c10d) that timed out;
- ``hardware``: uncorrectable ECC errors, "fallen off the bus", Xid errors;
- ``unknown``: none of those, but a collective failed because a peer rank went away
  (:func:`is_peer_loss`): this rank is not the cause, so it does not name one; the peer's own
  report, or the collector's ``killed`` for a rank that went silent, does;
- ``exception``: anything else.
"""

from __future__ import annotations

import re
from typing import Protocol, TypeGuard

from ._scope import Scope
from .semconv import FailureCauseValues

_OOM_TYPES = frozenset({"OutOfMemoryError", "MemoryError"})
_DIST_TYPES = frozenset({"DistBackendError", "DistNetworkError", "DistStoreError", "DistError"})
_TIMEOUT_WORDS = ("timeout", "timed out", "time out", "watchdog caught collective")
_HARDWARE = re.compile(r"uncorrectable ecc|\becc error|fallen off the bus|\bxid\b|nvlink error")

PEER_LOSS_MARKERS = (
    "connection closed by peer",  # gloo
    "connection reset by peer",
    "broken pipe",
    "remote process exited",  # NCCL
    "communicator was aborted",
)
"""Phrases of a collective's error when another rank went away (this rank is not the cause)."""


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not s for s in seen) and len(seen) < 16:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _type_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _message(exc: BaseException) -> str:
    try:
        return str(exc).lower()
    except Exception:  # a broken __str__ must not hide the failure
        return ""


def _classify_one(exc: BaseException) -> FailureCauseValues | None:
    names = _type_names(exc)
    message = _message(exc)
    if names & _OOM_TYPES or "out of memory" in message:
        return FailureCauseValues.OOM
    timed_out = any(word in message for word in _TIMEOUT_WORDS)
    if timed_out and ("nccl" in message or names & _DIST_TYPES):
        return FailureCauseValues.NCCL_TIMEOUT
    if _HARDWARE.search(message):
        return FailureCauseValues.HARDWARE
    return None


def is_peer_loss(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception in its chain) says a peer rank went away
    (:data:`PEER_LOSS_MARKERS`)."""
    return any(marker in _message(link) for link in _chain(exc) for marker in PEER_LOSS_MARKERS)


def classify(exc: BaseException) -> FailureCauseValues:
    """The ETT failure cause of ``exc`` (module docstring): a specific cause anywhere in the
    chain first, then ``unknown`` for a lost peer, else ``exception``."""
    for link in _chain(exc):
        cause = _classify_one(link)
        if cause is not None:
            return cause
    if is_peer_loss(exc):
        return FailureCauseValues.UNKNOWN
    return FailureCauseValues.EXCEPTION


def error_type(exc: BaseException | type[BaseException]) -> str:
    """OpenTelemetry's ``error.type``: the exception's fully qualified class name."""
    cls = exc if isinstance(exc, type) else type(exc)
    module = getattr(cls, "__module__", "") or ""
    if module in {"builtins", "__main__"}:
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def fails_attempt(exc: BaseException | None) -> TypeGuard[BaseException]:
    """True when ``exc``, escaping the attempt, fails it: any exception but ``SystemExit(0)`` or
    ``SystemExit(None)`` (a clean exit)."""
    return exc is not None and not (isinstance(exc, SystemExit) and exc.code in (0, None))


class _Failable(Protocol):
    def fail(self, exc: BaseException) -> None: ...


class Guard(Scope):
    """A context manager: an exception escaping it fails the attempt (``session.fail(exc)``),
    then propagates unchanged. ``SystemExit(0)`` / ``SystemExit(None)`` is not a failure."""

    def __init__(self, session: _Failable) -> None:
        self._session = session

    def __enter__(self) -> None:
        return None

    def _leave(self, exc: BaseException | None) -> None:
        if fails_attempt(exc):
            self._session.fail(exc)
