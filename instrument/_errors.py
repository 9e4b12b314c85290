"""Internal error handling: telemetry logs its own failures once and never raises them.

Every public entry point of the library that does telemetry work (as opposed to running the
user's code) goes through :func:`never_raises`, so a bug here, a missing SDK feature or a bad
argument costs one log line, not a training run.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

LOGGER_NAME = "ett_instrument"
"""The name of the library's logger (``logging.getLogger(LOGGER_NAME)``)."""

logger = logging.getLogger(LOGGER_NAME)

_P = ParamSpec("_P")
_R = TypeVar("_R")

_seen: set[str] = set()
_seen_lock = threading.Lock()


def log_once(key: str, message: str, *args: object, exc_info: bool = False) -> None:
    """Log ``message`` at WARNING the first time ``key`` is seen in this process, then never."""
    with _seen_lock:
        if key in _seen:
            return
        _seen.add(key)
    try:
        logger.warning(message, *args, exc_info=exc_info)
    except Exception:  # a broken logging handler must not break training either
        pass


def never_raises(key: str, default: _R) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate a telemetry function so that an ``Exception`` it raises is logged once
    (under ``key``) and ``default`` is returned instead."""
    return never_raises_making(key, lambda: default)


def never_raises_making(
    key: str, make: Callable[[], _R], note: str = "ignored"
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """:func:`never_raises` whose stand-in value is ``make()``, made anew at each failure (a
    span block that records nothing, which a caller then uses); ``note`` ends the log line."""

    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return func(*args, **kwargs)
            except Exception:
                log_once(key, "ETT instrumentation error in %s (%s)", key, note, exc_info=True)
                return make()

        return wrapper

    return decorate
