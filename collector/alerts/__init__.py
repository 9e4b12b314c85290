"""Alerts on ETT regressions: the rule model, fleet metrics for Prometheus, the built-in
evaluator with its SQL state and Alertmanager delivery, backtests and the Prometheus export.

The rule definitions (:mod:`ett_collector.alerts.rules`) are the one model every consumer reads:
the evaluator, the backtest, ``export-prometheus`` and the Grafana alert builder. The names
below load on first use, so that importing the pure rules (as Grafana's builder does) loads no
storage, SQL or HTTP code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backtest import Firing, backtest, replay
    from ._conditions import Finding, evaluate
    from ._fleet import Fleet, JobFacts, facts_from_summary
    from ._metrics import SERIES_PER_PAIR, FleetMetrics
    from ._reads import load_facts
    from ._service import DEFAULT_DASHBOARD_URL, DEFAULT_INTERVAL_S, AlertService
    from ._state import Alert, AlertState, advance
    from ._store import AlertStore
    from .prometheus import rules_file
    from .rules import Kind, Rule, RulesError, RuleSet, load_rules

_HOMES = {
    "._backtest": ("Firing", "backtest", "replay"),
    "._conditions": ("Finding", "evaluate"),
    "._fleet": ("Fleet", "JobFacts", "facts_from_summary"),
    "._metrics": ("SERIES_PER_PAIR", "FleetMetrics"),
    "._reads": ("load_facts",),
    "._service": ("DEFAULT_DASHBOARD_URL", "DEFAULT_INTERVAL_S", "AlertService"),
    "._state": ("Alert", "AlertState", "advance"),
    "._store": ("AlertStore",),
    ".prometheus": ("rules_file",),
    ".rules": ("Kind", "Rule", "RulesError", "RuleSet", "load_rules"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    """The exported ``name``, imported from its module on first use."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_DASHBOARD_URL",
    "DEFAULT_INTERVAL_S",
    "SERIES_PER_PAIR",
    "Alert",
    "AlertService",
    "AlertState",
    "AlertStore",
    "Finding",
    "Firing",
    "Fleet",
    "FleetMetrics",
    "JobFacts",
    "Kind",
    "Rule",
    "RuleSet",
    "RulesError",
    "advance",
    "backtest",
    "evaluate",
    "facts_from_summary",
    "load_facts",
    "load_rules",
    "replay",
    "rules_file",
]
