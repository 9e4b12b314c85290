"""The alerts' configuration in one place: typed, from ``ETT_*`` environment variables.

``ett serve --alert-rules FILE --alert-interval 30s --alertmanager URL --dashboard-url URL``
lays its flags over these variables, in the collector's one ``Settings`` (``alerts``); worker
processes get them back through the environment.

- ``ETT_ALERT_RULES``: a rules file overriding the defaults (``default_rules.yml``);
- ``ETT_ALERT_INTERVAL_S``: seconds between evaluations (default 30);
- ``ETT_ALERTMANAGER_URL``: Alertmanager's base URL (alerts go to ``/api/v2/alerts``; unset: none
  are sent);
- ``ETT_DASHBOARD_URL``: the dashboard's base URL, for the links in alerts (default
  ``http://127.0.0.1:8501``; a job's page is ``{url}/job?job=ID``);
- ``ETT_METRICS_CACHE_S``: how long a scrape's fleet metrics are reused (default 5);
- ``ETT_METRICS_MAX_PAIRS``: the most (model, team) pairs, and models, that ``/metrics`` labels
  (default 200); the rest are summed into one ``model="__other__"`` pair.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ._service import DEFAULT_DASHBOARD_URL, DEFAULT_INTERVAL_S
from .rules import RulesError, RuleSet, load_rules


class AlertConfigError(ValueError):
    """Bad alert configuration: the service refuses to start and says why."""


RULES, INTERVAL = "ETT_ALERT_RULES", "ETT_ALERT_INTERVAL_S"
ALERTMANAGER, DASHBOARD = "ETT_ALERTMANAGER_URL", "ETT_DASHBOARD_URL"
METRICS_CACHE, MAX_PAIRS = "ETT_METRICS_CACHE_S", "ETT_METRICS_MAX_PAIRS"
MIN_INTERVAL_S = 1.0
"""The shortest time between two evaluations (``--alert-interval 1ms`` ran them back to back)."""
MAX_INTERVAL_S = 3600.0
"""The longest: the rules' shortest window (1h). ``--alert-interval 100000d`` was taken, and
after the first evaluation alerting was off without a word."""
DEFAULT_METRICS_CACHE_S = 5.0
DEFAULT_MAX_PAIRS = 200
"""The most (model, team) pairs ``/metrics`` labels: 173 series a pair (``SERIES_PER_PAIR``),
so at most 34,600 fleet series, whatever the model and team names the emitters send."""


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise AlertConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if not 0 < value < math.inf:
        raise AlertConfigError(f"{name} must be a positive, finite number of seconds, got {raw!r}")
    return value


def _check_url(name: str, url: str) -> None:
    """An http(s) URL with a host and, if given, a port in 1..65535; else
    :class:`AlertConfigError` naming ``name`` (``http://127.0.0.1:99999`` started and then
    logged "Connection refused" at every delivery)."""
    if not url.startswith(("http://", "https://")):
        raise AlertConfigError(f"the {name} URL must start with http:// or https://: {url!r}")
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise AlertConfigError(f"the {name} URL has no valid port (1-65535): {url!r}") from None
    host = parts.hostname or ""
    if not host or any(c.isspace() for c in url) or port == 0:
        what = "a host" if not host else "no spaces" if port != 0 else "a port in 1-65535"
        raise AlertConfigError(f"the {name} URL needs {what}: {url!r}")


def _pairs(env: Mapping[str, str]) -> int:
    raw = (env.get(MAX_PAIRS) or "").strip()
    if not raw:
        return DEFAULT_MAX_PAIRS
    if not raw.isdigit() or int(raw) < 1:
        raise AlertConfigError(f"{MAX_PAIRS} must be a whole number of 1 or more, got {raw!r}")
    return int(raw)


@dataclass(frozen=True)
class AlertSettings:
    """Everything the evaluator and the fleet metrics need (:meth:`from_env` reads the
    variables; ``ett serve`` lays its options over them)."""

    rules_path: str | None = None
    interval_s: float = DEFAULT_INTERVAL_S
    alertmanager_url: str | None = None
    dashboard_url: str = DEFAULT_DASHBOARD_URL
    metrics_cache_s: float = DEFAULT_METRICS_CACHE_S
    metrics_max_pairs: int = DEFAULT_MAX_PAIRS

    def __post_init__(self) -> None:
        for name, url in (
            ("alertmanager", self.alertmanager_url),
            ("dashboard", self.dashboard_url),
        ):
            if url is not None:
                _check_url(name, url)
        path = urlsplit(self.alertmanager_url or "").path.rstrip("/")
        if path.endswith(("/api/v2/alerts", "/api/v1/alerts", "/api/v2", "/api/v1")):
            base = self.alertmanager_url.rsplit(path, 1)[0] if self.alertmanager_url else ""
            raise AlertConfigError(
                f"the alertmanager URL is Alertmanager's base URL, without {path!r} (alerts "
                f"go to its /api/v2/alerts): {base or self.alertmanager_url!r}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> AlertSettings:
        """From the ``ETT_ALERT_*`` variables of ``env`` (unset or empty: the defaults).

        Raises:
            AlertConfigError: naming the variable.
        """
        interval_s = _seconds(env, INTERVAL, DEFAULT_INTERVAL_S)
        if interval_s < MIN_INTERVAL_S:
            raise AlertConfigError(
                f"{INTERVAL} must be at least {MIN_INTERVAL_S:g} s, got {env[INTERVAL]!r}: each "
                "evaluation reads every job of the rules' windows"
            )
        if interval_s > MAX_INTERVAL_S:
            raise AlertConfigError(
                f"{INTERVAL} must be at most {MAX_INTERVAL_S:g} s (1h, the rules' shortest "
                f"window), got {env[INTERVAL]!r}: evaluated less often, an alert comes that much "
                "late, and a page may never come"
            )
        return cls(
            rules_path=env.get(RULES) or None,
            interval_s=interval_s,
            alertmanager_url=env.get(ALERTMANAGER) or None,
            dashboard_url=env.get(DASHBOARD) or DEFAULT_DASHBOARD_URL,
            metrics_cache_s=_seconds(env, METRICS_CACHE, DEFAULT_METRICS_CACHE_S),
            metrics_max_pairs=_pairs(env),
        )

    def environment(self) -> dict[str, str]:
        """The variables that give a worker process these settings (``ett serve --workers``)."""
        env = {INTERVAL: repr(self.interval_s), DASHBOARD: self.dashboard_url}
        env[METRICS_CACHE] = repr(self.metrics_cache_s)
        env[MAX_PAIRS] = str(self.metrics_max_pairs)
        if self.rules_path is not None:
            env[RULES] = self.rules_path
        if self.alertmanager_url is not None:
            env[ALERTMANAGER] = self.alertmanager_url
        return env

    def load(self) -> RuleSet:
        """The rules in force.

        Raises:
            RulesError: naming the file, the rule and the field.
        """
        return load_rules(self.rules_path)


__all__ = ["AlertConfigError", "AlertSettings", "RulesError"]
