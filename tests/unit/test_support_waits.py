"""The tests' one wait helper (tests/support/waits.py): it returns what the condition gave as soon
as it holds, and on timeout fails naming what it waited for."""

from __future__ import annotations

import itertools

import pytest

from tests.support.waits import wait_until


def test_returns_the_first_truthy_value_of_the_condition() -> None:
    looks = itertools.count()
    assert wait_until(lambda: [n for n in [next(looks)] if n >= 3], timeout=10) == [3]


def test_a_timeout_names_what_was_awaited_and_its_detail() -> None:
    with pytest.raises(AssertionError, match=r"timed out after 0.05 s waiting for the moon"):
        wait_until(lambda: False, timeout=0.05, what="the moon")
    with pytest.raises(AssertionError, match=r"the moon\nstill cloudy"):
        wait_until(lambda: 0, timeout=0.05, what="the moon", detail=lambda: "still cloudy")


def test_ignored_errors_count_as_not_yet_and_are_chained() -> None:
    looks = itertools.count()

    def flaky() -> bool:
        if next(looks) < 2:
            raise ConnectionError("not listening yet")
        return True

    assert wait_until(flaky, timeout=10, ignore=(ConnectionError,)) is True
    with pytest.raises(AssertionError) as failed:
        wait_until(lambda: 1 / 0, timeout=0.05, ignore=(ZeroDivisionError,))
    assert isinstance(failed.value.__cause__, ZeroDivisionError)


def test_other_errors_propagate_at_once() -> None:
    empty: dict[str, int] = {}
    with pytest.raises(KeyError):
        wait_until(lambda: empty["missing"], timeout=10)
