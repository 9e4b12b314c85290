"""Where ``ett serve`` writes its own log lines: standard error, at ``ETT_LOG_LEVEL``.

Without a handler, Python printed only WARNING and above of the collector's loggers (its last
resort), so the INFO lines the docs name (``alerts: caught up over N instants``, a replay of
late history, retention's deletions, partitions created) never showed. The service, and each
of its worker processes, attaches one handler to the ``ett_collector`` logger (every module's
logger is a child of it) with a UTC timestamp; the commands that are not services keep the
default (warnings alone, one line each).
"""

from __future__ import annotations

import logging
import os
import sys
import time

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DEFAULT_LEVEL = "INFO"
ROOT = "ett_collector"


class LogConfigError(ValueError):
    """``ETT_LOG_LEVEL`` is not one of :data:`LEVELS`."""


def level_from_env() -> int:
    """``ETT_LOG_LEVEL`` (any case; unset or empty: :data:`DEFAULT_LEVEL`) as a logging level.

    Raises:
        LogConfigError: naming the variable and the levels.
    """
    raw = os.environ.get("ETT_LOG_LEVEL", "").strip().upper() or DEFAULT_LEVEL
    if raw not in LEVELS:
        raise LogConfigError(
            f"ETT_LOG_LEVEL must be one of {', '.join(LEVELS)}, got {os.environ['ETT_LOG_LEVEL']!r}"
        )
    return int(getattr(logging, raw))


def show_service_logs(level: int | None = None) -> None:
    """Write the collector's log lines at ``level`` (default :func:`level_from_env`) and above to
    standard error, once per process (a second call changes only the level)."""
    logger = logging.getLogger(ROOT)
    logger.setLevel(level_from_env() if level is None else level)
    if any(getattr(h, "_ett_service", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%SZ")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    handler._ett_service = True  # type: ignore[attr-defined]
    logger.addHandler(handler)


__all__ = ["DEFAULT_LEVEL", "LEVELS", "LogConfigError", "level_from_env", "show_service_logs"]
