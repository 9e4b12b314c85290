"""When the ingest route asks clients to come back: the outage's Retry-After and the in-flight
byte budget."""

from __future__ import annotations

import pytest

from ett_collector.api._admission import MAX_RETRY_AFTER_S, Busy, InflightBudget, OutageClock
from ett_collector.settings import ConfigError, Settings
from ett_collector.storage import RETRY_AFTER_S


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_retry_after_grows_with_the_outage_and_resets_after_a_write() -> None:
    clock = FakeClock()
    outage = OutageClock(clock)
    waits = []
    for _ in range(7):  # a client that waits as told, again and again
        wait = outage.refused()
        waits.append(wait)
        clock.now += wait
    assert waits[0] == RETRY_AFTER_S
    assert waits == sorted(waits) and waits[-1] == MAX_RETRY_AFTER_S
    # six attempts, five waits, as the SDK exporter makes: they outlast a 15 s outage
    assert sum(waits[:5]) > 15
    outage.stored()
    assert outage.refused() == RETRY_AFTER_S


def test_budget_refuses_past_the_limit_and_gives_back() -> None:
    budget = InflightBudget(100)
    first, second = budget.ticket(), budget.ticket()
    first.charge_up_to(60)
    with pytest.raises(Busy) as refused:
        second.charge_up_to(50)
    assert refused.value.retry_after_s >= 1 and "ETT_MAX_INFLIGHT_BYTES=100" in str(refused.value)
    assert second.held == 0 and budget.inflight == 60  # a refused charge takes nothing
    second.charge_up_to(40)
    assert budget.inflight == 100
    first.release()
    first.release()  # idempotent
    assert budget.inflight == 40
    with second:
        second.charge_up_to(90)  # grows its own charge within the limit
    assert budget.inflight == 0 and budget.peak == 100


def test_one_request_alone_is_admitted_whatever_its_size() -> None:
    budget = InflightBudget(10)
    with budget.ticket() as alone:
        alone.charge_up_to(50)
        assert budget.inflight == 50
        with pytest.raises(Busy):
            budget.ticket().charge_up_to(1)
    assert budget.inflight == 0


def test_inflight_limit_must_hold_one_body() -> None:
    with pytest.raises(ConfigError, match="ETT_MAX_INFLIGHT_BYTES"):
        Settings(db_url="sqlite:///x.db", max_body_bytes=4096, max_inflight_bytes=2048)
