"""Assembling a session from :func:`ett.init`'s options: where its spans go.

Decided in this order: nowhere (the session records nothing: ``enabled=False``,
``ETT_DISABLED``, ``OTEL_SDK_DISABLED``, ``OTEL_TRACES_EXPORTER=none`` for the library's own
pipeline, or no ``opentelemetry-sdk``); the caller's ``tracer_provider``; else the library's
own pipeline (``ett._pipeline``: a bounded queue to OTLP/HTTP or to the given ``exporter``, and
the spool). The spans never go through the program's global provider: its sampler could drop
them, and its exporter ignores ETT's endpoint.

The OpenTelemetry SDK and the OTLP exporter are imported here, lazily, only when the library
builds its own pipeline: ``import ett`` needs only ``opentelemetry-api``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from opentelemetry import trace

from . import semconv
from ._config import (
    Identity,
    IdentityArgs,
    env_disabled,
    resolve_endpoint,
    resolve_exit_timeout,
    resolve_flush_timeout,
    resolve_spool,
    resolve_window,
)
from ._conventions import check_protocol, keeps_every_span, traces_exporter
from ._credentials import Credentials
from ._errors import LOGGER_NAME, log_once
from ._session import Flusher, Session

_TRACER_NAME = __package__ or LOGGER_NAME


@dataclass(frozen=True)
class InitOptions:
    """:func:`ett.init`'s arguments, typed (what each means: its docstring). The identity ones
    are an :class:`~ett._config.IdentityArgs`; together the two records name every argument."""

    identity: IdentityArgs
    endpoint: str | None
    window_s: float
    install_handlers: bool
    tracer_provider: Any
    exporter: Any
    enabled: bool | None
    flush_timeout_s: float | None
    max_queue_size: int
    token: str | None
    exit_timeout_s: float | None
    raise_on_sigterm: bool

    @classmethod
    def of(cls, args: Mapping[str, Any]) -> InitOptions:
        """From init's arguments by name (its ``locals()``); a missing name is a KeyError."""
        identity = IdentityArgs(**{f.name: args[f.name] for f in fields(IdentityArgs)})
        rest = {f.name: args[f.name] for f in fields(cls) if f.name != "identity"}
        return cls(identity=identity, **rest)

    @property
    def own_pipeline(self) -> bool:
        """True when the spans go through the library's own pipeline and OTLP exporter (no
        ``tracer_provider`` and no ``exporter`` given)."""
        return self.tracer_provider is None and self.exporter is None


@dataclass(frozen=True)
class _Timing:
    """A recording session's timings, resolved."""

    window_s: float
    flush_timeout_s: float
    exit_timeout_s: float


def build(options: InitOptions) -> Session:
    """The session ``options`` ask for (the module docstring says which, in which order)."""
    identity = options.identity.resolve()
    if not _enabled(options):
        return _disabled(identity)
    timing = _Timing(
        window_s=resolve_window(options.window_s),
        flush_timeout_s=resolve_flush_timeout(options.flush_timeout_s),
        exit_timeout_s=resolve_exit_timeout(options.exit_timeout_s),
    )
    sdk_class = _sdk_provider_class()
    if options.own_pipeline and sdk_class is not None:
        _note_global_provider(sdk_class, options.endpoint)
    if options.tracer_provider is not None:
        return _given_provider_session(options.tracer_provider, identity, timing)
    if sdk_class is None:
        log_once("setup.sdk", "opentelemetry-sdk is not installed: ETT records nothing")
        return _disabled(identity)
    return _own_pipeline_session(options, identity, timing)


def _enabled(options: InitOptions) -> bool:
    """``enabled``, else not :func:`~ett._config.env_disabled`; off (said once) when the own
    pipeline would export to ``OTEL_TRACES_EXPORTER=none``."""
    enabled = not env_disabled() if options.enabled is None else options.enabled
    if enabled and options.own_pipeline and traces_exporter() == "none":
        log_once("setup.exporter_none", "OTEL_TRACES_EXPORTER=none: ETT records nothing")
        return False
    return enabled


def _disabled(identity: Identity) -> Session:
    return Session(identity, trace.NoOpTracer(), enabled=False)


def _recording(
    identity: Identity,
    tracer: trace.Tracer,
    timing: _Timing,
    flusher: Flusher,
    *,
    dropped: Callable[[], int] | None = None,
    span_identity: bool = False,
) -> Session:
    return Session(
        identity,
        tracer,
        flusher=flusher,
        dropped=dropped,
        span_identity=span_identity,
        window_s=timing.window_s,
        flush_timeout_s=timing.flush_timeout_s,
        exit_timeout_s=timing.exit_timeout_s,
    )


def _sdk_provider_class() -> type | None:
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return None
    return TracerProvider


def _note_global_provider(sdk_class: type, endpoint: str | None) -> None:
    """Say once that a global SDK provider the program set is not the one ETT sends through."""
    if isinstance(trace.get_tracer_provider(), sdk_class):
        log_once(
            "setup.global_provider",
            "ETT sends its spans through its own pipeline (endpoint %s), not the program's "
            "global TracerProvider, so that none is sampled out; pass "
            "init(tracer_provider=...) to use yours",
            resolve_endpoint(endpoint),
        )


def _run_bounded(func: Callable[[], object], timeout_s: float) -> None:
    """Run ``func()`` on a daemon thread and wait at most ``timeout_s`` for it."""
    thread = threading.Thread(target=func, name="ett-flush", daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_s))


def _has_identity(provider: Any, identity_attrs: dict[str, Any]) -> bool:
    attrs = getattr(getattr(provider, "resource", None), "attributes", None) or {}
    return all(attrs.get(key) == value for key, value in identity_attrs.items())


def _given_provider_session(provider: Any, identity: Identity, timing: _Timing) -> Session:
    """A session writing to the caller's provider, flushed (bounded) but never shut down; its
    spans carry the identity themselves when the provider's resource lacks it."""
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

    return _recording(
        identity,
        provider.get_tracer(_TRACER_NAME, semconv.SCHEMA_VERSION),
        timing,
        flush_foreign,
        span_identity=not _has_identity(provider, identity.attributes()),
    )


def _exporter(given: Any) -> Any:
    """The own pipeline's exporter: ``given``; else a console one (``OTEL_TRACES_EXPORTER=
    console``); else None, OTLP/HTTP (its protocol checked, ``ett._conventions``)."""
    if given is None and traces_exporter() == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stdout)  # today's stdout, not import time's
    if given is None:
        check_protocol()
    return given


def _own_pipeline_session(options: InitOptions, identity: Identity, timing: _Timing) -> Session:
    """A session writing to the library's own provider and export queue, which its last flush
    shuts down (unless the exit watchdog may still record a hang)."""
    from ._pipeline import build_provider

    exporter = _exporter(options.exporter)
    holder: list[Session] = []

    def earlier_drops(count: int) -> None:  # the export thread, delivering older spool files
        if holder and not holder[0].ended:  # set on the open ett.attempt span (thread-safe)
            root = holder[0]._attempt_span  # the session's own span: no public setter needed
            root.set_attribute(semconv.TELEMETRY_SPOOL_DROPPED_SPANS, count)

    own, queue = build_provider(
        identity,
        resolve_endpoint(options.endpoint),
        max_queue_size=options.max_queue_size,
        exporter=exporter,
        credentials=Credentials.resolve(options.token),
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

    session = _recording(
        identity,
        own.get_tracer(_TRACER_NAME, semconv.SCHEMA_VERSION),
        timing,
        flush_own,
        dropped=lambda: queue.dropped,
    )
    holder.append(session)
    return session
