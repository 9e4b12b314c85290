"""Who is emitting, and where to: identity and endpoint, from arguments, then the environment.

Environment variables (an explicit argument to :func:`ett.init` always wins; the
exporter and protocol conventions are in ``ett._conventions``):

========================================  ===================================================
``ETT_JOB_ID``                            job id; else ``TORCHELASTIC_RUN_ID`` (unless
                                          ``none``), ``SLURM_JOB_ID``, else ``<host>-<pid>``
                                          (``<host>-<parent pid>`` under torchrun) and a warning
``ETT_MODEL``, ``ETT_TEAM``               model family and team
``ETT_ATTEMPT``                           attempt number (other schedulers); else
                                          ``TORCHELASTIC_RESTART_COUNT``; else 0
``RANK``, ``WORLD_SIZE``                  rank (default 0) and world size (default 1)
``ETT_ALLOCATED_AT``                      unix seconds of the allocation; else the process
                                          start time. Ignored for a torchelastic restart
                                          (attempt from ``TORCHELASTIC_RESTART_COUNT`` > 0):
                                          that attempt was allocated when its process started
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``    full traces URL, used as is
``OTEL_EXPORTER_OTLP_ENDPOINT``           base URL; ``/v1/traces`` is appended
                                          (default ``http://127.0.0.1:4318``)
``OTEL_SERVICE_NAME``                     ``service.name`` (default ``ett-trainer``)
``ETT_TOKEN``                             bearer token for a collector started with one (a
                                          write token: ``ett serve --write-tokens``);
                                          beats an ``authorization`` header in
                                          ``OTEL_EXPORTER_OTLP_(TRACES_)HEADERS`` (a warning
                                          when both are set), whose other headers are kept
``ETT_TOKEN_FILE``                        a file holding that token (when ``ETT_TOKEN`` is
                                          unset), in the collector's token-file format: the
                                          first token, blank lines and ``#`` comments
                                          skipped; TLS: the standard
                                          ``OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE`` (CA
                                          bundle), ``..._CLIENT_CERTIFICATE``, ``..._CLIENT_KEY``
``ETT_DISABLED``                          ``1``/``true``: the session records nothing
``OTEL_SDK_DISABLED``                     ``true``: the same (the OpenTelemetry convention)
``ETT_FLUSH_TIMEOUT_S``                   seconds ``end()`` and the hooks wait for the export
                                          (default 5; at most 0.5 while the collector was
                                          unreachable at the last attempt; 0 or less is
                                          refused, the default used)
``ETT_EXIT_TIMEOUT_S``                    exit watchdog: seconds a failed rank may take to exit
                                          after its failure is flushed before it is ended with
                                          ``os._exit(124)`` (default 5; ``0`` disables it; a
                                          negative value is refused, the default used)
``ETT_PERSIST_WAIT_S``                    seconds the end of an attempt, however it ends,
                                          waits for checkpoint persists in flight, emitting
                                          each with its real end (default 5; ``0``: no wait;
                                          ``ett._persist``)
``ETT_SPOOL_DIR``                         where spans the collector did not take wait on
                                          disk (default ``$XDG_STATE_HOME/ett/spool``, else
                                          ``~/.local/state/ett/spool``; ``off``: no spool;
                                          ``ett._spool``)
``ETT_SPOOL_MAX_MB``                      the most the spool directory holds, all jobs
                                          together (default 256; ``0``: no spool)
``ETT_DDP_WAITS``                         ``0``/``false``: ``ett-instrument`` leaves DDP's
                                          gradient reduction as it is (no wait timing, no
                                          straggler score); default on. Timing runs the
                                          reduction through torch's Python ``allreduce_hook``:
                                          about 55 µs per gradient bucket (0.8 ms of an 18 ms
                                          step with 16 buckets on one H200)
========================================  ===================================================
"""

from __future__ import annotations

import math
import os
import re
import socket
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from . import semconv
from ._errors import log_once

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
"""Base URL of the collector when no argument or environment variable names one."""

TRACES_PATH = "/v1/traces"
DEFAULT_SERVICE_NAME = "ett-trainer"

_IMPORTED_AT = time.time()
_N = TypeVar("_N", int, float)


@dataclass(frozen=True)
class Identity:
    """The attempt and rank a process speaks for (docs/metrics.md, "The spans it reads")."""

    job_id: str
    attempt: int
    rank: int
    world_size: int
    allocated_at: float
    """Unix seconds: the start of the ``ett.attempt`` span."""
    model: str | None = None
    team: str | None = None
    service_name: str = DEFAULT_SERVICE_NAME
    host_name: str = ""

    def attributes(self) -> dict[str, str | int]:
        """The resource attributes of this identity (unset optional ones left out)."""
        attrs: dict[str, str | int] = {
            semconv.JOB_ID: self.job_id,
            semconv.ATTEMPT: self.attempt,
            semconv.RANK: self.rank,
            semconv.WORLD_SIZE: self.world_size,
            semconv.SERVICE_NAME: self.service_name,
            semconv.HOST_NAME: self.host_name,
        }
        if self.model:
            attrs[semconv.MODEL] = self.model
        if self.team:
            attrs[semconv.TEAM] = self.team
        return attrs


def _number(env: Mapping[str, str], name: str, parse: Callable[[str], _N], what: str) -> _N | None:
    """``parse`` of variable ``name``; None when unset, or (said once) when it is not ``what``."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return parse(raw)
    except ValueError:
        log_once("config." + name, "ignoring %s=%r: not %s", name, raw, what)
        return None


def _int(env: Mapping[str, str], name: str) -> int | None:
    return _number(env, name, int, "an integer")


MAX_IDENTITY_NUMBER = 2**31 - 1
"""The largest attempt, rank or world size the collector takes (the same on SQLite and
PostgreSQL): a larger one got every span rejected."""


def _count(env: Mapping[str, str], name: str, least: int = 0) -> int | None:
    """:func:`_int` of ``name``, or None (said once) outside ``least`` to
    :data:`MAX_IDENTITY_NUMBER`: the collector rejects every span of a negative or huge
    attempt or rank, which was silent on the training side."""
    value = _int(env, name)
    return _identity_number(value, least, f"{name}={env.get(name)!r}", "")


def _finite(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


def _float(env: Mapping[str, str], name: str) -> float | None:
    """A finite number: ``inf`` made ``end()``'s flush raise (nothing flushed) and a spool bound
    of ``inf`` failed ``init`` (nothing recorded); ``nan`` passed every comparison."""
    return _number(env, name, _finite, "a finite number")


def _allocated_at(env: Mapping[str, str]) -> float | None:
    """``ETT_ALLOCATED_AT``: unix seconds, within a day of now or before it; another value
    (milliseconds, ``date +%s%3N``, or a time ahead of the clock) is said once and ignored (it
    overflowed the exporter's nanoseconds and stopped every export of the process)."""
    value = _float(env, "ETT_ALLOCATED_AT")
    if value is None:
        return None
    if not 0 < value <= time.time() + 86400:
        log_once(
            "config.ETT_ALLOCATED_AT.range",
            "ignoring ETT_ALLOCATED_AT=%r: not unix seconds up to now (milliseconds? write "
            "$(date +%%s)); the process start is used",
            env.get("ETT_ALLOCATED_AT"),
        )
        return None
    return value


def process_start_time() -> float:
    """Unix time at which this process started (Linux ``/proc``), else when this module loaded."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            stat = f.read()
        # Field 22 (starttime, in clock ticks since boot); fields after the ")" of comm start at 3.
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        hz = os.sysconf("SC_CLK_TCK")
        return time.time() - (uptime - start_ticks / hz)
    except (OSError, ValueError, IndexError):
        return _IMPORTED_AT


def _default_job_id(env: Mapping[str, str], host: str) -> str:
    run_id = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if run_id and run_id != "none":
        return run_id
    slurm = env.get("SLURM_JOB_ID", "").strip()
    if slurm:
        return slurm
    pid = os.getppid() if "TORCHELASTIC_RESTART_COUNT" in env else os.getpid()
    job_id = f"{host}-{pid}"
    log_once("config.job_id", "ETT_JOB_ID is not set; using job id %r", job_id)
    return job_id


@dataclass(frozen=True)
class IdentityArgs:
    """Who is emitting, as :func:`ett.init` was told (its identity arguments); each ``None``
    comes from the environment (:meth:`resolve`, the module docstring)."""

    job_id: str | None = None
    model: str | None = None
    team: str | None = None
    attempt: int | None = None
    rank: int | None = None
    world_size: int | None = None
    allocated_at: float | None = None
    service_name: str | None = None

    def resolve(self, env: Mapping[str, str] | None = None) -> Identity:
        """The identity: these arguments, falling back to ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        host = socket.gethostname()
        restart = _int(env, "TORCHELASTIC_RESTART_COUNT")
        env_attempt = _count(env, "ETT_ATTEMPT")
        attempt = _given(self.attempt, "attempt")
        if attempt is None:
            attempt = env_attempt if env_attempt is not None else (restart or 0)
        allocated_at = _given_instant(self.allocated_at)
        if allocated_at is None:
            elastic_restart = env_attempt is None and (restart or 0) > 0
            env_alloc = None if elastic_restart else _allocated_at(env)
            allocated_at = env_alloc if env_alloc is not None else process_start_time()
        rank, world_size = _given(self.rank, "rank"), _given(self.world_size, "world_size", 1)
        return Identity(
            job_id=self.job_id or env.get("ETT_JOB_ID", "").strip() or _default_job_id(env, host),
            attempt=attempt,
            rank=rank if rank is not None else (_count(env, "RANK") or 0),
            world_size=world_size
            if world_size is not None
            else (_count(env, "WORLD_SIZE", least=1) or 1),
            allocated_at=allocated_at,
            model=self.model or env.get("ETT_MODEL") or None,
            team=self.team or env.get("ETT_TEAM") or None,
            service_name=self.service_name or env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME,
            host_name=host,
        )


def _given(value: int | None, name: str, least: int = 0) -> int | None:
    """An identity number passed to :func:`ett.init`, or None (said once, and the environment
    or the default used instead) when it is not an integer (an integral float such as ``2.0``
    is taken as one) or is outside ``least`` to :data:`MAX_IDENTITY_NUMBER`: the collector
    rejects every span of such an attempt or rank, which the training side would not see
    (``rank=1.5``), and a string (``attempt="abc"``) failed ``init`` (nothing recorded)."""
    then = "; using the environment or the default"
    given = f"init({name}={value!r})"
    if value is None:
        return None
    number: object = value
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int):
        log_once("config.type." + given, "ignoring %s: not an integer%s", given, then)
        return None
    return _identity_number(number, least, given, then)


def _given_instant(value: float | None) -> float | None:
    """``init(allocated_at=)``: unix seconds, or None (said once; the environment or the process
    start is used) when it is not a finite positive number (a string failed ``init``)."""
    if value is None:
        return None
    seconds = given_seconds(value, "allocated_at")
    if seconds is not None and seconds <= 0:
        log_once(
            "config.given.allocated_at.range",
            "ignoring allocated_at=%r: not unix seconds",
            value,
        )
        return None
    return seconds


def _identity_number(value: int | None, least: int, given: str, then: str) -> int | None:
    """``value``, or None (said once per ``given``) outside ``least`` to
    :data:`MAX_IDENTITY_NUMBER`."""
    if value is not None and not least <= value <= MAX_IDENTITY_NUMBER:
        log_once(
            "config.range." + given,
            "ignoring %s: it must be from %d to %d%s",
            given,
            least,
            MAX_IDENTITY_NUMBER,
            then,
        )
        return None
    return value


def resolve_identity(*, env: Mapping[str, str] | None = None, **given: Any) -> Identity:
    """The keyword form of :meth:`IdentityArgs.resolve`: ``IdentityArgs(**given).resolve(env)``
    (an unknown keyword is a TypeError)."""
    return IdentityArgs(**given).resolve(env)


def resolve_endpoint(
    endpoint: str | None = None, env: Mapping[str, str] | None = None, *, warn: bool = True
) -> str:
    """The OTLP/HTTP traces URL: ``endpoint`` (a base URL, or a full ``…/v1/traces`` URL), else the
    ``OTEL_EXPORTER_OTLP_*`` conventions, else ``http://127.0.0.1:4318/v1/traces``. A URL that
    is not ``http://`` or ``https://`` with a host is said once (the spans then wait in the
    spool, as for a collector that is away, until a process with the right URL sends them)."""
    env = os.environ if env is None else env
    source = "as given"
    if not endpoint:
        traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        if traces:
            if warn:
                _check_url(traces, "from OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            return traces
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        source = "from OTEL_EXPORTER_OTLP_ENDPOINT"
        endpoint = endpoint or DEFAULT_ENDPOINT
    if warn:
        _check_url(endpoint, source)
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


def endpoint_usable(url: str) -> bool:
    """False when ``url`` cannot reach a collector: a scheme other than http(s) (``htp://``,
    ``grpc://``, a bare ``host:4318``), no host, or a port that is not a number."""
    try:
        parts = urllib.parse.urlsplit(url)
        return (
            parts.scheme in ("http", "https")
            and bool(parts.hostname)
            and (parts.port is None or parts.port > 0)
        )
    except ValueError:
        return False


def _check_url(url: str, source: str) -> None:
    """Say once when ``url`` cannot reach a collector (:func:`endpoint_usable`)."""
    if not endpoint_usable(url):
        log_once(
            "config.endpoint",
            "ETT cannot send spans to %r (%s): not an http:// or https:// URL with a host "
            "(and a port number), so "
            "they wait in the spool; a collector's OTLP/HTTP address looks like "
            "http://collector-host:4318",
            url,
            source,
        )


DEFAULT_EXIT_TIMEOUT_S = 5.0
"""Seconds a failed rank may take to exit after its failure is flushed (``ETT_EXIT_TIMEOUT_S``)."""


def given_seconds(value: float | None, name: str) -> float | None:
    """A number of seconds passed as an argument ``name``, or None (said once: the
    environment or the default is used) when it is not a finite number."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if math.isfinite(seconds):
        return seconds
    log_once("config.given." + name, "ignoring %s=%r: not a finite number of seconds", name, value)
    return None


def _at_least(value: float | None, least: float, given: str, rule: str, default: float) -> float:
    """``value``; ``default`` when it is None, or (said once per ``given``, with ``rule``) below
    ``least``."""
    if value is None:
        return default
    if value < least:
        log_once(
            "config.least." + given,
            "ignoring %s: %s; using the default, %g s",
            given,
            rule,
            default,
        )
        return default
    return value


def _seconds_setting(
    timeout_s: float | None, name: str, var: str, env: Mapping[str, str] | None
) -> tuple[float | None, str]:
    """``timeout_s`` (argument ``name``), else variable ``var``; and how the value was given,
    for a message (``init(name=0)``, ``VAR='0'``)."""
    value = given_seconds(timeout_s, name)
    if value is not None:
        return value, f"init({name}={timeout_s!r})"
    env = os.environ if env is None else env
    return _float(env, var), f"{var}={env.get(var)!r}"


def resolve_window(window_s: object) -> float:
    """``init(window_s=)``: a positive, finite number of seconds; else (said once)
    :data:`~ett.semconv.DEFAULT_WINDOW_S`. A string or ``None`` failed ``init`` (nothing
    recorded), and 0 or less emitted a window at every poll of the window thread."""
    try:
        seconds = float(window_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(window_s, bool) or not (math.isfinite(seconds) and seconds > 0):
        log_once(
            "config.window_s." + repr(window_s)[:40],
            "ignoring init(window_s=%r): a window is a positive number of seconds; using the "
            "default, %g s",
            window_s,
            semconv.DEFAULT_WINDOW_S,
        )
        return semconv.DEFAULT_WINDOW_S
    return seconds


def resolve_exit_timeout(
    timeout_s: float | None = None, env: Mapping[str, str] | None = None
) -> float:
    """The exit watchdog's timeout: ``timeout_s``, else ``ETT_EXIT_TIMEOUT_S``, else
    :data:`DEFAULT_EXIT_TIMEOUT_S`; 0 disables the watchdog. A negative value is refused (said
    once; the default is used): it was taken silently as "off"."""
    value, given = _seconds_setting(timeout_s, "exit_timeout_s", "ETT_EXIT_TIMEOUT_S", env)
    rule = "a time cannot be negative (0 turns the exit watchdog off)"
    return _at_least(value, 0.0, given, rule, DEFAULT_EXIT_TIMEOUT_S)


DEFAULT_FLUSH_TIMEOUT_S = 5.0
"""Seconds ``end()`` waits for the export by default (``ETT_FLUSH_TIMEOUT_S``)."""


def resolve_flush_timeout(
    timeout_s: float | None = None, env: Mapping[str, str] | None = None
) -> float:
    """How long ``end()`` and the hooks wait for the export: ``timeout_s``, else
    ``ETT_FLUSH_TIMEOUT_S``, else :data:`DEFAULT_FLUSH_TIMEOUT_S`. A value of 0 or less is
    refused (said once; the default is used): the exit then shut the exporter down without
    waiting for it, which lost the attempt's end (``Exporter already shutdown``) even with a
    healthy collector, and said the collector was unreachable."""
    value, given = _seconds_setting(timeout_s, "flush_timeout_s", "ETT_FLUSH_TIMEOUT_S", env)
    if value is not None and value <= 0:
        value = -1.0  # refused below, as a negative one
    rule = "the end of an attempt needs time to send its last spans: it must be above 0"
    return _at_least(value, 0.0, given, rule, DEFAULT_FLUSH_TIMEOUT_S)


def env_seconds(name: str, env: Mapping[str, str] | None = None) -> float | None:
    """Variable ``name`` as a finite number of seconds; None when unset or (said once) not one."""
    return _float(os.environ if env is None else env, name)


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    """An on/off variable: ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off`` (any
    case); unset or empty gives ``default``, and another value gives it too, said once, since a
    typo in a switch would otherwise pass silently."""
    raw = env.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    if raw:
        log_once(
            "config.switch." + name,
            "ignoring %s=%r: want 1/true/yes/on or 0/false/no/off; taken as unset (%s)",
            name,
            env.get(name),
            "true" if default else "false",
        )
    return default


def ddp_waits_enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when ``ETT_DDP_WAITS`` is ``0``/``false``/``no``/``off``: the zero-code path then
    leaves DDP's own reduction in place (``ett._auto_ddp``)."""
    return _switch(os.environ if env is None else env, "ETT_DDP_WAITS", True)


def env_disabled(env: Mapping[str, str] | None = None) -> bool:
    """True when ``ETT_DISABLED`` (``1``/``true``/...) or ``OTEL_SDK_DISABLED=true`` (the
    OpenTelemetry SDK's own switch) asks for a session that records nothing."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return True
    return _switch(env, "ETT_DISABLED", False)


def _otlp_headers(raw: str) -> dict[str, str]:
    """The ``OTEL_EXPORTER_OTLP_HEADERS`` format: ``key=value`` pairs separated by commas, both
    URL-encoded; keys lower-cased. A malformed pair is ignored with a warning."""
    headers: dict[str, str] = {}
    for pair in raw.split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        key = urllib.parse.unquote(key).strip().lower()
        if not sep or not key:
            log_once("config.headers", "ignoring a malformed OTLP header %r (want key=value)", pair)
            continue
        headers[key] = urllib.parse.unquote(value).strip()
    return headers


def resolve_headers(
    token: str | None = None, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The OTLP request headers: those of ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` (else
    ``OTEL_EXPORTER_OTLP_HEADERS``), with ``authorization: Bearer <token>`` from ``token``,
    ``ETT_TOKEN`` or ``ETT_TOKEN_FILE`` over theirs (a warning when both name one and they
    differ)."""
    return resolve_token(token, env).headers


@dataclass(frozen=True)
class TokenSetting:
    """The OTLP request headers (:func:`resolve_headers`), and where their token came from."""

    headers: dict[str, str]
    origin: str | None
    """What set the token, for messages (``ETT_TOKEN``, ``ETT_TOKEN_FILE /path``...; never the
    token itself); None when no token is sent."""
    token_file: str | None
    """The ``ETT_TOKEN_FILE`` path when the token comes (or would come) from it: the one source
    that can change while the process runs (``ett._credentials``)."""


def resolve_token(token: str | None = None, env: Mapping[str, str] | None = None) -> TokenSetting:
    """The headers of :func:`resolve_headers`, and where their token came from."""
    env = os.environ if env is None else env
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "").strip()
    source = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
    if not raw:
        raw = env.get("OTEL_EXPORTER_OTLP_HEADERS", "").strip()
        source = "OTEL_EXPORTER_OTLP_HEADERS"
    headers = _otlp_headers(raw) if raw else {}
    origin: str | None = "init(token=...)" if token else None
    token_file = None
    if not token and env.get("ETT_TOKEN", "").strip():
        token, origin = env["ETT_TOKEN"].strip(), "ETT_TOKEN"
    elif not token and env.get("ETT_TOKEN_FILE", "").strip():
        token_file = env["ETT_TOKEN_FILE"].strip()
        token = _token_file(env)
        origin = f"ETT_TOKEN_FILE {token_file}" if token else None
    if token:
        bearer = f"Bearer {token}"
        if headers.get("authorization", bearer) != bearer:
            log_once(
                "config.token_vs_headers",
                "both ETT_TOKEN (or init(token=...)) and an authorization header in %s are set: "
                "ETT uses ETT_TOKEN's",
                source,
            )
        headers["authorization"] = bearer
    elif "authorization" in headers:
        origin = f"the authorization header of {source}"
    return TokenSetting(headers, origin, token_file)


def _token_file(env: Mapping[str, str]) -> str | None:
    """The token of ``ETT_TOKEN_FILE`` (:func:`read_token_file`); None (said once, without the
    token) when unset, unreadable or without a token."""
    path = env.get("ETT_TOKEN_FILE", "").strip()
    if not path:
        return None
    token, problem = read_token_file(path)
    if token is None:
        log_once("config.token_file", "ETT_TOKEN_FILE %s: %s: no token sent", path, problem)
    return token


_TOKEN_SEPARATORS = re.compile(r"[\s,]+")


def first_token(text: str) -> str | None:
    """The first token of a token file in the collector's own format (``ett serve
    --write-tokens``): tokens separated by white space or commas, ``#`` starting a comment that
    runs to the end of its line, blank lines allowed; None when it holds none."""
    for line in text.splitlines():
        for piece in _TOKEN_SEPARATORS.split(line.split("#", 1)[0]):
            if piece:
                return piece
    return None


def read_token_file(path: str) -> tuple[str | None, str]:
    """``(the first token of the file at path, "")``, or ``(None, why)`` when it cannot be read
    or holds no token (:func:`first_token`). Never raises; ``why`` never holds the token. A
    UTF-8 byte-order mark (a file saved by a Windows editor) is not part of the token."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read(1 << 16)
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read it ({type(exc).__name__})"
    token = first_token(text)
    return token, "" if token else "no token in it (only blank lines or # comments)"


DEFAULT_SPOOL_MAX_MB = 256.0
_OFF = frozenset({"off", "none", "0", "false", "no"})


def resolve_spool(env: Mapping[str, str] | None = None) -> tuple[str | None, int]:
    """The spool directory (``None``: default; ``""``: no spool) and its bound in bytes, from
    ``ETT_SPOOL_DIR`` and ``ETT_SPOOL_MAX_MB`` (a bound of 0 also means no spool)."""
    env = os.environ if env is None else env
    raw = env.get("ETT_SPOOL_DIR", "").strip()
    max_mb = _float(env, "ETT_SPOOL_MAX_MB")
    if max_mb is not None and max_mb < 0:
        log_once(
            "config.spool_max",
            "ignoring ETT_SPOOL_MAX_MB=%r: a size cannot be negative (0 turns the spool off)",
            env.get("ETT_SPOOL_MAX_MB"),
        )
        max_mb = None
    limit = int((DEFAULT_SPOOL_MAX_MB if max_mb is None else max_mb) * (1 << 20))
    if raw.lower() in _OFF or limit == 0:
        return "", 0
    return (raw or None), limit
