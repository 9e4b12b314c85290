"""Alerts on ETT regressions: the rule model, fleet metrics for Prometheus, the built-in
evaluator with its SQL state and Alertmanager delivery, backtests and the Prometheus export.

The rule definitions (:mod:`ett_collector.alerts.rules`) are the one model every consumer reads:
the evaluator, the backtest, ``export-prometheus`` and the Grafana alert builder.
"""

from ._backtest import Firing, backtest, replay
from ._conditions import Finding, evaluate
from ._fleet import Fleet, JobFacts, facts_from_summary, load_facts
from ._metrics import SERIES_PER_PAIR, FleetMetrics
from ._service import DEFAULT_DASHBOARD_URL, DEFAULT_INTERVAL_S, AlertService
from ._state import Alert, AlertState, advance
from ._store import AlertStore
from .prometheus import rules_file
from .rules import Kind, Rule, RulesError, RuleSet, load_rules

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
