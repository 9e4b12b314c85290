"""``ett serve``'s alert options become settings once, without a trip through the environment;
worker processes get them back from the variables the serve command hands over."""

from __future__ import annotations

import argparse
import os
import re

import pytest

from ett_cli import CliError
from ett_collector.alerts.commands import _serve_with_alerts
from ett_collector.alerts.settings import AlertConfigError, AlertSettings
from ett_collector.commands import _serve_security
from ett_collector.security import Scope
from ett_collector.settings import Settings

ALERT_VARIABLES = (
    "ETT_ALERT_RULES",
    "ETT_ALERT_INTERVAL_S",
    "ETT_ALERTMANAGER_URL",
    "ETT_DASHBOARD_URL",
    "ETT_METRICS_CACHE_S",
    "ETT_METRICS_MAX_PAIRS",
)


@pytest.fixture(autouse=True)
def _no_alert_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ALERT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _args(**alert_options: str | None) -> argparse.Namespace:
    options = {"alert_rules": None, "alert_interval": None, "alertmanager": None}
    options |= {"dashboard_url": None, **alert_options}
    security = {f"{s.value}_tokens": None for s in Scope}
    return argparse.Namespace(
        **options, **security, tls_cert=None, tls_key=None, tls_client_ca=None
    )


def _served(args: argparse.Namespace) -> AlertSettings:
    seen: list[AlertSettings] = []
    _serve_with_alerts(lambda a: seen.append(a.alert_settings) or 0)(args)
    return seen[0]


def test_the_options_become_settings_and_the_environment_stays_as_it_was() -> None:
    alerts = _served(_args(alert_interval="2m", alertmanager="http://am:9093"))
    assert (alerts.interval_s, alerts.alertmanager_url) == (120.0, "http://am:9093")
    assert not any(name in os.environ for name in ALERT_VARIABLES)


def test_an_option_is_laid_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ETT_ALERT_INTERVAL_S", "oops")  # the option replaces it
    monkeypatch.setenv("ETT_DASHBOARD_URL", "https://dash:8501")
    alerts = _served(_args(alert_interval="10s"))
    assert (alerts.interval_s, alerts.dashboard_url) == (10.0, "https://dash:8501")


def test_a_bad_option_is_refused_in_the_flags_words(monkeypatch: pytest.MonkeyPatch) -> None:
    # the flag as typed: it said "alert rules: ETT_ALERT_INTERVAL_S ... got '0.0'"
    with pytest.raises(CliError, match=r"^alerts: --alert-interval must be a positive, finite "):
        _served(_args(alert_interval="0s"))
    with pytest.raises(CliError, match=r"--alert-interval must be at least 1 s, got '1ms'"):
        _served(_args(alert_interval="1ms"))
    # taken, it evaluated once and then never again, without a word
    with pytest.raises(CliError, match=r"--alert-interval must be at most 3600 s \(1h"):
        _served(_args(alert_interval="100000d"))
    assert _served(_args(alert_interval="1h")).interval_s == 3600.0
    with pytest.raises(CliError, match="the alertmanager URL must start with http"):
        _served(_args(alertmanager="am:9093"))
    with pytest.raises(AlertConfigError, match="ETT_METRICS_CACHE_S='x' is not a number"):
        AlertSettings.from_env({"ETT_METRICS_CACHE_S": "x"})
    monkeypatch.setenv("ETT_ALERT_INTERVAL_S", "0")  # a variable stays in the variable's words
    with pytest.raises(CliError, match="ETT_ALERT_INTERVAL_S must be a positive"):
        _served(_args())


def test_workers_get_the_same_settings_back(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _args(alert_interval="45s", alertmanager="http://am:9093")
    args.alert_settings = _served(args)
    settings = _serve_security.apply(args, Settings(db_url="sqlite:///x.db"))
    assert settings.alerts == args.alert_settings
    handed = _serve_security.worker_environment(settings)
    for name, value in {**handed, "ETT_DB_URL": "sqlite:///x.db", "ETT_PORT": "4999"}.items():
        monkeypatch.setenv(name, value)
    worker = Settings.for_worker()
    assert worker.alerts == settings.alerts and worker.port == 4999


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://", "needs a host"),
        ("http://127.0.0.1:99999", "has no valid port (1-65535)"),
        ("http://am:0", "needs a port in 1-65535"),
        ("http://exa mple:1", "needs no spaces"),
        # it started and posted to /api/v2/alerts/api/v2/alerts, 404 forever
        ("http://am:9093/api/v2/alerts", "base URL, without '/api/v2/alerts'"),
        ("http://am:9093/api/v2/", "base URL, without '/api/v2'"),
    ],
)
def test_a_bad_alertmanager_url_is_refused_at_start(url: str, message: str) -> None:
    with pytest.raises(AlertConfigError, match=re.escape(message)):
        AlertSettings(alertmanager_url=url)


@pytest.mark.parametrize("url", ["http://am:9093", "https://am.example.com/", "http://[::1]:9093"])
def test_a_good_alertmanager_url_is_taken(url: str) -> None:
    assert AlertSettings(alertmanager_url=url).alertmanager_url == url
