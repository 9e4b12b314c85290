"""The read settings of ``ett serve``: ETT_READ_WAIT_S, ETT_READ_THREADS and ETT_READ_CACHE."""

from __future__ import annotations

import pytest

from ett_collector.settings import (
    DEFAULT_READ_CACHE_JOBS,
    DEFAULT_READ_RECHECK_S,
    DEFAULT_READ_THREADS,
    DEFAULT_READ_WAIT_S,
    ConfigError,
    Settings,
)


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ETT_READ_THREADS", raising=False)
    monkeypatch.delenv("ETT_READ_WAIT_S", raising=False)
    plain = Settings(db_url="sqlite:///x.db")
    assert (plain.read_threads, plain.read_wait_s) == (DEFAULT_READ_THREADS, DEFAULT_READ_WAIT_S)
    monkeypatch.setenv("ETT_READ_THREADS", "3")
    monkeypatch.setenv("ETT_READ_WAIT_S", "0.5")
    given = Settings(db_url="sqlite:///x.db")
    assert (given.read_threads, given.read_wait_s) == (3, 0.5)


@pytest.mark.parametrize("raw", ["0", "-2", "many", "0.5"])
def test_read_threads_must_be_a_positive_count(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("ETT_READ_THREADS", raw)
    with pytest.raises(ConfigError, match="ETT_READ_THREADS"):
        Settings(db_url="sqlite:///x.db")


def test_read_cache_is_a_count_of_jobs_and_0_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ETT_READ_CACHE", raising=False)
    assert Settings(db_url="sqlite:///x.db").read_cache_jobs == DEFAULT_READ_CACHE_JOBS
    for raw, jobs in (("0", 0), ("25", 25)):
        monkeypatch.setenv("ETT_READ_CACHE", raw)
        assert Settings(db_url="sqlite:///x.db").read_cache_jobs == jobs
    for raw in ("-1", "many", "0.5"):
        monkeypatch.setenv("ETT_READ_CACHE", raw)
        with pytest.raises(ConfigError, match="ETT_READ_CACHE"):
            Settings(db_url="sqlite:///x.db")


def test_read_recheck_is_seconds_of_0_or_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ETT_READ_RECHECK_S", raising=False)
    assert Settings(db_url="sqlite:///x.db").read_recheck_s == DEFAULT_READ_RECHECK_S == 0.25
    for raw, seconds in (("0", 0.0), ("1.5", 1.5)):
        monkeypatch.setenv("ETT_READ_RECHECK_S", raw)
        assert Settings(db_url="sqlite:///x.db").read_recheck_s == seconds
    for raw in ("-0.1", "soon", "inf", "nan"):
        monkeypatch.setenv("ETT_READ_RECHECK_S", raw)
        with pytest.raises(ConfigError, match="ETT_READ_RECHECK_S"):
            Settings(db_url="sqlite:///x.db")


@pytest.mark.parametrize(
    "name", ["ETT_LIVE_REFRESH_S", "ETT_READ_WAIT_S", "ETT_WINDOW_S", "ETT_MAX_BODY_BYTES"]
)
@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_a_number_that_is_not_finite_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    # nan passed `not v <= 0`: ETT_WINDOW_S=nan made retention prune nothing, silently
    monkeypatch.setenv(name, raw)
    with pytest.raises(ConfigError, match=f"{name} must be a positive, finite number, got '{raw}'"):
        Settings(db_url="sqlite:///x.db")
