"""Build the service from the environment: one app per server process.

``ett serve --workers N`` runs N uvicorn worker processes that share the database. The CLI puts
the settings into ``ETT_*`` variables before the workers start; each worker calls
:func:`app_from_env`. One worker at a time (the holder of a lock file) runs the background
recompute; the others take over if it dies. Reads of a dirty job recompute it in any worker.
"""

from __future__ import annotations

import fcntl
import gc
import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import IO

from starlette.applications import Starlette

from ..alerts._routes import install as install_alerts
from ..read.metrics import CollectorMetrics
from ..settings import Settings
from ..storage import Store
from ..write.pipeline import Pipeline
from ._app import create_app
from ._connections import HeadDeadlineProtocol
from ._parent_watch import watch_parent


class LeaderLock:
    """A non-blocking exclusive lock on a file: the holder runs the background recompute."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def __call__(self) -> bool:
        """True while this process holds the lock (tries to take it when it does not)."""
        if self._file is not None:
            return True
        f = open(self.path, "a")  # noqa: SIM115 - held for the process's life
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            return False
        self._file = f
        return True


class Follower(LeaderLock):
    """The leader test of a read-only collector: never the leader."""

    def __init__(self) -> None:
        super().__init__(Path(os.devnull))

    def __call__(self) -> bool:
        return False


def leader_lock_for(db_url: str) -> LeaderLock:
    """The lock shared by every worker serving ``db_url`` on this host."""
    digest = hashlib.sha256(db_url.encode()).hexdigest()[:16]
    return LeaderLock(Path(tempfile.gettempdir()) / f"ett-recompute-{digest}.lock")


SWITCH_INTERVAL_S = 0.0005
"""The server process's GIL switch interval (Python's default is 5 ms). A recompute is pure
Python; every read and ingest step that releases the GIL (each database call) waits up to one
interval to get it back from it, many times per request. What 0.5 ms bought, measured with
``bench_recompute.py``: docs/benchmarks.md, "Figures behind constants in the code"."""


GC_THRESHOLDS = (10_000, 10, 10)
"""The server process's garbage-collector thresholds (Python's default is ``(700, 10, 10)``).
Decoding one OTLP body of 512 spans allocates thousands of dicts and records that reference
counting frees; with the default, each request still triggered about three young collections,
and every tenth of those an older one. What 10,000 bought (with :func:`settle_garbage`'s freeze),
measured over HTTP: docs/benchmarks.md, "Figures behind constants in the code"."""


def settle_garbage() -> None:
    """Collect once, move every object alive now (modules, the app) out of the collector's
    sight (``gc.freeze``: later collections no longer walk them) and set
    :data:`GC_THRESHOLDS`. Call when the app is built, before it serves."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def build_app(settings: Settings, leader: LeaderLock | None = None) -> Starlette:
    """The app, with its pipeline and metrics, over a store that is already migrated:
    ``ett serve`` migrates once, before it starts the server or any worker process. Sets the
    process's GIL switch interval (:data:`SWITCH_INTERVAL_S`); a server process then settles
    its garbage collector (:func:`settle_garbage`). Sets the request-head deadline of the
    process's connections (``ETT_HEADER_TIMEOUT_S``, ``_connections.py``)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    HeadDeadlineProtocol.head_timeout_s = settings.header_timeout_s  # one server per process
    HeadDeadlineProtocol.send_timeout_s = settings.send_timeout_s
    if settings.read_only:
        leader = Follower()  # no recompute, alert evaluation or retention: they write
    store = Store(settings.db_url, raw_window_retention_s=settings.raw_window_retention_s)
    metrics = CollectorMetrics()
    pipeline = Pipeline(
        store,
        settings.window_s,
        settings.live_refresh_s,
        on_recompute=metrics.observe_recompute,
        leader=leader,
        on_failure=metrics.observe_recompute_failure,
    )
    app = create_app(settings, pipeline, metrics)
    install_alerts(app, store.engine, metrics.register_shared, leader, settings.alerts)
    return app


def app_from_env() -> Starlette:
    """uvicorn's factory for worker processes (settings from ``ETT_*`` variables: the one
    hand-off through the environment, :meth:`Settings.for_worker`). The worker stops when
    its parent ``ett serve`` is gone (:mod:`._parent_watch`)."""
    from ..logs import show_service_logs

    show_service_logs()  # ETT_LOG_LEVEL: checked by `ett serve` before the workers started
    watch_parent()  # first: a parent killed while the app is built still stops this worker
    settings = Settings.for_worker()
    app = build_app(settings, leader_lock_for(settings.db_url))
    settle_garbage()
    return app
