"""The collector's ``ett`` subcommands: the service, its database, and the questions users ask.

Every read command goes through the same query layer as the HTTP API and the dashboards.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from cli import CliError
from instrument import semconv

from .domain.model import GroupBy, JobState
from .settings import DEFAULT_PORT, ConfigError, Settings, default_db_url


def _db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="database URL (default: $ETT_DB_URL, else SQLite at $ETT_HOME/collector.db)",
    )


def register(sub: Any) -> None:
    """Add ``serve``, ``db``, ``recompute``, ``report``, ``jobs`` and ``lost-time`` to ``ett``."""
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
    serve.add_argument("--token", default=None, help="require this bearer token (or ETT_TOKEN)")
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
    up = dbsub.add_parser("upgrade", help="apply Alembic migrations up to the latest schema")
    _db_arg(up)
    up.set_defaults(func=_guard(_upgrade))
    ro = dbsub.add_parser(
        "grant-readonly",
        help="create or update a PostgreSQL role that may only read the ett_v1_* views "
        "(for Grafana)",
    )
    ro.add_argument("role", metavar="ROLE", help="role name, e.g. ett_grafana")
    _db_arg(ro)
    ro.add_argument(
        "--password-env", metavar="VAR", default=None,
        help="set the role's password from this environment variable (never on the command line)",
    )  # fmt: skip
    ro.set_defaults(func=_guard(_grant_readonly))

    rec = sub.add_parser("recompute", help="re-derive jobs' segments and figures from raw spans")
    _db_arg(rec)
    rec.add_argument("jobs", nargs="*", metavar="JOB", help="job ids (default: every job)")
    rec.set_defaults(func=_guard(_recompute))

    rep = sub.add_parser(
        "report",
        help="one job's figures (ETT-SPEC section 5)",
        description="One job's ETT, idle and failure shares, time to start and to recover, "
        "unsaved work, checkpoint blocking, lost time by component and checkpoint advice.",
    )
    rep.add_argument("job_id", metavar="JOB_ID", help="the job's ett.job.id (see `ett jobs`)")
    _db_arg(rep)
    rep.add_argument("--json", action="store_true", help="print the read API's JSON object")
    rep.set_defaults(func=_guard(_report))

    jobs = sub.add_parser("jobs", help="list jobs, newest first")
    _db_arg(jobs)
    jobs.add_argument(
        "--state", choices=[s.value for s in JobState], help="only jobs in this state"
    )
    jobs.add_argument("--model", help="only this model family (ett.model)")
    jobs.add_argument("--team", help="only this team (ett.team)")
    jobs.add_argument(
        "--since", help="jobs that ended since: 7d, 12h, ISO 8601 or unix seconds (default: all)"
    )
    jobs.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    jobs.add_argument("--json", action="store_true", help="print a JSON list")
    jobs.set_defaults(func=_guard(_jobs))

    lost = sub.add_parser("lost-time", help="idle + failure seconds in a window, largest first")
    _db_arg(lost)
    lost.add_argument(
        "--by",
        default=GroupBy.COMPONENT.value,
        choices=[g.value for g in GroupBy],
        help="group by (default component)",
    )
    lost.add_argument(
        "--since", default=None, help="window start: 7d, 12h, ISO 8601, unix s (default: all)"
    )
    lost.add_argument("--until", default=None, help="window end (default: now)")
    lost.add_argument("--json", action="store_true", help="print a JSON list")
    lost.set_defaults(func=_guard(_lost_time))


_WINDOW = semconv.DEFAULT_WINDOW_S
_DEAD = semconv.PRESUMED_DEAD_WINDOWS
ENVIRONMENT = f"""\
environment:
  ETT_HOME            data folder (default ~/.local/share/ett; SQLite at $ETT_HOME/collector.db)
  ETT_DB_URL          database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB)
  ETT_TOKEN           bearer token required on ingest and reads
  ETT_MAX_BODY_BYTES  largest request body after decompression (default 32 MiB)
  ETT_WINDOW_S        train window (default {_WINDOW:g} s; {_DEAD} silent windows = presumed dead)
  ETT_LIVE_REFRESH_S  how often live jobs are recomputed (default 5 s)
  ETT_READ_WAIT_S     how long a read of one job waits for its newer spans (default 5 s)
  ETT_WORKERS         server processes (default 1)
"""


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run ``fn``, turning the collector's configuration errors into ``CliError``."""

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except ConfigError as exc:
            raise CliError(f"configuration error: {exc}") from exc

    return run


def _open(db: str | None) -> Any:
    """A pipeline over the store at ``db`` (migrated)."""
    from .pipeline import Pipeline
    from .storage import Store

    store = Store(db or default_db_url())
    store.upgrade()
    return Pipeline(store, window_s=_settings(db).window_s)


def _settings(db: str | None) -> Settings:
    return Settings(db_url=db or default_db_url())


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .api._factory import build_app
    from .storage import Store

    if args.workers is None:
        args.workers = int(os.environ.get("ETT_WORKERS") or "1")
    if args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    settings = Settings(
        host=args.host, port=args.port, db_url=args.db or default_db_url(),
        **({"token": args.token} if args.token else {}),
    )  # fmt: skip
    Store(settings.db_url).upgrade()  # fail fast on a bad database, before any worker starts
    print(
        f"ett collector listening on http://{settings.host}:{settings.port} "
        f"(db: {_redact(settings.db_url)}, {args.workers} worker(s))",
        flush=True,
    )
    if args.workers == 1:
        uvicorn.run(build_app(settings), host=settings.host, port=settings.port,
                    log_level="warning")  # fmt: skip
        return 0
    os.environ["ETT_DB_URL"] = settings.db_url
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="ett-metrics-")
    os.environ["ETT_HOST"], os.environ["ETT_PORT"] = settings.host, str(settings.port)
    if settings.token:
        os.environ["ETT_TOKEN"] = settings.token
    uvicorn.run(
        "collector.api._factory:app_from_env", factory=True, workers=args.workers,
        host=settings.host, port=settings.port, log_level="warning",
    )  # fmt: skip
    return 0


def _redact(url: str) -> str:
    """A database URL without its password."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _read(args: argparse.Namespace, fn: Callable[[Any], Any], render: Callable[[Any], None]) -> int:
    from .query import NotFound, NotReady, Query, QueryError

    query = Query(_open(args.db), read_wait_s=_settings(args.db).read_wait_s)
    try:
        data = fn(query)
    except (NotFound, NotReady) as exc:
        print(f"ett: {exc.args[0]}", file=sys.stderr)
        return 1
    except QueryError as exc:
        print(f"ett: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2))
    else:
        render(data)
    if isinstance(data, list) and (pending := query.pending_jobs()):
        print(
            f"ett: note: {pending} job(s) have spans newer than their figures; a running "
            "`ett serve` computes them in the background, `ett recompute` does it now",
            file=sys.stderr,
        )
    return 0


def _console() -> Any:
    from rich.console import Console

    return Console()


def _upgrade(args: argparse.Namespace) -> int:
    _open(args.db)
    print("database schema is up to date")
    return 0


def _grant_readonly(args: argparse.Namespace) -> int:
    from .storage import Store
    from .storage._roles import RoleError, grant_readonly

    password = None
    if args.password_env:
        password = os.environ.get(args.password_env)
        if not password:
            raise CliError(f"--password-env {args.password_env}: that variable is not set")
    store = Store(args.db or default_db_url())
    store.upgrade()
    try:
        views = grant_readonly(store.engine, args.role, password)
    except RoleError as exc:
        raise CliError(str(exc)) from exc
    print(f"role {args.role} may log in and read {', '.join(views)} (read-only transactions)")
    return 0


def _report(args: argparse.Namespace) -> int:
    from . import _render

    return _read(args, lambda q: q.job(args.job_id), lambda d: _render.print_report(d, _console()))


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

    pipeline = _open(args.db)
    if args.jobs:
        missing = [j for j in args.jobs if not pipeline.recompute(j)]
        for j in missing:
            print(f"ett: no spans for job {j!r}", file=sys.stderr)
        print(f"recomputed {len(args.jobs) - len(missing)} job(s)")
        return 1 if missing else 0
    with Progress(transient=True) as progress:
        task = progress.add_task("recomputing jobs", total=None)
        n = pipeline.recompute_all(
            lambda done, total: progress.update(task, completed=done, total=total)
        )
    print(f"recomputed {n} job(s)")
    return 0
