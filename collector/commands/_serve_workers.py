"""``ett serve --workers N``: how many server processes, and their supervision.

uvicorn's supervisor (``uvicorn.supervisors.Multiprocess``) starts the workers on the socket
``ett serve`` bound, replaces one that dies and stops them all on SIGINT or SIGTERM. Around it,
what an operator needs: a count the machine can run (500 workers on 2 cores made the load 105
and took 4 minutes to stop), the death and the replacement of a worker in the log (uvicorn says
it at INFO, which the collector's uvicorn level hides), one line when it stops, workers that stop
with their parent (:mod:`ett_collector.api._parent_watch`), and no Prometheus folder left in
``/tmp`` after it.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import sys
import tempfile
from typing import Any

from ..api._parent_watch import PARENT_PID_VARIABLE
from ..settings import ConfigError, Settings
from . import _serve_security
from ._runner import CommandError

MAX_WORKERS = 64
"""The most server processes ``ett serve`` starts, whatever the machine."""

WORKERS_PER_CORE = 8
"""The most server processes per core ``ett serve`` starts: past one or two per core a worker
adds memory and no ingest rate (OTLP decoding is CPU-bound Python)."""

_log = logging.getLogger("ett_collector.serve")


def cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's share, not the
    host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def worker_count(given: int | None) -> int:
    """``--workers``, else ``ETT_WORKERS``, else 1: at least 1, at most :data:`MAX_WORKERS` and
    :data:`WORKERS_PER_CORE` per core (``CommandError``, exit 2, otherwise); a note on stderr
    when there are more workers than cores."""
    source = "--workers"
    if given is None:
        source = "ETT_WORKERS"
        raw = os.environ.get("ETT_WORKERS") or "1"
        if not raw.isdigit():
            raise CommandError(
                f"ETT_WORKERS={raw!r} is not a whole number: write e.g. ETT_WORKERS=2"
            )
        given = int(raw)
    if given < 1:
        raise ConfigError(f"--workers must be at least 1, got {given}")
    n = cores()
    limit = min(MAX_WORKERS, WORKERS_PER_CORE * n)
    if given > limit:
        raise CommandError(
            f"{source} {given} is more server processes than this machine can run: at most "
            f"{limit} here ({WORKERS_PER_CORE} per core, {n} core(s), and never more than "
            f"{MAX_WORKERS}); one per core is what speeds up ingest"
        )
    if given > n:
        print(
            f"ett serve: note: {given} workers on {n} core(s): workers beyond the cores add "
            "memory, not ingest rate",
            file=sys.stderr,
        )
    return given


def serve_workers(settings: Settings, sock: Any, workers: int, line: str) -> None:
    """Serve on ``workers`` processes sharing the bound ``sock``, each building its app from
    the ``ETT_*`` variables written here (``ett_collector.api._factory.app_from_env``); print
    ``line`` when they start. Returns when they have stopped (SIGINT or SIGTERM)."""
    import uvicorn

    from ..api._connections import PROTOCOL

    metrics = tempfile.mkdtemp(prefix="ett-metrics-")  # the workers' Prometheus files
    try:
        os.environ["ETT_DB_URL"] = settings.db_url
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics
        os.environ["ETT_HOST"], os.environ["ETT_PORT"] = settings.host, str(settings.port)
        os.environ[PARENT_PID_VARIABLE] = str(os.getpid())  # each worker stops when it is gone
        if settings.token:
            os.environ["ETT_TOKEN"] = settings.token
        if settings.read_only:
            os.environ["ETT_READ_ONLY"] = "1"
        os.environ.update(_serve_security.worker_environment(settings))
        config = uvicorn.Config(
            "ett_collector.api._factory:app_from_env",
            factory=True,
            workers=workers,
            http=PROTOCOL,  # request heads have a deadline (ETT_HEADER_TIMEOUT_S)
            host=settings.host,
            port=settings.port,
            log_level="warning",  # no access log, no start-up chatter from each worker
            timeout_keep_alive=math.ceil(settings.keep_alive_s),
            proxy_headers=False,  # X-Forwarded-For is the client's say: never its address
            **settings.tls.uvicorn_options(),
        )
        print(line, flush=True)
        _supervisor(config, sock).run()
    finally:
        shutil.rmtree(metrics, ignore_errors=True)


def _supervisor(config: Any, sock: Any) -> Any:
    """uvicorn's supervisor of the workers, saying in the collector's log when a worker died
    and what replaced it, and when it stops."""
    from uvicorn.supervisors import Multiprocess

    class Supervisor(Multiprocess):
        def keep_subprocess_alive(self) -> None:
            before = [(p, p.process.is_alive()) for p in self.processes]
            super().keep_subprocess_alive()
            for (old, was_alive), new in zip(before, self.processes, strict=False):
                if new is not old:
                    why = (
                        _ended(old.exitcode)
                        if not was_alive
                        else (
                            f"did not answer within {config.timeout_worker_healthcheck:g} s and "
                            "was killed"
                        )
                    )
                    _log.warning(
                        "serve: worker %s %s; started worker %s in its place", old.pid, why, new.pid
                    )

        def handle_int(self) -> None:
            self._stopping("SIGINT")
            super().handle_int()

        def handle_term(self) -> None:
            self._stopping("SIGTERM")
            super().handle_term()

        def _stopping(self, signal_name: str) -> None:
            _log.info("serve: stopping on %s: %d worker(s)", signal_name, len(self.processes))

    return Supervisor(config, sockets=[sock])


def _ended(exitcode: int | None) -> str:
    """How a worker ended: ``died (killed by SIGKILL)``, ``exited with code 3``."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"died (killed by {signal.Signals(-exitcode).name})"
        except ValueError:
            return f"died (killed by signal {-exitcode})"
    return f"exited with code {exitcode}"
