"""A worker of ``ett serve --workers N`` stops when its parent does.

uvicorn's worker processes never look at their parent: with the parent killed (``kill -9``, the
OOM killer) they went on serving the port, unwatched and re-parented to init, and a
supervisor's restart of ``ett serve`` failed with "port in use". The parent hands its pid down
in :data:`PARENT_PID_VARIABLE`; each worker polls its own parent pid against it and, once they
differ, asks its server to stop as a signal would (SIGTERM to itself: uvicorn finishes the
requests in progress, then the process exits), and leaves at once should that take longer than
:data:`GRACE_S`.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

PARENT_PID_VARIABLE = "ETT_SERVE_PARENT_PID"
"""The pid of the ``ett serve`` process that started the workers."""

POLL_S = 0.5
"""How often a worker looks whether its parent is still there."""

GRACE_S = 30.0
"""How long an orphaned worker's graceful stop may take before it leaves without it."""

_log = logging.getLogger(__name__)


def watch_parent(poll_s: float = POLL_S, grace_s: float = GRACE_S) -> threading.Thread | None:
    """Start the daemon thread that stops this process when the parent named by
    :data:`PARENT_PID_VARIABLE` is gone; None (nothing watched) without that variable."""
    raw = os.environ.get(PARENT_PID_VARIABLE, "")
    if not raw.isdigit():
        return None
    thread = threading.Thread(
        target=_watch, args=(int(raw), poll_s, grace_s), name="ett-parent-watch", daemon=True
    )
    thread.start()
    return thread


def _watch(parent: int, poll_s: float, grace_s: float) -> None:
    while os.getppid() == parent:
        time.sleep(poll_s)  # elapsed time, not a wait: the poll's period
    _log.warning(
        "serve: worker %d stops: its parent ett serve (pid %d) is gone", os.getpid(), parent
    )
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful shutdown, as `kill` would
    time.sleep(grace_s)  # elapsed time, not a wait: the grace the shutdown is given
    _log.error("serve: worker %d did not stop within %g s; leaving now", os.getpid(), grace_s)
    os._exit(1)
