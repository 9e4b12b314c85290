"""``ETT_RETAIN_*``: durations or ``keep``; a bad one, or one that would delete data before its
job's figures settle, stops the service at start with one line."""

from __future__ import annotations

import pytest

from ett_cli import main
from ett_collector.settings import (
    RETENTION_DEFAULTS,
    ConfigError,
    Settings,
    parse_retention,
    retention_from_env,
)

NAMES = tuple(RETENTION_DEFAULTS)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("30d", 30 * 86400.0),
        ("12h", 43200.0),
        ("90m", 5400.0),
        ("2w", 14 * 86400.0),
        ("45s", 45.0),
        ("600", 600.0),
        ("1.5d", 1.5 * 86400),
        (" KEEP ", None),
        ("keep", None),
    ],
)
def test_durations(raw: str, want: float | None) -> None:
    assert parse_retention("ETT_RETAIN_SPANS", raw) == want


def test_defaults_fit_a_year() -> None:
    retain = Settings().retain
    assert retain == {
        "spans": 30 * 86400.0,
        "runs": 90 * 86400.0,
        "figures": 400 * 86400.0,
        "alerts": 400 * 86400.0,
    }
    assert retain["figures"] is not None and retain["figures"] >= 365 * 86400


@pytest.mark.parametrize(
    "raw", ["forever", "-1d", "30 days", "d", "1y", "inf", "nan", "\u0663\u0660d", "\uff13\uff10d"]
)
def test_bad_values_stop_the_service(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("ETT_RETAIN_RUNS", raw)
    with pytest.raises(ConfigError, match=r"ETT_RETAIN_RUNS=.*not a retention period.*keep"):
        retention_from_env()


@pytest.mark.parametrize("raw", ["0", "0d", "0.0h"])
def test_a_period_of_zero_is_refused_as_such(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("ETT_RETAIN_SPANS", raw)
    with pytest.raises(ConfigError, match=r"ETT_RETAIN_SPANS=.*must be longer than 0.*'keep'"):
        retention_from_env()


def test_shorter_than_the_live_refresh_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ETT_RETAIN_ALERTS", "3s")
    with pytest.raises(ConfigError, match=r"ETT_RETAIN_ALERTS=3 s is .*resolve"):
        Settings()
    monkeypatch.delenv("ETT_RETAIN_ALERTS")
    monkeypatch.setenv("ETT_RETAIN_SPANS", "4s")
    with pytest.raises(
        ConfigError, match=r"ETT_RETAIN_SPANS=4 s is shorter than ETT_LIVE_REFRESH_S"
    ):
        Settings()
    monkeypatch.setenv("ETT_LIVE_REFRESH_S", "2")
    assert Settings().retain["spans"] == 4.0


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        (
            {"ETT_RETAIN_SPANS": "100d"},
            "ETT_RETAIN_RUNS=90d is shorter than ETT_RETAIN_SPANS=100d .*"
            "set ETT_RETAIN_RUNS to 100d or more$",
        ),
        (
            {"ETT_RETAIN_SPANS": "keep"},
            "ETT_RETAIN_RUNS=90d is shorter than ETT_RETAIN_SPANS=keep .*"
            "set ETT_RETAIN_RUNS to keep as well$",
        ),
        (
            {"ETT_RETAIN_RUNS": "36h", "ETT_RETAIN_SPANS": "2d"},
            "ETT_RETAIN_RUNS=36h is shorter than ETT_RETAIN_SPANS=2d",
        ),
        (
            {"ETT_RETAIN_RUNS": "500d"},
            "ETT_RETAIN_FIGURES=400d is shorter than ETT_RETAIN_RUNS=500d .*"
            "ETT_RETAIN_SPANS=30d, ETT_RETAIN_RUNS=90d",
        ),
    ],
)
def test_figures_outlive_what_they_are_computed_from(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], needle: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=needle):
        Settings()


def test_everything_kept_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NAMES:
        monkeypatch.setenv(name, "keep")
    assert set(Settings().retain.values()) == {None}


def test_ett_serve_says_it_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory, capsys
) -> None:
    monkeypatch.setenv("ETT_RETAIN_FIGURES", "a year")
    db = f"sqlite:///{tmp_path}/never.db"
    assert main(["serve", "--port", "1", "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ETT_RETAIN_FIGURES='a year'" in err
    assert "Traceback" not in err
