"""Spans whose times no real span can have as it arrives are refused alone (OTLP partial
success, 200): one that ends more than ``ETT_MAX_CLOCK_AHEAD_S`` past the collector's clock (a
sender's clock ahead, or an end of 2262, the largest int64), and one that starts before 2000 (a
host clock never set, counting from 1970). Kept, either stretched its job's wall time over
decades (a probe: wall 7.4e9 s, ETT 6.7e-8 %). A span within the allowance is kept."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from ett import semconv as sc
from ett_collector.api import create_app
from ett_collector.settings import ConfigError, Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline

INT64_MAX = 2**63 - 1
PG_INIT = sc.startup_span_name(sc.StartupPhaseValues.PG_INIT)


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(n: int, name: str, start_ns: int, end_ns: int) -> dict[str, Any]:
    return {
        "traceId": f"{n:032x}",
        "spanId": f"{n:016x}",
        "name": name,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
    }


def _post(tmp_path: Path, spans: list[dict[str, Any]], **settings: Any) -> tuple[dict, Store]:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store(url)
    store.upgrade()
    app = create_app(Settings(db_url=url, **settings), Pipeline(store, settle_s=0))
    resource = {"attributes": [_attr(sc.JOB_ID, "clock"), _attr(sc.ATTEMPT, 0), _attr(sc.RANK, 0)]}
    body = json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]})

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post(
                "/v1/traces", content=body, headers={"Content-Type": "application/json"}
            )

    answer = asyncio.run(post())
    assert answer.status_code == 200, answer.text
    return answer.json(), store


def test_a_span_from_the_future_or_from_1970_is_refused_alone(tmp_path: Path) -> None:
    now = time.time_ns()
    spans = [
        _span(1, PG_INIT, now - 60 * 10**9, now - 50 * 10**9),  # kept
        _span(2, sc.SPAN_TRAIN_WINDOW, now - 10 * 10**9, now + 300 * 10**9),  # 5 min ahead: kept
        _span(3, sc.SPAN_EVAL, now - 30 * 10**9, INT64_MAX),  # ends in 2262
        _span(4, sc.SPAN_TRAIN_WINDOW, now, now + 3 * 3600 * 10**9),  # a clock 3 h ahead
        _span(5, PG_INIT, 3600 * 10**9, 3610 * 10**9),  # an unset clock
    ]
    answer, store = _post(tmp_path, spans)
    try:
        partial = answer["partialSuccess"]
        assert int(partial["rejectedSpans"]) == 3, partial
        message = partial["errorMessage"]
        assert "ETT_MAX_CLOCK_AHEAD_S=600 s" in message and "clock ahead" in message, message
        assert "days after the collector's clock" in message, message  # 2262, said in days
        assert "starts before 2000-01-01" in message, message
        assert store.span_counts()["spans"] == 2
    finally:
        store.close()


def test_the_allowance_is_a_setting(tmp_path: Path) -> None:
    now = time.time_ns()
    spans = [_span(1, sc.SPAN_TRAIN_WINDOW, now, now + 300 * 10**9)]
    answer, store = _post(tmp_path, spans, max_clock_ahead_s=60.0)
    try:
        assert int(answer["partialSuccess"]["rejectedSpans"]) == 1, answer
        assert "ETT_MAX_CLOCK_AHEAD_S=60 s" in answer["partialSuccess"]["errorMessage"]
        assert store.span_counts()["spans"] == 0
    finally:
        store.close()


@pytest.mark.parametrize("value", ["-1", "nan", "ten"])
def test_a_bad_allowance_stops_the_start(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("ETT_MAX_CLOCK_AHEAD_S", value)
    with pytest.raises(ConfigError, match="ETT_MAX_CLOCK_AHEAD_S"):
        Settings(db_url="sqlite:///x.db")
