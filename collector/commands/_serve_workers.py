"""``ett serve --workers N``: the supervision of its server processes.

uvicorn's supervisor (``uvicorn.supervisors.Multiprocess``) starts the workers on the socket
``ett serve`` bound, replaces one that dies and stops them all on SIGINT or SIGTERM. Around it,
what an operator needs: the death and the replacement of a worker in the log (uvicorn says it
at INFO, which the collector's uvicorn level hides), one line when it stops, workers that stop
with their parent (:mod:`ett_collector.api._parent_watch`), and no Prometheus folder left in
``/tmp`` after it.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import tempfile
from typing import Any

from ..api._parent_watch import PARENT_PID_VARIABLE
from ..settings import Settings
from . import _serve_security

_log = logging.getLogger("ett_collector.serve")


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
