"""The ``ett`` command: the collector service, its database, and the questions users ask.

Every read command goes through the same query layer as the HTTP API and the dashboards.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from .settings import DEFAULT_PORT, ConfigError, Settings, default_db_url

EPILOG = """\
examples:
  ett serve                                  # collector on 127.0.0.1:4318, SQLite in $ETT_HOME
  ett serve --db postgresql+psycopg://ett@127.0.0.1:5432/ett
  ett report my-job                          # one job's ETT, losses and checkpoint advice
  ett lost-time --by component --since 7d    # where the fleet's GPU hours went
  ett recompute                              # re-derive every job from the raw spans
environment: ETT_HOME, ETT_DB_URL, ETT_TOKEN, ETT_MAX_BODY_BYTES, ETT_WINDOW_S
"""


def _db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="database URL (default: $ETT_DB_URL, else SQLite at $ETT_HOME/collector.db)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ett",
        description="Effective Training Time (ETT%) observability: where a training job's "
        "wall-clock time goes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    serve = sub.add_parser(
        "serve",
        help="run the collector: OTLP/HTTP in, read API, /metrics",
        description="Run the collector: POST /v1/traces (OTLP/HTTP, protobuf or JSON, gzip), "
        "the read API under /api/v1/, /healthz and /metrics. Applies database migrations first.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 4318)")
    _db_arg(serve)
    serve.add_argument("--token", default=None, help="require this bearer token (or ETT_TOKEN)")
    serve.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("ETT_WORKERS", "1")),
        help="server processes sharing the database (default 1, or ETT_WORKERS); more "
        "processes decode OTLP in parallel",
    )

    db = sub.add_parser("db", help="database schema management")
    dbsub = db.add_subparsers(dest="db_command", metavar="ACTION")
    dbsub.required = True
    up = dbsub.add_parser("upgrade", help="apply Alembic migrations up to the latest schema")
    _db_arg(up)

    rec = sub.add_parser("recompute", help="re-derive jobs' segments and figures from raw spans")
    _db_arg(rec)
    rec.add_argument("jobs", nargs="*", metavar="JOB", help="job ids (default: every job)")

    rep = sub.add_parser("report", help="one job's figures (ETT-SPEC section 5)")
    rep.add_argument("job_id", metavar="JOB_ID")
    _db_arg(rep)
    rep.add_argument("--json", action="store_true", help="print the JSON object")

    jobs = sub.add_parser("jobs", help="list jobs, newest first")
    _db_arg(jobs)
    jobs.add_argument("--state", choices=["running", "presumed_dead", "completed", "failed"])
    jobs.add_argument("--model")
    jobs.add_argument("--team")
    jobs.add_argument("--since", help="jobs that ended since: 7d, 12h, ISO 8601 or unix seconds")
    jobs.add_argument("--limit", type=int, default=100)
    jobs.add_argument("--json", action="store_true")

    lost = sub.add_parser("lost-time", help="idle + failure seconds in a window, largest first")
    _db_arg(lost)
    lost.add_argument("--by", default="component", choices=["component", "job", "model", "team"])
    lost.add_argument("--since", default=None, help="window start: 7d, 12h, ISO 8601, unix s")
    lost.add_argument("--until", default=None, help="window end (default: now)")
    lost.add_argument("--json", action="store_true")

    sub.add_parser(
        "train", help="run the instrumented TorchRec trainer (see `ett train -h`)", add_help=False
    )
    sub.add_parser(
        "publish", help="standalone model publishing job (see `ett publish -h`)", add_help=False
    )
    return parser


def _open(db: str | None) -> Any:
    """A pipeline over the store at ``db`` (migrated)."""
    from .pipeline import Pipeline
    from .storage import Store

    store = Store(db or default_db_url())
    store.upgrade()
    return Pipeline(store, window_s=Settings(db_url=db or default_db_url()).window_s)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .api._factory import build_app
    from .storage import Store

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
    from .query import NotFound, Query, QueryError

    query = Query(_open(args.db))
    try:
        data = fn(query)
    except NotFound as exc:
        print(f"ett: {exc.args[0]}", file=sys.stderr)
        return 1
    except QueryError as exc:
        print(f"ett: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2))
    else:
        render(data)
    return 0


def _console() -> Any:
    from rich.console import Console

    return Console()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ett`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("train", "publish"):
        return _delegate(argv[0], argv[1:])
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except ConfigError as exc:
        print(f"ett: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from . import _render

    if args.command == "serve":
        return _serve(args)
    if args.command == "db":
        _open(args.db)
        print("database schema is up to date")
        return 0
    if args.command == "recompute":
        return _recompute(args)
    if args.command == "report":
        return _read(
            args, lambda q: q.job(args.job_id), lambda d: _render.print_report(d, _console())
        )
    if args.command == "jobs":
        return _read(
            args,
            lambda q: q.jobs(args.state, args.model, args.team, args.since, args.limit),
            lambda d: _render.print_jobs(d, _console()),
        )
    if args.command == "lost-time":
        return _read(
            args,
            lambda q: q.lost_time(args.by, args.since, args.until),
            lambda d: _render.print_lost_time(d, args.by, _console()),
        )
    raise AssertionError(args.command)


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


def _delegate(command: str, argv: list[str]) -> int:
    """``ett train`` and ``ett publish`` live in the trainer package (torch is imported there)."""
    try:
        if command == "train":
            from trainer.train import main as run
        else:
            from trainer.publish import main as run
    except ImportError as exc:
        print(
            f"ett {command}: the trainer needs torch and torchrec ({exc}); "
            "run `make demo` or `make test`, which install them into .venv",
            file=sys.stderr,
        )
        return 2
    result: int = run(argv)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
