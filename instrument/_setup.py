"""Starting a session: :func:`init`, :func:`attempt` and :func:`current`.

The OpenTelemetry SDK and the OTLP exporter are imported here, lazily, only when the library
builds its own pipeline: ``import ett`` needs only ``opentelemetry-api``. The spans go
through that pipeline of the library's own, never through the program's global provider (its
sampler could drop them, and its exporter ignores ETT's endpoint); ``tracer_provider=`` chooses
another provider explicitly.
"""

from __future__ import annotations

import os
import sys
import threading
from types import TracebackType
from typing import Any

from opentelemetry import trace

from . import semconv
from ._config import (
    env_disabled,
    resolve_endpoint,
    resolve_exit_timeout,
    resolve_flush_timeout,
    resolve_headers,
    resolve_identity,
    resolve_spool,
)
from ._conventions import check_protocol, keeps_every_span, traces_exporter
from ._errors import LOGGER_NAME, log_once
from ._hooks import ProcessHooks
from ._session import Session

_lock = threading.Lock()
_current: Session | None = None
_current_pid = 0
"""The process that started ``_current`` (a forked child starts its own session)."""
_disabled: Session | None = None

_PREEMPTION = semconv.FailureCauseValues.PREEMPTION.value


def _run_bounded(func: Any, timeout_s: float) -> None:
    """Run ``func()`` on a daemon thread and wait at most ``timeout_s`` for it."""
    thread = threading.Thread(target=func, name="ett-flush", daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_s))


def _sdk_provider_class() -> type | None:
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return None
    return TracerProvider


def _has_identity(provider: Any, identity_attrs: dict[str, Any]) -> bool:
    attrs = getattr(getattr(provider, "resource", None), "attributes", None) or {}
    return all(attrs.get(key) == value for key, value in identity_attrs.items())


def _build(kwargs: dict[str, Any]) -> Session:
    identity = resolve_identity(
        job_id=kwargs["job_id"],
        model=kwargs["model"],
        team=kwargs["team"],
        attempt=kwargs["attempt"],
        rank=kwargs["rank"],
        world_size=kwargs["world_size"],
        allocated_at=kwargs["allocated_at"],
        service_name=kwargs["service_name"],
    )
    enabled = kwargs["enabled"]
    if enabled is None:
        enabled = not env_disabled()
    provider = kwargs["tracer_provider"]
    own_pipeline = provider is None and kwargs["exporter"] is None
    if enabled and own_pipeline and traces_exporter() == "none":
        log_once("setup.exporter_none", "OTEL_TRACES_EXPORTER=none: ETT records nothing")
        enabled = False
    if not enabled:
        return Session(identity, trace.NoOpTracer(), enabled=False)
    common: dict[str, Any] = {
        "window_s": kwargs["window_s"],
        "flush_timeout_s": resolve_flush_timeout(kwargs["flush_timeout_s"]),
        "exit_timeout_s": resolve_exit_timeout(kwargs["exit_timeout_s"]),
    }
    sdk_class = _sdk_provider_class()
    global_sdk = sdk_class is not None and isinstance(trace.get_tracer_provider(), sdk_class)
    if provider is None and kwargs["exporter"] is None and global_sdk:
        log_once(
            "setup.global_provider",
            "ETT sends its spans through its own pipeline (endpoint %s), not the program's "
            "global TracerProvider, so that none is sampled out; pass "
            "init(tracer_provider=...) to use yours",
            resolve_endpoint(kwargs["endpoint"]),
        )
    if provider is not None:
        if not keeps_every_span(provider):
            log_once(
                "setup.sampler",
                "the tracer_provider given to ETT samples (%s): ETT spans it drops are lost "
                "to the figures; give it an always-on sampler",
                getattr(getattr(provider, "sampler", None), "get_description", lambda: "?")(),
            )
        flush = getattr(provider, "force_flush", None)

        def flush_foreign(timeout_s: float) -> None:
            if callable(flush):
                _run_bounded(lambda: flush(int(timeout_s * 1000)), timeout_s)

        return Session(
            identity,
            provider.get_tracer(__package__ or LOGGER_NAME, semconv.SCHEMA_VERSION),
            flusher=flush_foreign,
            span_identity=not _has_identity(provider, identity.attributes()),
            **common,
        )
    if sdk_class is None:
        log_once("setup.sdk", "opentelemetry-sdk is not installed: ETT records nothing")
        return Session(identity, trace.NoOpTracer(), enabled=False)
    from ._pipeline import build_provider

    exporter = kwargs["exporter"]
    if exporter is None and traces_exporter() == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporter = ConsoleSpanExporter(out=sys.stdout)  # today's stdout, not import time's
    elif exporter is None:
        check_protocol()
    holder: list[Session] = []

    def earlier_drops(count: int) -> None:  # the export thread, delivering older spool files
        if holder and not holder[0].ended:  # set on the open ett.attempt span (thread-safe)
            root = holder[0]._attempt_span  # the session's own span: no public setter needed
            root.set_attribute(semconv.TELEMETRY_SPOOL_DROPPED_SPANS, count)

    own, queue = build_provider(
        identity,
        resolve_endpoint(kwargs["endpoint"]),
        max_queue_size=kwargs["max_queue_size"],
        exporter=exporter,
        headers=resolve_headers(kwargs["token"]),
        spool=resolve_spool() if exporter is None else ("", 0),
        on_earlier_drops=earlier_drops,
    )

    def flush_own(timeout_s: float) -> None:
        # after the end, shut down; unless the exit watchdog may still record a hang
        if holder and holder[0].ended and not holder[0].exit_watchdog.keeps_pipeline_open:
            queue.shutdown(int(timeout_s * 1000))
            own.shutdown()
        else:
            queue.force_flush(int(timeout_s * 1000))

    session = Session(
        identity,
        own.get_tracer(__package__ or LOGGER_NAME, semconv.SCHEMA_VERSION),
        flusher=flush_own,
        dropped=lambda: queue.dropped,
        **common,
    )
    holder.append(session)
    return session


def _install_hooks(session: Session, raise_on_sigterm: bool) -> None:
    def on_sigterm() -> None:
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
    ends ``preempted``, then the process dies by the signal, or, with ``raise_on_sigterm``,
    :class:`ett.Preempted` is raised in the main thread (also when the session records
    nothing, so the program behaves the same with telemetry off). ``exit_timeout_s`` (else
    ``ETT_EXIT_TIMEOUT_S``, default 5; 0 disables): once a failed end is flushed, the process
    has that long to exit before the exit watchdog records the hang and ends it.
    A second call while a session is active returns that session (its arguments are ignored).
    """
    global _current, _current_pid
    with _lock:
        if _current is not None and not _current.ended and _current_pid == os.getpid():
            return _current
        if _current is not None:  # a new attempt in this process: it is not exiting after all
            _current.exit_watchdog.disarm()
        try:
            session = _build(dict(locals()))
        except Exception:
            log_once("setup.init", "ETT init failed: recording nothing", exc_info=True)
            session = Session(resolve_identity(), trace.NoOpTracer(), enabled=False)
        # a disabled session records nothing, but a program that asked for Preempted gets it
        if install_handlers and (session.enabled or raise_on_sigterm):
            try:
                _install_hooks(session, raise_on_sigterm)
            except Exception:
                log_once("setup.hooks", "could not install ETT process hooks", exc_info=True)
        _current, _current_pid = session, os.getpid()
        return session


def current() -> Session:
    """The active session, or a disabled one (that records nothing) when none is active."""
    global _disabled
    session = _current
    if session is not None and not session.ended:
        return session
    if _disabled is None:
        _disabled = Session(resolve_identity(job_id="none"), trace.NoOpTracer(), enabled=False)
    return _disabled


class AttemptScope:
    """``with ett.attempt(...) as sess:`` see :func:`attempt`."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._kwargs = kwargs
        self.session: Session | None = None

    def __enter__(self) -> Session:
        self.session = init(**self._kwargs)
        return self.session

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.session is None:
            return
        if exc is not None and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            self.session.fail(exc)
        else:
            self.session.end()


def attempt(**kwargs: Any) -> AttemptScope:
    """A context manager around the whole attempt: :func:`init` (with ``kwargs``) on entry; on
    exit the attempt ends ``completed``, or ``failed`` when an exception escapes (recorded as
    an ``ett.failure`` with its cause, then re-raised unchanged)."""
    return AttemptScope(kwargs)
