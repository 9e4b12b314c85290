"""Starting a session: :func:`init`, :func:`attempt` and :func:`current`.

Where a new session's spans go (the library's own pipeline, the caller's provider, or nowhere)
is ``ett._assembly``'s part; this module keeps the one active session of the process and
installs its process hooks.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from typing import Any

from opentelemetry import trace

from . import semconv
from ._assembly import InitOptions, build
from ._config import Identity, IdentityArgs
from ._errors import log_once, logger
from ._failure import fails_attempt
from ._hooks import ProcessHooks
from ._scope import Scope
from ._session import Session

_lock = threading.Lock()
_current: Session | None = None
_current_pid = 0
"""The process that started ``_current`` (a forked child starts its own session)."""
_disabled: Session | None = None

_PREEMPTION = semconv.FailureCauseValues.PREEMPTION.value


def _install_hooks(session: Session, raise_on_sigterm: bool) -> None:
    def on_sigterm(handled: bool) -> None:
        if handled:  # the program stops by itself: record on, the end comes at its exit
            session.preempt()
            return
        session.failure(_PREEMPTION)
        session.end(semconv.EndReasonValues.PREEMPTED.value, _PREEMPTION)

    ProcessHooks(
        on_exception=session.fail,
        on_thread_exception=session.failure,
        on_sigterm=on_sigterm,
        on_exit=session.end,
        raise_on_sigterm=raise_on_sigterm,
        defer=lambda action: session.defer_while_ending(action, session.end_bound_s),
    ).install()


def init(
    job_id: str | None = None,
    model: str | None = None,
    team: str | None = None,
    attempt: int | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    allocated_at: float | None = None,
    endpoint: str | None = None,
    window_s: float = semconv.DEFAULT_WINDOW_S,
    install_handlers: bool = True,
    *,
    tracer_provider: Any = None,
    exporter: Any = None,
    enabled: bool | None = None,
    service_name: str | None = None,
    flush_timeout_s: float | None = None,
    max_queue_size: int = 2048,
    token: str | None = None,
    exit_timeout_s: float | None = None,
    raise_on_sigterm: bool = False,
) -> Session:
    """Start instrumenting this attempt on this rank and return its :class:`Session`.

    Arguments left ``None`` come from the environment (see ``ett._config`` and
    ``ett._conventions``). The spans go to ``tracer_provider`` if given, else to a
    pipeline of the library's own (bounded queue, OTLP/HTTP to ``endpoint``, or ``exporter`` if
    given; ``token`` or ``ETT_TOKEN``: a bearer token for the collector), never to the
    program's global provider. ``flush_timeout_s`` (else ``ETT_FLUSH_TIMEOUT_S``, default 5):
    how long ``end()`` waits for the export; at most 0.5 s while the collector does not answer.
    ``install_handlers`` installs the exception, SIGTERM and exit hooks; on SIGTERM the attempt
    ends ``preempted``, then the process dies by the signal; with ``raise_on_sigterm``,
    :class:`ett.Preempted` is raised in the main thread instead (also when the session records
    nothing, so the program behaves the same with telemetry off), and, as for a SIGTERM
    handler of the program's own, the session records on (the checkpoint saved on the way out)
    and the attempt ends ``preempted`` at the exit or at ``end()``. ``exit_timeout_s`` (else
    ``ETT_EXIT_TIMEOUT_S``, default 5; 0 disables): once a failed end is flushed, the process
    has that long to exit before the exit watchdog records the hang and ends it.
    A second call while a session is active returns that session (its arguments are ignored).
    """
    global _current, _current_pid
    options = InitOptions.of(locals())
    with _lock:
        if _current is not None and not _current.ended and _current_pid == os.getpid():
            return _current
        if _current is not None:  # a new attempt in this process: it is not exiting after all
            _current.exit_watchdog.disarm()
            if _current_pid == os.getpid():
                options = _next_attempt(options, _current.identity)
        try:
            session = build(options)
        except Exception:
            log_once("setup.init", "ETT init failed: recording nothing", exc_info=True)
            session = Session(IdentityArgs().resolve(), trace.NoOpTracer(), enabled=False)
        # a disabled session records nothing, but a program that asked for Preempted gets it
        if install_handlers and (session.enabled or raise_on_sigterm):
            try:
                _install_hooks(session, raise_on_sigterm)
            except Exception:
                log_once("setup.hooks", "could not install ETT process hooks", exc_info=True)
        _current, _current_pid = session, os.getpid()
        return session


def _next_attempt(options: InitOptions, before: Identity) -> InitOptions:
    """An in-process retry: ``init()`` after the attempt ``before`` of the same job ended in
    this process. Without an ``attempt=`` of its own it is attempt ``before.attempt + 1``,
    allocated now (unless ``allocated_at=`` says otherwise): it used to resolve to the same
    attempt and allocation from the environment, so the retry's spans were merged into the
    failed attempt (one attempt, failed, ETT 0 %)."""
    args = options.identity
    if args.attempt is not None or args.resolve().job_id != before.job_id:
        return options
    retry = dataclasses.replace(
        args,
        attempt=before.attempt + 1,
        allocated_at=args.allocated_at if args.allocated_at is not None else time.time(),
    )
    logger.info(
        "init() after attempt %d of job %s ended in this process: recording attempt %d "
        "(pass attempt= to choose the number)",
        before.attempt,
        before.job_id,
        before.attempt + 1,
    )
    return dataclasses.replace(options, identity=retry)


def current() -> Session:
    """The active session, or a disabled one (that records nothing) when none is active."""
    global _disabled
    session = _current
    if session is not None and not session.ended:
        return session
    if _disabled is None:
        _disabled = Session(
            IdentityArgs(job_id="none").resolve(), trace.NoOpTracer(), enabled=False
        )
    return _disabled


class AttemptScope(Scope):
    """``with ett.attempt(...) as sess:`` see :func:`attempt`."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._kwargs = kwargs
        self.session: Session | None = None

    def __enter__(self) -> Session:
        self.session = init(**self._kwargs)
        return self.session

    def _leave(self, exc: BaseException | None) -> None:
        if self.session is None:
            return
        if fails_attempt(exc):
            self.session.fail(exc)
        else:
            self.session.end()


def attempt(**kwargs: Any) -> AttemptScope:
    """A context manager around the whole attempt: :func:`init` (with ``kwargs``) on entry; on
    exit the attempt ends ``completed``, or ``failed`` when an exception escapes (recorded as
    an ``ett.failure`` with its cause, then re-raised unchanged)."""
    return AttemptScope(kwargs)
