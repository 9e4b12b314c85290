"""``ett serve``: the collector service, on one process or on several workers.

The address is bound first (nothing is created on a busy port), the database is migrated (or,
``--read-only``, checked to be at the newest schema), then uvicorn serves the app of
``ett_collector.api._factory``; several workers share the socket and the database and receive
their settings through ``ETT_*`` variables (the one hand-off of the multi-worker factory); their
supervision is in :mod:`._serve_workers`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from typing import Any

from ..settings import DEFAULT_PORT, ConfigError, Settings
from . import _serve_security
from ._runner import ENVIRONMENT, CommandError, Kit
from ._serve_workers import serve_workers, worker_count
from ._target import add_db_option as _db_arg
from ._upgrades import INTERRUPTED, describe, run_upgrade


def register(sub: Any, kit: Kit) -> None:
    """Add ``serve`` to ``ett``."""
    serve = sub.add_parser(
        "serve",
        help="run the collector: OTLP/HTTP in, read API, /metrics",
        description="Run the collector: POST /v1/traces (OTLP/HTTP, protobuf or JSON, gzip),\n"
        "the read API under /api/v1/, /healthz and /metrics. Applies database migrations\n"
        "first, and says which.",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 4318)")
    _db_arg(serve)
    serve.add_argument(
        "--token",
        default=None,
        help="one bearer token for everything; prefer ETT_TOKEN or token files: a command "
        "line is visible to other users (ps)",
    )
    _serve_security.add_options(serve)  # scoped token files, TLS
    serve.add_argument(
        "--read-only",
        action="store_true",
        default=None,
        help="serve the read API, /metrics and the dashboards from a database that only "
        "reads (a PostgreSQL hot standby; or ETT_READ_ONLY=1): ingest is refused, nothing is "
        "migrated or recomputed, /healthz reports the replication lag",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="server processes sharing the database (default 1, or ETT_WORKERS; at most 8 "
        "per core and 64); more processes decode OTLP in parallel",
    )
    serve.set_defaults(func=kit.guard(_serve))


def _serve(args: argparse.Namespace) -> int:
    from ..logs import LogConfigError, level_from_env, show_service_logs

    args.workers = worker_count(args.workers)
    settings = _settings(args)
    try:
        level = level_from_env()  # refused before anything starts, like every other setting
    except LogConfigError as exc:
        raise ConfigError(str(exc)) from None
    sock = _bind(settings.host, settings.port)  # the address first: nothing created on a busy port
    _serve_security.warn_if_open(settings)  # once the address is known to be one
    _prepare_database(settings, args.target)
    where = f"{_serve_security.scheme(settings)}://{settings.host}:{settings.port}"
    where += f" (db: {args.target.shown}"
    show_service_logs(level)
    if args.workers == 1:
        try:
            _serve_here(settings, sock, f"ett collector listening on {where}, 1 worker)")
        except KeyboardInterrupt:  # Ctrl-C: uvicorn stopped, and the log said so
            return INTERRUPTED
        return 0
    serve_workers(
        settings, sock, args.workers, f"ett collector starting {args.workers} workers on {where})"
    )
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    """The service's settings: the address, the database, the token, ``--read-only`` and the
    security options laid over the ``ETT_*`` variables."""
    token = {"token": args.token} if args.token else {}
    from ..security import MIN_TOKEN_CHARS

    typed = (args.token or "").strip()
    if typed and len(typed) < MIN_TOKEN_CHARS:  # token files refuse these; a typed
        print(  # one is said (the examples and tests use short ones), never shown
            f"ett serve: note: --token has {len(typed)} characters; a guessable token "
            f"lets anyone send or read: use at least {MIN_TOKEN_CHARS} random ones "
            "(e.g. `openssl rand -hex 32`)",
            file=sys.stderr,
        )
    settings = Settings(host=args.host, port=args.port, db_url=args.target.url, **token)
    if args.read_only:
        settings = dataclasses.replace(settings, read_only=True)
    return _serve_security.apply(args, settings)


def _prepare_database(settings: Settings, target: Any) -> None:
    """Migrate the database, or check a read-only one's schema: fail fast on a bad database,
    before any worker starts."""
    from ..storage import Store
    from ..storage._replica import read_only_reason, replication

    if settings.read_only and settings.db_url.startswith("sqlite"):
        raise CommandError(
            f"--read-only serves the reads of a PostgreSQL hot standby; {target.shown} is a "
            "SQLite file, which has none: serve it without --read-only (one collector per "
            "SQLite file), or point --db at a standby"
        )
    path = target.sqlite_path
    missing = path.parent if path is not None and not path.parent.exists() else None
    try:
        store = Store(settings.db_url)
        if missing is not None and target.source in ("--db", "ETT_DB_URL") and missing.exists():
            # the default home is made quietly; a folder the user named is said (a typo made
            # /nonexistdir at the file system's root without a word)
            print(f"ett serve: created the folder {missing} for the database", file=sys.stderr)
        if settings.read_only:
            _check_replica(store, target.shown)
            if not replication(store.engine)["standby"]:
                print(
                    f"ett serve: note: {target.shown} is not a hot standby but a database that "
                    "takes writes: this collector serves its reads and refuses ingest, and "
                    "nothing here recomputes figures",
                    file=sys.stderr,
                    flush=True,
                )
        elif (why := read_only_reason(store.engine)) is not None:
            raise CommandError(
                f"the database {target.shown} is read-only: {why}: serve its reads with "
                "--read-only, or point --db at the primary"
            )
        else:
            before, applied = run_upgrade(store, "ett serve")
            if (said := describe(before, applied)) is not None:
                print(f"ett serve: {target.shown}: {said}", file=sys.stderr, flush=True)
    except OSError as exc:  # its folder cannot be made: a file in the way, no permission
        where = f"{target.shown} (from {target.source})"
        if isinstance(exc, FileExistsError):  # mkdir met a file where a folder must be
            why = f"{exc.filename} is a file, not a folder"
        else:
            why = f"{exc.strerror}: {exc.filename}"
        raise CommandError(f"cannot create the database {where}: {why}") from None


def _serve_here(settings: Settings, sock: Any, line: str) -> None:
    """Serve on this process, on the bound ``sock``; print ``line`` once it listens."""
    import uvicorn

    from ..api._connections import PROTOCOL
    from ..api._factory import build_app, settle_garbage

    app = build_app(settings)
    settle_garbage()
    config = uvicorn.Config(
        app,
        http=PROTOCOL,  # request heads have a deadline (ETT_HEADER_TIMEOUT_S)
        log_level="warning",
        timeout_keep_alive=math.ceil(settings.keep_alive_s),
        proxy_headers=False,  # X-Forwarded-For is the client's say: never its address
        **settings.tls.uvicorn_options(),
    )
    _announcing_server(config, line).run(sockets=[sock])


def _check_replica(store: Any, shown: str) -> None:
    """A read-only collector migrates nothing: its database must be at the newest schema (the
    primary's collector, or ``ett db upgrade`` on the primary, brings it there)."""
    from ..storage import head_revision
    from ..storage._migrate import applied_between

    revision, head = store.revision(), head_revision()
    if revision is not None and revision not in applied_between(None, head):
        raise CommandError(  # a newer ett's (or another application's): no upgrade helps
            f"--read-only: the database {shown} is at schema {revision}, which is none of this "
            f"ett's migrations (it reads {head}): a newer ett (or another application) made "
            "it; serve it with the ett that made it"
        )
    if revision != head:
        raise CommandError(
            f"--read-only: the database {shown} is at schema {revision or 'none'}, this ett "
            f"needs {head}: run `ett db upgrade` against the primary, then start again"
        )


def _bind(host: str, port: int) -> Any:
    """A listening socket on ``host:port``, or ``CommandError`` (exit 2) saying why not."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CommandError(
            f"--host {host!r} is not an address: write an IP such as 127.0.0.1 or "
            f"0.0.0.0, or a resolvable host name ({exc})"
        ) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = f"port {port} is in use (another ett serve?): stop it or pass --port N"
        elif exc.errno in (errno.EACCES, errno.EPERM):
            why = f"port {port} needs privileges: pass --port above 1023"
        else:
            why = (
                f"cannot listen on {host}:{port}: {exc.strerror}; pass --host with an "
                "address of this machine (127.0.0.1, 0.0.0.0)"
            )
        raise CommandError(why) from exc
    sock.set_inheritable(True)
    return sock


def _announcing_server(config: Any, line: str) -> Any:
    """A uvicorn server that prints ``line`` once it is listening."""
    import logging
    import signal

    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        def __init__(self, config: Any, line: str) -> None:
            super().__init__(config)
            self._line = line

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                print(self._line, flush=True)

        async def shutdown(self, sockets: Any = None) -> None:
            names = [signal.Signals(s).name for s in self._captured_signals[:1]]
            logging.getLogger("ett_collector.serve").info(
                "serve: stopping%s", f" on {names[0]}" if names else ""
            )
            await super().shutdown(sockets=sockets)

    return AnnouncingServer(config, line)
