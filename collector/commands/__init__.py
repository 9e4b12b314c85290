"""The collector's ``ett`` subcommands: the service, its database, and the questions users ask.

Every read command goes through the same query layer as the HTTP API and the dashboards.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from ett import semconv
from ett_cli import CliError, console

from ..domain.model import GroupBy
from ..settings import DEFAULT_PORT, ConfigError, Settings
from . import _serve_security
from ._options import add_filters, add_json, add_state, add_window
from ._target import add_db_option as _db_arg


def register(sub: Any) -> None:
    """Add ``serve``, ``db``, ``recompute``, ``report``, ``jobs``, ``lost-time``, ``fleet`` and
    ``checkpoint-advice`` to ``ett``."""
    serve = sub.add_parser(
        "serve",
        help="run the collector: OTLP/HTTP in, read API, /metrics",
        description="Run the collector: POST /v1/traces (OTLP/HTTP, protobuf or JSON, gzip), "
        "the read API under /api/v1/, /healthz and /metrics. Applies database migrations first.",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 4318)")
    _db_arg(serve)
    serve.add_argument(
        "--token", default=None, help="one bearer token for everything (or ETT_TOKEN)"
    )
    _serve_security.add_options(serve)  # scoped token files, TLS
    serve.add_argument(
        "--read-only", action="store_true", default=None,
        help="serve the read API, /metrics and the dashboards from a database that only "
        "reads (a PostgreSQL hot standby; or ETT_READ_ONLY=1): ingest is refused, nothing is "
        "migrated or recomputed, /healthz reports the replication lag",
    )  # fmt: skip
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="server processes sharing the database (default 1, or ETT_WORKERS); more "
        "processes decode OTLP in parallel",
    )
    serve.set_defaults(func=_guard(_serve))

    db = sub.add_parser("db", help="database schema management")
    dbsub = db.add_subparsers(dest="db_command", metavar="ACTION")
    dbsub.required = True
    _command(dbsub, "upgrade", _upgrade, help="apply Alembic migrations up to the latest schema")
    ro = _command(
        dbsub,
        "grant-readonly",
        _grant_readonly,
        help="create or update a PostgreSQL role that may only read the ett_v1_* views "
        "(for Grafana)",
    )
    ro.add_argument("role", metavar="ROLE", help="role name, e.g. ett_grafana")
    ro.add_argument(
        "--password-env", metavar="VAR", default=None,
        help="set the role's password from this environment variable (never on the command line)",
    )  # fmt: skip

    prune = _command(
        dbsub,
        "prune",
        _prune,
        help="delete what the ETT_RETAIN_* periods let go (the service does it by itself)",
        description="Delete the raw spans, heartbeat runs, job figures and resolved alerts "
        "older than their retention (ETT_RETAIN_SPANS, ETT_RETAIN_RUNS, ETT_RETAIN_FIGURES, "
        "ETT_RETAIN_ALERTS), in small batches. A running job is never pruned; a job whose raw "
        "spans are gone keeps its figures, segments and fleet cells.",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say what would be deleted; delete nothing"
    )

    rec = _command(
        sub, "recompute", _recompute, help="re-derive jobs' segments and figures from raw spans"
    )
    rec.add_argument("jobs", nargs="*", metavar="JOB", help="job ids (default: every job)")

    rep = _command(
        sub,
        "report",
        _report,
        help="one job's figures (ETT-SPEC section 5)",
        description="One job's ETT, idle and failure shares, time to start and to recover, "
        "unsaved work, checkpoint blocking, lost time by component and checkpoint advice. "
        "When the job has spans newer than its figures, this computes them and waits for "
        "them up to ETT_READ_WAIT_S (default 2 s), then prints the stored figures marked "
        "'newer spans not included yet' (the HTTP API never waits: it answers the stored "
        "figures with fresh: false).",
    )
    rep.add_argument("job_id", metavar="JOB_ID", help="the job's ett.job.id (see `ett jobs`)")
    add_json(rep, "the read API's JSON object")

    jobs = _command(
        sub,
        "jobs",
        _jobs,
        help="list jobs, newest first",
        description="List jobs, newest first, with their ETT, idle and failure shares. Job ids "
        "are never cut; piped, the table is plain text.",
    )
    add_state(jobs)
    add_filters(jobs, attributes=True)
    jobs.add_argument(
        "--since", help="jobs that ended since: 7d, 12h, ISO 8601 or unix seconds (default: all)"
    )
    jobs.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    add_json(jobs, "a JSON list")

    lost = _command(
        sub,
        "lost-time",
        _lost_time,
        help="idle + failure seconds in a window, largest first",
        description="Idle and failure seconds of every job in a window (clipped to it), grouped "
        "and largest first: where the fleet's GPU hours went.",
    )
    lost.add_argument(
        "--by",
        default=GroupBy.COMPONENT.value,
        choices=[g.value for g in GroupBy],
        help="group by (default component)",
    )
    add_window(lost)
    add_json(lost, "a JSON list")

    from . import overview_commands  # ett fleet, ett checkpoint-advice

    overview_commands.register(sub, _command, _read, _console)


def _command(sub: Any, name: str, fn: Callable[[argparse.Namespace], int], **texts: Any) -> Any:
    """The subcommand ``name`` (``texts``: its help, description...): it takes ``--db`` and runs
    ``fn`` through :func:`_guard`."""
    parser = sub.add_parser(name, **texts)
    _db_arg(parser)
    parser.set_defaults(func=_guard(fn))
    return parser


_WINDOW = semconv.DEFAULT_WINDOW_S
_DEAD = semconv.PRESUMED_DEAD_WINDOWS
ENVIRONMENT = f"""\
environment:
  ETT_HOME            data folder (default ~/.local/share/ett; SQLite at $ETT_HOME/collector.db)
  ETT_DB_URL          database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB)
  ETT_MAX_BODY_BYTES  largest request body after decompression (default 32 MiB)
  ETT_WINDOW_S        train window (default {_WINDOW:g} s; {_DEAD} silent windows = presumed dead)
  ETT_LIVE_REFRESH_S  how often live jobs are recomputed (default 5 s)
  ETT_READ_WAIT_S     how long a read of a job with spans but no figures yet waits for its
                      first figures, then 503 (default 2 s); a job with figures is answered
                      at once, "fresh": false while newer spans await their recompute
  ETT_READ_THREADS    threads answering read requests at once per process (default 8;
                      ingest keeps its own 40)
  ETT_READ_CACHE      jobs whose last read answer each process keeps, checked against the
                      database (default 1000; 0 turns it off)
  ETT_READ_RECHECK_S  how long a kept answer, once checked against the database, is answered
                      without a new check (default 0.25 s; 0 checks on every read): this
                      process's own ingest and recomputes show at once, changes by another
                      worker process or collector (ett recompute) within this long
  ETT_WORKERS         server processes (default 1)
{_serve_security.SECURITY_ENVIRONMENT.rstrip()}
  ETT_RETAIN_SPANS    how long a job's raw spans are kept after it ended (default 30d; 'keep');
                      then its figures stay as stored and `ett recompute` refuses it
  ETT_RETAIN_RUNS     its folded heartbeat runs (default 90d), at least ETT_RETAIN_SPANS
  ETT_RETAIN_FIGURES  its figures, segments and fleet cells (default 400d)
  ETT_RETAIN_ALERTS   resolved alerts, after they resolved (default 400d)
  ETT_READ_ONLY       1: as --read-only (serve reads from a hot standby)
"""


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run ``fn`` on the database ``--db`` names; configuration and database errors become one
    line (``CliError``): exit 2 for what the user wrote, 1 for a database that fails at run time."""

    def run(args: argparse.Namespace) -> int:
        from . import _target

        try:
            if hasattr(args, "db"):
                args.target = _target.resolve(args.db)
            return fn(args)
        except ConfigError as exc:
            raise CliError(f"configuration error: {exc}") from exc
        except _target.TargetError as exc:
            raise CliError(exc.message, exc.exit_code) from None
        except Exception as exc:
            from sqlalchemy.exc import DBAPIError

            if isinstance(exc, DBAPIError) and hasattr(args, "target"):
                error = _target.connection_error(args.target, exc)
                raise CliError(error.message, error.exit_code) from None
            raise

    return run


def _open(args: argparse.Namespace, *, read: bool = False) -> Any:
    """A pipeline over the store ``args.target`` names: migrated, or for ``read`` commands
    only an existing database (never created; migrated only when its schema is older)."""
    from ..storage import Store
    from ..write.pipeline import Pipeline
    from . import _target

    if read:
        store = _target.open_for_reading(args.target)
    else:
        store = Store(args.target.url)
        store.upgrade()
    return Pipeline(store, window_s=_settings(args.target.url).window_s)


def _settings(db: str) -> Settings:
    return Settings(db_url=db)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..api._factory import build_app
    from ..storage import Store

    if args.workers is None:
        raw = os.environ.get("ETT_WORKERS") or "1"
        if not raw.isdigit():
            raise CliError(f"ETT_WORKERS={raw!r} is not a whole number: write e.g. ETT_WORKERS=2")
        args.workers = int(raw)
    if args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    settings = Settings(
        host=args.host, port=args.port, db_url=args.target.url,
        **({"token": args.token} if args.token else {}),
    )  # fmt: skip
    if args.read_only:
        settings = dataclasses.replace(settings, read_only=True)
    settings = _serve_security.apply(args, settings)
    sock = _bind(settings.host, settings.port)  # the address first: nothing created on a busy port
    _serve_security.warn_if_open(settings)  # once the address is known to be one
    try:
        if settings.read_only:
            _check_replica(Store(settings.db_url), args.target.shown)
        else:
            Store(settings.db_url).upgrade()  # fail fast on a bad database, before any worker
    except OSError as exc:  # its folder cannot be made: a file in the way, no permission
        where = f"{args.target.shown} (from {args.target.source})"
        raise CliError(
            f"cannot create the database {where}: {exc.strerror}: {exc.filename}"
        ) from None
    where = f"{_serve_security.scheme(settings)}://{settings.host}:{settings.port}"
    where += f" (db: {args.target.shown}"
    if args.workers == 1:
        config = uvicorn.Config(
            build_app(settings),
            log_level="warning",
            timeout_keep_alive=math.ceil(settings.keep_alive_s),
            **settings.tls.uvicorn_options(),
        )
        _announcing_server(config, f"ett collector listening on {where}, 1 worker)").run(
            sockets=[sock]
        )
        return 0
    sock.close()  # uvicorn's supervisor binds it again for its workers
    os.environ["ETT_DB_URL"] = settings.db_url
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="ett-metrics-")
    os.environ["ETT_HOST"], os.environ["ETT_PORT"] = settings.host, str(settings.port)
    if settings.token:
        os.environ["ETT_TOKEN"] = settings.token
    if settings.read_only:
        os.environ["ETT_READ_ONLY"] = "1"
    os.environ.update(_serve_security.worker_environment(settings))
    print(f"ett collector starting {args.workers} workers on {where})", flush=True)
    uvicorn.run(
        "ett_collector.api._factory:app_from_env", factory=True, workers=args.workers,
        host=settings.host, port=settings.port, log_level="warning",
        timeout_keep_alive=math.ceil(settings.keep_alive_s), **settings.tls.uvicorn_options(),
    )  # fmt: skip
    return 0


def _check_replica(store: Any, shown: str) -> None:
    """A read-only collector migrates nothing: its database must be at the newest schema (the
    primary's collector, or ``ett db upgrade`` on the primary, brings it there)."""
    from ..storage import head_revision

    revision, head = store.revision(), head_revision()
    if revision != head:
        raise CliError(
            f"--read-only: the database {shown} is at schema {revision or 'none'}, this ett "
            f"needs {head}: run `ett db upgrade` against the primary, then start again"
        )


def _bind(host: str, port: int) -> Any:
    """A listening socket on ``host:port``, or ``CliError`` (exit 2) saying why there is none."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CliError(f"--host {host!r} is not an address: write an IP such as 127.0.0.1 or "
                       f"0.0.0.0, or a resolvable host name ({exc})") from exc  # fmt: skip
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {port} is in use (another ett serve?): stop it or pass "
                           "--port N") from exc  # fmt: skip
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise CliError(f"port {port} needs privileges: pass --port above 1023") from exc
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}; pass --host with an "
                       "address of this machine (127.0.0.1, 0.0.0.0)") from exc  # fmt: skip
    sock.set_inheritable(True)
    return sock


def _announcing_server_class() -> Any:
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        """A uvicorn server that prints one line once it is listening."""

        def __init__(self, config: Any, line: str) -> None:
            super().__init__(config)
            self._line = line

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                print(self._line, flush=True)

    return AnnouncingServer


def _announcing_server(config: Any, line: str) -> Any:
    return _announcing_server_class()(config, line)


def _read(args: argparse.Namespace, fn: Callable[[Any], Any], render: Callable[[Any], None]) -> int:
    from ..read.query import NotFound, NotReady, Query, QueryError, RecomputeFailed

    target = args.target
    settings = _settings(target.url)  # no background worker here: wait for fresh figures
    query = Query(_open(args, read=True), read_wait_s=settings.read_wait_s, wait_fresh=True)
    try:
        data = fn(query)
    except NotFound as exc:
        where = f"{target.shown} (from {target.source})"
        hint = "pass --db URL or set ETT_HOME or ETT_DB_URL to search another database"
        print(f"ett {args.command}: {exc.args[0]} in {where}; {hint}", file=sys.stderr)
        return 1
    except (NotReady, RecomputeFailed) as exc:
        print(f"ett {args.command}: {exc.args[0]}", file=sys.stderr)
        return 1
    except QueryError as exc:
        print(f"ett {args.command}: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2))
    else:
        render(data)
    if isinstance(data, dict) and data.get("error"):
        note = f"{data['error']}; these figures are older"
        print(f"ett {args.command}: note: {note}", file=sys.stderr)
    if isinstance(data, list) and (pending := query.pending_jobs()):
        print(
            f"ett {args.command}: note: {pending} job(s) have spans newer than their figures; "
            "a running `ett serve` computes them in the background, `ett recompute` does it now",
            file=sys.stderr,
        )
    return 0


def _console() -> Any:
    return console()


def _upgrade(args: argparse.Namespace) -> int:
    _open(args)
    print("database schema is up to date")
    return 0


def _grant_readonly(args: argparse.Namespace) -> int:
    from ..storage import Store
    from ..storage._roles import RoleError, grant_readonly

    password = None
    if args.password_env:
        password = os.environ.get(args.password_env)
        if not password:
            raise CliError(f"--password-env {args.password_env}: that variable is not set")
    store = Store(args.target.url)
    store.upgrade()
    try:
        views = grant_readonly(store.engine, args.role, password)
    except RoleError as exc:
        raise CliError(str(exc)) from exc
    print(f"role {args.role} may log in and read {', '.join(views)} (read-only transactions)")
    return 0


def _prune(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from ett import semconv as sc

    from ..storage import Store
    from ..storage._retention import Policy, Retention

    settings = _settings(args.target.url)  # the ETT_RETAIN_* periods, checked
    store = Store(args.target.url)
    store.upgrade()
    quiet_s = sc.PRESUMED_DEAD_WINDOWS * settings.window_s
    retention = Retention(store.engine, Policy.of(settings.retain, quiet_s))
    if args.dry_run:
        print(f"would delete: {retention.plan().describe()}")
        return 0
    with Progress(transient=True, console=Console(stderr=True)) as progress:  # stdout: the answer
        task = progress.add_task("pruning", total=None)
        tally = retention.run(
            progress=lambda t: progress.update(task, description=f"deleted {t.rows():,} rows")
        )
    print(f"deleted: {tally.describe()}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from ..read.performance import with_performance
    from . import _render

    return _read(
        args,
        lambda q: with_performance(q, q.job(args.job_id)),
        lambda d: _render.print_report(d, _console()),
    )


def _jobs(args: argparse.Namespace) -> int:
    from . import _render

    return _read(
        args,
        lambda q: q.jobs(args.state, args.model, args.team, args.since, args.limit),
        lambda d: _render.print_jobs(d, _console()),
    )


def _lost_time(args: argparse.Namespace) -> int:
    from . import _render

    return _read(
        args,
        lambda q: q.lost_time(args.by, args.since, args.until),
        lambda d: _render.print_lost_time(d, args.by, _console()),
    )


def _recompute(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from ..storage._retention import pruned_jobs
    from ..write.pipeline import Outcome, pruned_reason

    pipeline = _open(args, read=True)  # an existing database: a mistyped path creates nothing
    if args.jobs:
        not_done = 0
        for j in args.jobs:
            outcome = pipeline.recompute_job(j)
            if outcome is Outcome.SAVED:
                continue
            not_done += 1
            if outcome is Outcome.FAILED:
                why = pipeline.store.recompute_failure(j)
                print(f"ett: the figures of job {j!r} could not be computed: {why}",
                      file=sys.stderr)  # fmt: skip
            elif outcome is Outcome.PRUNED:
                why = pruned_reason(pipeline.store.spans_pruned_at(j) or 0.0)
                print(f"ett: job {j!r} cannot be recomputed: {why}", file=sys.stderr)
            elif outcome is Outcome.BUSY:
                print(f"ett: job {j!r} is being recomputed by a collector now", file=sys.stderr)
            else:
                print(f"ett: no spans for job {j!r}", file=sys.stderr)
        if not_done < len(args.jobs):  # the errors above alone say that none was
            print(f"recomputed {len(args.jobs) - not_done} job(s)")
        return 1 if not_done else 0
    with Progress(transient=True) as progress:
        task = progress.add_task("recomputing jobs", total=None)
        n = pipeline.recompute_all(
            lambda done, total: progress.update(task, completed=done, total=total)
        )
    failed = pipeline.store.span_counts()["failed_jobs"]
    pruned = pruned_jobs(pipeline.store.engine)
    print(f"recomputed {n - failed - pruned} job(s)")
    if pruned:
        print(f"{pruned} job(s) kept their stored figures: their raw spans were pruned "
              "(ETT_RETAIN_SPANS)")  # fmt: skip
    if failed:
        print(f"ett: {failed} job(s) could not be computed; `ett report JOB` says why",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0
