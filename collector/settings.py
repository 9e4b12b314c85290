"""The collector's configuration in one place: typed, from ``ETT_*`` environment variables."""

from __future__ import annotations

import itertools
import math
import os
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ett import semconv

from .security import AuthSettings, SecurityConfigError, TlsSettings

if TYPE_CHECKING:
    from .alerts.settings import AlertSettings

DEFAULT_PORT = 4318
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
"""Decoded bytes of trace requests ingested at once; past it a request is answered 429."""
DEFAULT_READ_WAIT_S = 2.0
"""How long a read of a job that has spans but no figures yet waits for its first recompute before
answering 503 "not computed yet" (a job with stored figures is answered at once, ``fresh: false``
when newer spans await their recompute); ``ett report`` waits this long for fresh figures."""
DEFAULT_READ_THREADS = 8
"""Threads that answer read requests at once, per server process (more reads wait their turn on
the event loop); ingest keeps the default pool of 40 to itself, so readers never fill the threads,
database connections and GIL time that a POST needs."""
DEFAULT_READ_CACHE_JOBS = 1000
"""Jobs whose last read answer each server process keeps (``ETT_READ_CACHE``; 0: none): a read
that finds the job's stored figures unchanged, by one indexed lookup, answers the kept bytes
(``collector/read/answers.py``)."""
DEFAULT_READ_RECHECK_S = 0.25
"""How long a kept read answer's stamp, once checked against the database, is trusted without a
new lookup (``ETT_READ_RECHECK_S``; 0: every read looks it up). Changes this process makes (its
ingest, its saved figures, its failed recomputes) are seen by the very next read whatever the
setting; only those made by another worker process or collector instance (or ``ett recompute``)
can take up to this long to show."""
DEFAULT_KEEP_ALIVE_S = 75.0
"""How long an idle HTTP connection stays open: longer than the 10 s export window, so a rank's
exporter keeps one connection instead of reconnecting for every export."""
DEFAULT_SEND_TIMEOUT_S = 30.0
"""How long an answer may wait for a client that reads none of it (the server's send buffer full
the whole time); past it the connection is dropped (``api/_connections.py``). A client that
asked for a 14 MB ``/metrics`` and never read held about twice that until it closed: 20 such
connections held 526 MB."""
DEFAULT_HEADER_TIMEOUT_S = 30.0
"""How long a request's head (request line and headers) may take to arrive from its first byte,
and a new connection's first request from the connection; past it the connection is closed
(``api/_connections.py``): clients that trickle header lines, or connect and send nothing, do not
hold a connection for good."""
DEFAULT_MAX_CLOCK_AHEAD_S = 600.0
"""How far past the collector's clock a span may end when it arrives. A span that ends later
comes from a clock that runs ahead, or carries a bad time (an end of 2262, the largest int64):
kept, one such span would stretch its job's wall time to the year it names and hold the job
running. It is refused alone (OTLP partial success), the request's other spans kept."""
DEFAULT_BODY_TIMEOUT_S = 30.0
"""How long a trace request's body may take to arrive, from the start of its reading to its last
byte; past it the request is answered 408 and its bytes leave the in-flight budget, so a client
that sends headers and stalls holds neither the budget nor its connection for longer. 32 MiB (the
largest body) in 30 s needs about 1.1 MB/s."""


ENV_MIN_FREE_BYTES = "ETT_READY_MIN_FREE_BYTES"
DEFAULT_MIN_FREE_BYTES = 1024 * 1024
"""Free bytes below which the SQLite database's disk is not ready (``api/_readiness.py``): small,
so that a small dedicated disk is not refused early (a batch that does not fit is caught by the
failed write instead)."""

DEFAULT_RAW_WINDOW_RETENTION_S = 600.0
"""Raw heartbeat windows kept per job before they are folded into runs (the store's default)."""


class ConfigError(ValueError):
    """Bad configuration: the service refuses to start and says why."""


def _auth_from_env() -> AuthSettings:
    """:meth:`AuthSettings.from_env`, its errors as :class:`ConfigError`."""
    try:
        return AuthSettings.from_env()
    except SecurityConfigError as exc:
        raise ConfigError(str(exc)) from None


def raw_window_retention_s() -> float | None:
    """``ETT_RAW_WINDOW_RETENTION_S``: seconds (on each job's own span clock) that heartbeat
    windows stay raw before they are folded into runs; ``0`` folds them at once, ``keep`` never
    (every raw window is kept). Default 600."""
    raw = os.environ.get("ETT_RAW_WINDOW_RETENTION_S", "").strip()
    if raw == "":
        return DEFAULT_RAW_WINDOW_RETENTION_S
    if raw.lower() == "keep":
        return None
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(
            f"ETT_RAW_WINDOW_RETENTION_S={raw!r} is not a number of seconds or 'keep'"
        ) from exc
    if not value >= 0 or value == float("inf"):
        raise ConfigError(
            f"ETT_RAW_WINDOW_RETENTION_S must be a finite number >= 0 or 'keep', got {raw!r}"
        )
    return value


DEFAULT_READY_MAX_LAG_S = 300.0
"""How far behind its primary (seconds) a read-only collector's standby may be and stay ready:
past it, dashboards on it would show figures that old as if current."""


def min_free_bytes_from_env() -> int:
    """``ETT_READY_MIN_FREE_BYTES`` (bytes, ``0``: off), else :data:`DEFAULT_MIN_FREE_BYTES`.
    Raises ConfigError with a one-line reason for a value that is not a whole number >= 0."""
    raw = os.environ.get(ENV_MIN_FREE_BYTES, "").strip()
    if not raw:
        return DEFAULT_MIN_FREE_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(
            f"{ENV_MIN_FREE_BYTES}={raw!r}: write a whole number of bytes >= 0 (0: no check)"
        )
    return value


RETENTION_DEFAULTS: dict[str, str] = {
    "ETT_RETAIN_SPANS": "30d",
    "ETT_RETAIN_RUNS": "90d",
    "ETT_RETAIN_FIGURES": "400d",
    "ETT_RETAIN_ALERTS": "400d",
}
"""How long each kind of stored data is kept after its job ended (the alert history: after the
alert resolved); docs/scaling.md, "Retention", says the bytes per job-day they imply."""

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw]?)$", re.ASCII)  # no other script's digits
_DURATION_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_retention(name: str, raw: str) -> float | None:
    """A retention period in seconds from ``raw`` (``30d``, ``12h``, ``90m``, ``2w``, plain
    seconds) or None for ``keep`` (never deleted).

    Raises:
        ConfigError: naming ``name`` when ``raw`` is neither."""
    text = raw.strip().lower()
    if text == "keep":
        return None
    match = _DURATION.match(text)
    if match is None:
        raise ConfigError(
            f"{name}={raw!r} is not a retention period: write a duration such as 30d, 12h, "
            "90m or 2w, or 'keep'"
        )
    if float(match.group(1)) <= 0:
        raise ConfigError(
            f"{name}={raw!r}: a retention period must be longer than 0 (such as 30d), or "
            "'keep' to keep the data for good"
        )
    return float(match.group(1)) * _DURATION_UNIT_S[match.group(2)]


def _period(seconds: float | None) -> str:
    """A retention period as a person writes it: ``keep``, ``90d``, ``36h``, ``90m``, ``45 s``."""
    if seconds is None:
        return "keep"
    for unit, size in (("w", 604800.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and (seconds / size).is_integer():
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g} s"


def retention_from_env() -> dict[str, float | None]:
    """``ETT_RETAIN_SPANS``, ``ETT_RETAIN_RUNS``, ``ETT_RETAIN_FIGURES``, ``ETT_RETAIN_ALERTS``
    as seconds (None: ``keep``), keyed ``spans``, ``runs``, ``figures``, ``alerts``."""
    return {
        name.removeprefix("ETT_RETAIN_").lower(): parse_retention(
            name, os.environ.get(name, "").strip() or default
        )
        for name, default in RETENTION_DEFAULTS.items()
    }


def check_retention(retain: dict[str, float | None], live_refresh_s: float) -> None:
    """Refuse periods shorter than the live refresh, and a shorter period for what a job's
    figures are recomputed from than for the figures: raw spans <= runs <= figures (``keep``
    is the longest).

    Raises:
        ConfigError: saying which setting to change."""
    for key, value in retain.items():
        if value is not None and value < live_refresh_s:
            what = (
                "an alert would go before the evaluator has seen it resolve"
                if key == "alerts"
                else "data would go before its job's figures settle"
            )
            raise ConfigError(
                f"ETT_RETAIN_{key.upper()}={_period(value)} is shorter than ETT_LIVE_REFRESH_S "
                f"({live_refresh_s:g} s): {what}"
            )
    order = ("spans", "runs", "figures")
    for shorter, longer in itertools.pairwise(order):
        a, b = retain.get(shorter), retain.get(longer)
        if b is not None and (a is None or a > b):
            fix = (
                f"set ETT_RETAIN_{longer.upper()} to keep as well"
                if a is None
                else f"set ETT_RETAIN_{longer.upper()} to {_period(a)} or more"
            )
            raise ConfigError(
                f"ETT_RETAIN_{longer.upper()}={_period(b)} is shorter than "
                f"ETT_RETAIN_{shorter.upper()}={_period(a)} (defaults: "
                f"{', '.join(f'{k}={v}' for k, v in RETENTION_DEFAULTS.items())}): a job's "
                f"figures are recomputed from its raw spans and runs, so they must be kept "
                f"at least as long; {fix}"
            )


def ett_home() -> Path:
    """The data folder: ``ETT_HOME``, default ``~/.local/share/ett``."""
    return Path(os.environ.get("ETT_HOME") or Path.home() / ".local" / "share" / "ett")


def _credentials(url: str) -> tuple[str, str, str, str] | None:
    """``(scheme, user, password, rest)`` of a URL with a password, its user part taken to end
    at the *last* ``@`` (so a password holding an unencoded ``@`` is all of it); None without
    one."""
    scheme, sep, tail = url.partition("://")
    at = tail.rfind("@")
    if not sep or at == -1 or ":" not in tail[:at]:
        return None
    user, password = tail[:at].split(":", 1)
    return scheme, user, password, tail[at:]


_PASSWORD_PARAM = re.compile(r"""(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s#]*)""", re.IGNORECASE)
"""A ``password=`` in a URL's query (``?password=...&``) or a keyword string (``host=h
password='p w'``), quoted or not: libpq and psycopg take it from either."""


def redact_url(text: str) -> str:
    """``text``, a database URL whether it parses or not, with its password shown as ``***``
    (``scheme://user:***@host...``; a query's or a keyword string's ``password=***``); a
    password holding an unencoded ``@`` is hidden whole (a query holding an ``@`` hides the
    host too: never the other way round)."""
    parts = _credentials(text)
    if parts is not None:
        scheme, user, _, rest = parts
        text = f"{scheme}://{user}:***{rest}"
    return _PASSWORD_PARAM.sub(lambda m: m[1] + "***", text)


def scrub_password(message: str, url: str) -> str:
    """``message`` (a driver's or parser's error about ``url``) without the passwords of ``url``
    (its user part's, its query's or keyword string's ``password=``, and their URL-decoded
    forms) or any piece of one between ``@ : / ? #`` of two characters or more."""
    parts = _credentials(url)
    passwords = [] if parts is None else [parts[2]]
    for m in _PASSWORD_PARAM.finditer(url):
        value = m[2]
        passwords += [value, value.strip("'"), urllib.parse.unquote_plus(value)]
    pieces = [p for password in passwords for p in (password, *re.split(r"[@:/?#]", password))]
    for piece in sorted({p for p in pieces if len(p) >= 2}, key=len, reverse=True):
        message = message.replace(piece, "***")
    return _PASSWORD_PARAM.sub(lambda m: m[1] + "***", message)


def default_db_url() -> str:
    """``ETT_DB_URL``, else the embedded SQLite file ``$ETT_HOME/collector.db``."""
    env = os.environ.get("ETT_DB_URL")
    if env:
        return env
    return f"sqlite:///{ett_home() / 'collector.db'}"


def _number_env(
    name: str, default: float, *, strip: bool, what: str, ok: Callable[[float], bool], rule: str
) -> float:
    """A number from ``name`` (``default`` when unset or empty, after ``strip``): refused,
    naming the variable, when it is not ``what`` or ``ok`` says no (``must be {rule}``)."""
    raw = os.environ.get(name, "")
    if strip:
        raw = raw.strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not {what}") from exc
    if not ok(value):
        raise ConfigError(f"{name} must be {rule}, got {raw!r}")
    return value


def _float_env(name: str, default: float) -> float:
    """A positive, finite number from ``name`` (``default`` when unset): ``nan`` passed a test
    of ``not v <= 0`` (``ETT_WINDOW_S=nan`` made retention prune nothing, silently), and ``inf``
    is no length of time or size."""
    return _number_env(
        name,
        default,
        strip=False,
        what="a number",
        ok=lambda v: 0 < v < math.inf,
        rule="a positive, finite number",
    )


_ON, _OFF = frozenset({"1", "true", "yes", "on"}), frozenset({"", "0", "false", "no", "off"})


def _switch_env(name: str) -> bool:
    """A yes/no setting from ``name``: ``1``/``true``/``yes``/``on`` or, unset,
    ``0``/``false``/``no``/``off``; anything else is refused, naming the variable."""
    raw = os.environ.get(name, "").strip().lower()
    if raw not in _ON | _OFF:
        raise ConfigError(f"{name} must be 1 or 0 (true or false), got {os.environ[name]!r}")
    return raw in _ON


def window_s_from_env() -> float:
    """``ETT_WINDOW_S``, the train window length (the emitter's default when unset): the
    collector's and ``ett simulate``'s one reading of it.

    Raises:
        ConfigError: when it is not a positive number.
    """
    return _float_env("ETT_WINDOW_S", semconv.DEFAULT_WINDOW_S)


def _seconds_env(name: str, default: float) -> float:
    """A finite number of seconds, 0 or more, from ``name`` (``default`` when unset)."""
    return _number_env(
        name,
        default,
        strip=True,
        what="a number of seconds",
        ok=lambda v: 0 <= v < float("inf"),
        rule="a finite number >= 0",
    )


def _count_env(name: str, default: int) -> int:
    """A whole number of 0 or more from ``name`` (``default`` when unset)."""
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    if not raw.isdigit():
        raise ConfigError(f"{name}={raw!r} is not a whole number of 0 or more")
    return int(raw)


@dataclass(frozen=True)
class Settings:
    """Everything ``ett serve`` needs. Environment: ``ETT_DB_URL``, ``ETT_HOME``, ``ETT_TOKEN``
    (one token for everything), the scoped tokens and TLS files of :mod:`.security`,
    ``ETT_MAX_BODY_BYTES``, ``ETT_MAX_INFLIGHT_BYTES`` (decoded bytes of trace requests being
    ingested at once, per server process; past it a request is answered 429 with
    ``Retry-After``), ``ETT_WINDOW_S`` (train window length, default the emitter's
    ``semconv.DEFAULT_WINDOW_S``; ``semconv.PRESUMED_DEAD_WINDOWS`` silent windows presume an
    attempt dead), ``ETT_LIVE_REFRESH_S`` (how often live jobs are recomputed), ``ETT_READ_WAIT_S``
    (how long a read of a job with spans but no figures yet waits for its first figures, and
    ``ett report`` for fresh ones; :data:`DEFAULT_READ_WAIT_S`),
    ``ETT_READ_THREADS`` (:data:`DEFAULT_READ_THREADS`),
    ``ETT_READ_CACHE`` (:data:`DEFAULT_READ_CACHE_JOBS`; 0 turns the cache off),
    ``ETT_READ_RECHECK_S`` (:data:`DEFAULT_READ_RECHECK_S`; 0 checks on every read),
    ``ETT_KEEP_ALIVE_S`` (how long an idle HTTP keep-alive connection stays open),
    ``ETT_HEADER_TIMEOUT_S`` (:data:`DEFAULT_HEADER_TIMEOUT_S`),
    ``ETT_BODY_TIMEOUT_S`` (:data:`DEFAULT_BODY_TIMEOUT_S`),
    ``ETT_SEND_TIMEOUT_S`` (:data:`DEFAULT_SEND_TIMEOUT_S`),
    ``ETT_MAX_CLOCK_AHEAD_S`` (:data:`DEFAULT_MAX_CLOCK_AHEAD_S`),
    ``ETT_RAW_WINDOW_RETENTION_S`` (:func:`raw_window_retention_s`), ``ETT_RETAIN_SPANS``,
    ``ETT_RETAIN_RUNS``, ``ETT_RETAIN_FIGURES``, ``ETT_RETAIN_ALERTS``
    (:data:`RETENTION_DEFAULTS`, :func:`retention_from_env`), ``ETT_READY_MIN_FREE_BYTES``
    (:func:`min_free_bytes_from_env`), ``ETT_PRUNE_ON_LOW_DISK``; ``ETT_HOST`` and ``ETT_PORT``
    only in worker processes (:meth:`for_worker`)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    db_url: str = field(default_factory=default_db_url)
    token: str | None = field(
        default_factory=lambda: os.environ.get("ETT_TOKEN") or None, repr=False
    )
    """``ETT_TOKEN`` (``--token``), white space around it stripped, as the library strips it
    (the trailing newline of an env file or a mounted secret is no part of the token)."""
    max_body_bytes: int = field(
        default_factory=lambda: int(_float_env("ETT_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))
    )
    max_inflight_bytes: int = field(
        default_factory=lambda: int(
            _float_env("ETT_MAX_INFLIGHT_BYTES", DEFAULT_MAX_INFLIGHT_BYTES)
        )
    )
    window_s: float = field(default_factory=window_s_from_env)
    live_refresh_s: float = field(default_factory=lambda: _float_env("ETT_LIVE_REFRESH_S", 5.0))
    read_wait_s: float = field(
        default_factory=lambda: _float_env("ETT_READ_WAIT_S", DEFAULT_READ_WAIT_S)
    )
    read_threads: int = field(
        default_factory=lambda: int(_float_env("ETT_READ_THREADS", DEFAULT_READ_THREADS))
    )
    read_cache_jobs: int = field(
        default_factory=lambda: _count_env("ETT_READ_CACHE", DEFAULT_READ_CACHE_JOBS)
    )
    read_recheck_s: float = field(
        default_factory=lambda: _seconds_env("ETT_READ_RECHECK_S", DEFAULT_READ_RECHECK_S)
    )
    raw_window_retention_s: float | None = field(default_factory=raw_window_retention_s)
    keep_alive_s: float = field(
        default_factory=lambda: _float_env("ETT_KEEP_ALIVE_S", DEFAULT_KEEP_ALIVE_S)
    )
    header_timeout_s: float = field(
        default_factory=lambda: _float_env("ETT_HEADER_TIMEOUT_S", DEFAULT_HEADER_TIMEOUT_S)
    )
    """How long a request's head may take to arrive (:data:`DEFAULT_HEADER_TIMEOUT_S`)."""
    body_timeout_s: float = field(
        default_factory=lambda: _float_env("ETT_BODY_TIMEOUT_S", DEFAULT_BODY_TIMEOUT_S)
    )
    send_timeout_s: float = field(
        default_factory=lambda: _float_env("ETT_SEND_TIMEOUT_S", DEFAULT_SEND_TIMEOUT_S)
    )
    """How long an answer may wait on a client that reads none of it
    (:data:`DEFAULT_SEND_TIMEOUT_S`)."""
    """How long a trace request's body may take to arrive (:data:`DEFAULT_BODY_TIMEOUT_S`)."""
    max_clock_ahead_s: float = field(
        default_factory=lambda: _float_env("ETT_MAX_CLOCK_AHEAD_S", DEFAULT_MAX_CLOCK_AHEAD_S)
    )
    """How far past the collector's clock a span may end (:data:`DEFAULT_MAX_CLOCK_AHEAD_S`)."""
    read_only: bool = field(default_factory=lambda: _switch_env("ETT_READ_ONLY"))
    ready_max_lag_s: float = field(
        default_factory=lambda: _seconds_env("ETT_READY_MAX_LAG_S", DEFAULT_READY_MAX_LAG_S)
    )
    """``ETT_READY_MAX_LAG_S``: a read-only collector whose standby is further behind its
    primary than this (or not streaming with no way to say how far) answers ``/readyz`` 503
    (:data:`DEFAULT_READY_MAX_LAG_S`; 0: never for the lag)."""
    """``ett serve --read-only`` (``ETT_READ_ONLY=1``): serve reads from a hot standby, refuse
    ingest, run no background loop (they write)."""
    retain: dict[str, float | None] = field(default_factory=retention_from_env)
    """Retention periods in seconds (None: keep), :func:`retention_from_env`."""
    auth: AuthSettings = field(default_factory=_auth_from_env)
    """Scoped tokens and the wrong-token ban (``ETT_WRITE_TOKENS``... :mod:`.security`)."""
    tls: TlsSettings = field(default_factory=TlsSettings.from_env)
    """HTTPS (``ETT_TLS_CERT``, ``ETT_TLS_KEY``, ``ETT_TLS_CLIENT_CA``; :mod:`.security`)."""
    min_free_bytes: int = field(default_factory=min_free_bytes_from_env)
    """Free bytes below which the SQLite database is not ready (0: no check)."""
    prune_on_low_disk: bool = field(default_factory=lambda: _switch_env("ETT_PRUNE_ON_LOW_DISK"))
    """``ETT_PRUNE_ON_LOW_DISK=1`` (off by default): while the SQLite database's disk is short
    of space, prune ended jobs' raw spans, then their runs, oldest first, past the retention
    periods, until it is not (``write/_disk_prune.py``); figures stay."""
    alerts: AlertSettings | None = None
    """The alert evaluator's settings (``ett serve --alert-*``); None: from the ``ETT_ALERT_*``
    variables when the app is built (:class:`ett_collector.alerts.settings.AlertSettings`)."""

    @classmethod
    def for_worker(cls) -> Settings:
        """A worker process's settings: what ``ett serve --workers N`` handed over in the
        environment (``ETT_HOST``, ``ETT_PORT`` and every variable above)."""
        from .alerts.settings import AlertSettings

        return cls(
            host=os.environ.get("ETT_HOST", "127.0.0.1"),
            port=int(os.environ.get("ETT_PORT", "4318")),
            alerts=AlertSettings.from_env(),
        )

    def __post_init__(self) -> None:
        if self.token is not None and self.token != self.token.strip():
            if not self.token.strip():
                raise ConfigError(
                    "ETT_TOKEN (--token) is only white space: give the token, or unset it for "
                    "no token"
                )
            object.__setattr__(self, "token", self.token.strip())
        if not 0 < self.port < 65536:
            raise ConfigError(f"port must be in 1..65535, got {self.port}")
        if not self.db_url.startswith(("sqlite", "postgres")):  # postgres:// as libpq spells it
            raise ConfigError(
                f"unsupported database URL {redact_url(self.db_url)!r}: use sqlite:///PATH or "
                "postgresql+psycopg://USER@HOST:PORT/DB"
            )
        if self.read_threads < 1:
            raise ConfigError(f"ETT_READ_THREADS must be at least 1, got {self.read_threads}")
        if self.read_cache_jobs < 0:
            raise ConfigError(f"ETT_READ_CACHE must be 0 or more, got {self.read_cache_jobs}")
        if not 0 <= self.read_recheck_s < float("inf"):
            raise ConfigError(
                f"ETT_READ_RECHECK_S must be a finite number >= 0, got {self.read_recheck_s}"
            )
        for name, seconds in (
            ("ETT_HEADER_TIMEOUT_S", self.header_timeout_s),
            ("ETT_BODY_TIMEOUT_S", self.body_timeout_s),
            ("ETT_SEND_TIMEOUT_S", self.send_timeout_s),
        ):
            if not 0 < seconds < float("inf"):
                raise ConfigError(
                    f"{name} must be a finite number of seconds above 0, got {seconds}"
                )
        if not 0 <= self.max_clock_ahead_s < float("inf"):
            raise ConfigError(
                "ETT_MAX_CLOCK_AHEAD_S must be a finite number of seconds >= 0, got "
                f"{self.max_clock_ahead_s}"
            )
        check_retention(self.retain, self.live_refresh_s)
        try:
            self.auth.check()
            self.tls.check()
        except SecurityConfigError as exc:
            raise ConfigError(str(exc)) from None
        if self.max_body_bytes < 1024:
            raise ConfigError("ETT_MAX_BODY_BYTES must be at least 1024")
        if self.max_inflight_bytes < self.max_body_bytes:
            raise ConfigError(
                f"ETT_MAX_INFLIGHT_BYTES ({self.max_inflight_bytes}) must be at least "
                f"ETT_MAX_BODY_BYTES ({self.max_body_bytes})"
            )
