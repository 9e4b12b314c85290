"""The alerts' configuration in one place: typed, from ``ETT_*`` environment variables.

``ett serve --alert-rules FILE --alert-interval 30s --alertmanager URL --dashboard-url URL``
puts its flags into these variables before the server (or its worker processes) start.

- ``ETT_ALERT_RULES``: a rules file overriding the defaults (``default_rules.yml``);
- ``ETT_ALERT_INTERVAL_S``: seconds between evaluations (default 30);
- ``ETT_ALERTMANAGER_URL``: Alertmanager's base URL (alerts go to ``/api/v2/alerts``; unset: none
  are sent);
- ``ETT_DASHBOARD_URL``: the dashboard's base URL, for the links in alerts (default
  ``http://127.0.0.1:8501``; a job's page is ``{url}/job?job=ID``);
- ``ETT_METRICS_CACHE_S``: how long a scrape's fleet metrics are reused (default 5).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ._service import DEFAULT_DASHBOARD_URL, DEFAULT_INTERVAL_S
from .rules import RulesError, RuleSet, load_rules


class AlertConfigError(ValueError):
    """Bad alert configuration: the service refuses to start and says why."""


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise AlertConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise AlertConfigError(f"{name} must be positive, got {raw!r}")
    return value


@dataclass(frozen=True)
class AlertSettings:
    """Everything the evaluator and the fleet metrics need."""

    rules_path: str | None = field(
        default_factory=lambda: os.environ.get("ETT_ALERT_RULES") or None
    )
    interval_s: float = field(
        default_factory=lambda: _seconds("ETT_ALERT_INTERVAL_S", DEFAULT_INTERVAL_S)
    )
    alertmanager_url: str | None = field(
        default_factory=lambda: os.environ.get("ETT_ALERTMANAGER_URL") or None
    )
    dashboard_url: str = field(
        default_factory=lambda: os.environ.get("ETT_DASHBOARD_URL") or DEFAULT_DASHBOARD_URL
    )
    metrics_cache_s: float = field(default_factory=lambda: _seconds("ETT_METRICS_CACHE_S", 5.0))

    def __post_init__(self) -> None:
        for name, url in (
            ("alertmanager", self.alertmanager_url),
            ("dashboard", self.dashboard_url),
        ):
            if url is not None and not url.startswith(("http://", "https://")):
                raise AlertConfigError(
                    f"the {name} URL must start with http:// or https://: {url!r}"
                )

    def load(self) -> RuleSet:
        """The rules in force.

        Raises:
            RulesError: naming the file, the rule and the field.
        """
        return load_rules(self.rules_path)


__all__ = ["AlertConfigError", "AlertSettings", "RulesError"]
