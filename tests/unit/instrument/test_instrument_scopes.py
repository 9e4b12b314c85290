"""The library's context managers share one exit: it sees the exception and never swallows it."""

from __future__ import annotations

import pytest

import ett
from ett._failure import fails_attempt
from ett._scope import Scope
from ett._setup import AttemptScope
from ett._spans import SpanBlock
from ett._stalls import DataWait


def test_a_clean_exit_does_not_fail_the_attempt() -> None:
    assert not fails_attempt(None)
    assert not fails_attempt(SystemExit(0))
    assert not fails_attempt(SystemExit(None))
    assert fails_attempt(SystemExit(2))
    assert fails_attempt(KeyboardInterrupt())
    assert fails_attempt(ValueError("x"))


def test_every_scope_leaves_through_the_one_exit() -> None:
    for cls in (ett.Guard, AttemptScope, SpanBlock, DataWait):
        assert issubclass(cls, Scope), cls
        assert cls.__exit__ is Scope.__exit__, cls
    assert not hasattr(DataWait(ett.current()._spans), "__dict__")  # still slotted


class _Failures:
    def __init__(self) -> None:
        self.failed: list[BaseException] = []

    def fail(self, exc: BaseException) -> None:
        self.failed.append(exc)


def test_the_guard_records_a_failure_and_lets_it_propagate() -> None:
    seen = _Failures()
    error = RuntimeError("boom")

    with pytest.raises(RuntimeError) as raised, ett.Guard(seen):
        raise error
    with pytest.raises(SystemExit), ett.Guard(seen):
        raise SystemExit(0)

    assert raised.value is error
    assert seen.failed == [error]  # the clean exit is not a failure
