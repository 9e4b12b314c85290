"""Waiting in tests: poll a condition until it holds, within a deadline, instead of sleeping.

A fixed sleep that lets something happen (a server start, a thread's flush, a file's arrival)
fails when the shared machine is loaded and wastes its length when it is idle. A poll returns as
soon as the condition holds, so its generous bound (:data:`WAIT_S`) costs nothing when things go
well. A sleep that makes time pass on purpose (a span that must last 50 ms, a deliberate stall)
is no wait: keep it, and where that is not obvious say so with
``# elapsed time, not a wait: <why>``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 120.0
"""How long a wait waits for what it waits for, by default (within pytest's 300 s): CI runs the
suite on a loaded 2-core machine, where a start or a recompute may take many times what it takes
on an idle one."""

POLL_S = 0.05
"""The pause between two looks at the condition."""


def wait_until(
    predicate: Callable[[], T],
    timeout: float = WAIT_S,
    what: str = "the condition",
    interval: float = POLL_S,
    ignore: tuple[type[Exception], ...] = (),
    detail: Callable[[], object] | None = None,
) -> T:
    """``predicate()``'s first truthy value, looked at every ``interval`` s; AssertionError
    ``timed out after <timeout> s waiting for <what>`` (then ``detail()``, a log's tail say) once
    ``timeout`` s have passed without one. An exception of an ``ignore`` type counts as "not yet"
    (a server not listening yet); the last one is chained to the AssertionError. The condition is
    looked at once more after the deadline, so a slow look never fails a condition that holds."""
    deadline = time.monotonic() + timeout
    error: Exception | None = None
    while True:
        past = time.monotonic() >= deadline
        try:
            value = predicate()
        except ignore as exc:
            error = exc
        else:
            if value:
                return value
        if past:
            message = f"timed out after {timeout:g} s waiting for {what}"
            if detail is not None:
                message += f"\n{detail()}"
            raise AssertionError(message) from error
        time.sleep(interval)
