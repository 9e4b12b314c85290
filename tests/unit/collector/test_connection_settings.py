"""How long ``ett serve`` waits on a client: ETT_HEADER_TIMEOUT_S and ETT_BODY_TIMEOUT_S."""

from __future__ import annotations

from pathlib import Path

import pytest

from ett_collector.api._connections import HeadDeadlineProtocol
from ett_collector.api._factory import build_app
from ett_collector.settings import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    ConfigError,
    Settings,
)
from ett_collector.storage import Store


def test_body_timeout_default_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ETT_BODY_TIMEOUT_S", raising=False)
    assert Settings(db_url="sqlite:///x.db").body_timeout_s == DEFAULT_BODY_TIMEOUT_S == 30.0
    monkeypatch.setenv("ETT_BODY_TIMEOUT_S", "120")
    assert Settings(db_url="sqlite:///x.db").body_timeout_s == 120.0


@pytest.mark.parametrize("raw", ["0", "-1", "inf", "nan", "soon"])
def test_body_timeout_is_a_finite_positive_number(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("ETT_BODY_TIMEOUT_S", raw)
    with pytest.raises(ConfigError, match="ETT_BODY_TIMEOUT_S"):
        Settings(db_url="sqlite:///x.db")


def test_header_timeout_default_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ETT_HEADER_TIMEOUT_S", raising=False)
    assert Settings(db_url="sqlite:///x.db").header_timeout_s == DEFAULT_HEADER_TIMEOUT_S == 30.0
    monkeypatch.setenv("ETT_HEADER_TIMEOUT_S", "5")
    assert Settings(db_url="sqlite:///x.db").header_timeout_s == 5.0


@pytest.mark.parametrize("raw", ["0", "-1", "inf", "nan", "soon"])
def test_header_timeout_is_a_finite_positive_number(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("ETT_HEADER_TIMEOUT_S", raw)
    with pytest.raises(ConfigError, match="ETT_HEADER_TIMEOUT_S"):
        Settings(db_url="sqlite:///x.db")


def test_the_app_gives_its_connections_the_header_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(HeadDeadlineProtocol, "head_timeout_s", DEFAULT_HEADER_TIMEOUT_S)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    Store(url).upgrade()
    build_app(Settings(db_url=url, header_timeout_s=7.0))
    assert HeadDeadlineProtocol.head_timeout_s == 7.0
