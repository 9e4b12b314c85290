"""``ETT_RAW_WINDOW_RETENTION_S``: seconds, ``0``, ``keep``; anything else stops the service."""

from __future__ import annotations

import pytest

from ett_collector.settings import (
    DEFAULT_RAW_WINDOW_RETENTION_S,
    ConfigError,
    Settings,
    raw_window_retention_s,
)
from ett_collector.storage._compaction import DEFAULT_RETENTION_S


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (None, DEFAULT_RAW_WINDOW_RETENTION_S),
        ("", 600.0),
        ("0", 0.0),
        ("3600", 3600.0),
        ("keep", None),
        (" KEEP ", None),
    ],
)
def test_values(monkeypatch: pytest.MonkeyPatch, raw: str | None, want: float | None) -> None:
    if raw is None:
        monkeypatch.delenv("ETT_RAW_WINDOW_RETENTION_S", raising=False)
    else:
        monkeypatch.setenv("ETT_RAW_WINDOW_RETENTION_S", raw)
    assert raw_window_retention_s() == want
    assert Settings().raw_window_retention_s == want


@pytest.mark.parametrize("raw", ["-1", "ten", "inf", "nan", "forever"])
def test_bad_values_stop_the_service(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("ETT_RAW_WINDOW_RETENTION_S", raw)
    with pytest.raises(ConfigError, match="ETT_RAW_WINDOW_RETENTION_S"):
        Settings()


def test_the_store_default_is_the_documented_one() -> None:
    assert DEFAULT_RETENTION_S == DEFAULT_RAW_WINDOW_RETENTION_S == 600.0
