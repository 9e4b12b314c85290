"""The read settings of ``ett serve``: ETT_READ_WAIT_S and ETT_READ_THREADS."""

from __future__ import annotations

import pytest

from collector.settings import DEFAULT_READ_THREADS, DEFAULT_READ_WAIT_S, ConfigError, Settings


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
