"""How long ``ett serve`` waits on a client: ETT_BODY_TIMEOUT_S."""

from __future__ import annotations

import pytest

from ett_collector.settings import DEFAULT_BODY_TIMEOUT_S, ConfigError, Settings


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
