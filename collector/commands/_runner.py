"""What the collector's commands share: the environment they document, the pipeline and the
query they open on ``--db``, the runner of read questions, and the pieces the commands module
hands in (:class:`Kit`).

Only ``ett_collector.commands`` itself imports ``ett_cli`` (the layer rule): the modules here
raise :class:`CommandError`, which its guard turns into ``ett_cli.CliError``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ett import semconv

from ..settings import Settings
from . import _serve_security

Run = Callable[[argparse.Namespace], int]
"""A command: its parsed arguments in, its exit code out."""

_WINDOW = semconv.DEFAULT_WINDOW_S
_DEAD = semconv.PRESUMED_DEAD_WINDOWS
_DATABASE = """\
  ETT_HOME            data folder (default ~/.local/share/ett; SQLite at $ETT_HOME/collector.db)
  ETT_DB_URL          database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB)
"""
_RETENTION = """\
  ETT_RETAIN_SPANS    how long a job's raw spans are kept after it ended (default 30d; 'keep');
                      then its figures stay as stored and `ett recompute` refuses it
  ETT_RETAIN_RUNS     its folded heartbeat runs (default 90d), at least ETT_RETAIN_SPANS
  ETT_RETAIN_FIGURES  its figures, segments and fleet cells (default 400d), at least
                      ETT_RETAIN_RUNS
  ETT_RETAIN_ALERTS   resolved alerts, after they resolved (default 400d)
"""
ENVIRONMENT = f"""\
environment:
{_DATABASE.rstrip()}
  ETT_MAX_BODY_BYTES  largest request body after decompression (default 32 MiB)
  ETT_MAX_INFLIGHT_BYTES
                      decoded bytes of trace requests ingested at once per process, at
                      least ETT_MAX_BODY_BYTES; past it 429 with Retry-After (default 64 MiB)
  ETT_WINDOW_S        train window (default {_WINDOW:g} s; {_DEAD} silent windows = presumed dead)
  ETT_LIVE_REFRESH_S  how often live jobs are recomputed (default 5 s)
  ETT_RAW_WINDOW_RETENTION_S
                      how long heartbeat windows stay raw before they are folded into runs,
                      on each job's own span clock (default 600 s; 'keep': never folded). A
                      job's windows are folded when one of its batches ends 300 s of that
                      clock past its last fold, so each stays raw this long to this + 300 s;
                      0: folded as they arrive, never stored raw
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
  ETT_KEEP_ALIVE_S    how long an idle HTTP connection stays open (default 75 s)
  ETT_HEADER_TIMEOUT_S
                      how long a request's head may take to arrive (and a new connection's
                      first request), then the connection is closed (default 30 s)
  ETT_BODY_TIMEOUT_S  how long a trace request's body may take to arrive, then 408 and the
                      connection closed (default 30 s)
  ETT_SEND_TIMEOUT_S  how long an answer may wait on a client that reads none of it, then the
                      connection is dropped (default 30 s)
  ETT_MAX_CLOCK_AHEAD_S
                      how far past the collector's clock a span may end; a later one (a
                      sender's clock ahead, a bad time) is refused alone (default 600 s)
  ETT_WORKERS         server processes (default 1)
  ETT_HOST, ETT_PORT  not read by `ett serve`: --host and --port set them for its worker
                      processes (ETT_PORT=4396 ett serve still listens on 4318)
  ETT_SERVE_PARENT_PID
                      not read by `ett serve`: set for its worker processes, which stop
                      when that process is gone
  ETT_LOG_LEVEL       the service's log lines on stderr: DEBUG, INFO (default), WARNING, ERROR
{_serve_security.SECURITY_ENVIRONMENT.rstrip()}
{_RETENTION.rstrip()}
  ETT_READY_MIN_FREE_BYTES
                      free bytes below which /readyz says a SQLite collector is not ready
                      (default 1048576; 0: no check)
  ETT_PRUNE_ON_LOW_DISK
                      1: while a SQLite disk is short of space, prune ended jobs' raw spans,
                      then their runs, oldest first (default off)
  ETT_READ_ONLY       1: as --read-only (serve reads from a hot standby)
  ETT_READY_MAX_LAG_S how far behind its primary a --read-only collector's standby may be
                      and /readyz still answer 200 (default 300 s; 0: no check)
  ETT_METRICS_CACHE_S how long a scrape's fleet metrics on /metrics are reused (default 5 s)
  ETT_METRICS_MAX_PAIRS
                      the most (model, team) pairs, and models, /metrics labels; the rest
                      are summed into model="__other__" (default 200)
  the alert options above name their own variables (ETT_ALERT_RULES, ...)

examples:
  ett serve                                   # 127.0.0.1:4318, SQLite at $ETT_HOME/collector.db
  ett serve --port 4396 --db /tmp/ett.db      # another port and SQLite file
  ett serve --workers 2 --db postgresql+psycopg://ett@127.0.0.1:5432/ett
  ett serve --host 0.0.0.0 --write-tokens write.tokens --read-tokens read.tokens \\
    --tls-cert collector.pem --tls-key collector.key    # beyond loopback: tokens and HTTPS
  ett serve --alertmanager http://127.0.0.1:9093        # send the alerts it raises
"""
"""The epilog of ``ett serve``: every variable the service reads, then examples."""

PRUNE_ENVIRONMENT = f"""\
environment:
{_DATABASE.rstrip()}
{_RETENTION.rstrip()}
  ETT_WINDOW_S        train window (default {_WINDOW:g} s): a job is pruned only once it has
                      ended and no span has come for it for {_DEAD} windows
"""
"""The epilog of ``ett db prune``: the variables it reads."""


class CommandError(Exception):
    """A user-facing failure of a command, in one line: ``exit_code`` 2 for what the user wrote
    (the default), 1 for a failure at run time (the commands module makes it a ``CliError``)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True, slots=True)
class Kit:
    """The shared pieces each command module's ``register(sub, kit)`` is handed.

    ``command(sub, name, run, **texts)`` adds a subcommand (``texts``: its help, description...)
    that takes ``--db`` and runs ``run`` through ``guard``; ``guard(run)`` makes configuration
    and database errors one line; ``console()`` is the ``rich`` console of ``ett``.
    """

    command: Callable[..., Any]
    guard: Callable[[Run], Run]
    console: Callable[[], Any]


def settings_for(db: str) -> Settings:
    """The collector's settings (``ETT_*``) for the database ``db``."""
    return Settings(db_url=db)


def open_pipeline(
    args: argparse.Namespace, *, read: bool = False, writing: str | None = None
) -> Any:
    """A pipeline over the store ``args.target`` names: migrated, or for ``read`` commands
    only an existing database (never created nor migrated; ``writing``: the command that will
    write to it, named when a read-only one is at an older schema)."""
    from ..storage import Store
    from ..write.pipeline import Pipeline
    from . import _target

    if read:
        store = _target.open_for_reading(args.target, writing)
    else:
        store = Store(args.target.url)
        store.upgrade()
    return Pipeline(store, window_s=settings_for(args.target.url).window_s)


def read(args: argparse.Namespace, fn: Callable[[Any], Any], render: Callable[[Any], None]) -> int:
    """Answer ``fn(query)`` through the query layer (waiting for fresh figures, as no background
    worker runs here) and print it with ``render`` (``--json``: as JSON); a job not found, not
    ready or not computable exits 1 with one line, a bad question 2."""
    from ..read import query as q

    target = args.target
    settings = settings_for(target.url)  # no background worker here: wait for fresh figures
    pipeline = open_pipeline(args, read=True)
    pipeline.read_only = _read_only(args, pipeline.store)  # then it never tries to recompute
    query = q.Query(pipeline, read_wait_s=settings.read_wait_s, wait_fresh=True)
    try:
        data = fn(query)
    except q.NotFound as exc:
        where = f"{target.shown} (from {target.source})"
        hint = "pass --db URL or set ETT_HOME or ETT_DB_URL to search another database"
        if target.source == "--db":  # the database was named: the id is what to check
            hint = "`ett jobs` lists the jobs there, or pass the --db of another database"
        asked = getattr(args, "job_id", None)
        near = query.store.similar_job_ids(asked) if isinstance(asked, str) and asked else []
        if near:
            hint = f"did you mean {' or '.join(map(repr, near))}? " + hint
        print(f"ett {args.command}: {exc.args[0]} in {where}; {hint}", file=sys.stderr)
        return 1
    except (q.NotReady, q.NotComputedHere, q.RecomputeFailed) as exc:
        print(f"ett {args.command}: {exc.args[0]}", file=sys.stderr)
        return 1
    except q.QueryError as exc:
        print(f"ett {args.command}: {exc}", file=sys.stderr)
        return 2
    _print(args, data, render)
    _notes(args, data, query)
    return 0


def _read_only(args: argparse.Namespace, store: Any) -> bool:
    """Whether every write to this database would be refused (a hot standby, read-only
    sessions): a read there serves the stored figures and never tries to recompute."""
    from sqlalchemy.exc import DBAPIError

    from ..storage._replica import read_only_reason
    from . import _target

    try:
        return read_only_reason(store.engine) is not None
    except DBAPIError as exc:
        raise _target.connection_error(args.target, exc) from exc


def _print(args: argparse.Namespace, data: Any, render: Callable[[Any], None]) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2))
    else:
        render(data)


def _notes(args: argparse.Namespace, data: Any, query: Any) -> None:
    """Say on stderr when the figures shown are older than the spans."""
    if isinstance(data, dict) and data.get("error"):
        note = f"{data['error']}; these figures are older"
        print(f"ett {args.command}: note: {note}", file=sys.stderr)
    elif query.pipeline.read_only and isinstance(data, dict) and data.get("fresh") is False:
        print(
            f"ett {args.command}: note: the database is read-only, so these are its stored "
            "figures: the job's newer spans are not included until the primary's collector "
            "computes them",
            file=sys.stderr,
        )
    if isinstance(data, dict) and isinstance(job_id := data.get("job_id"), str):
        from ..write.pipeline import pruned_reason

        pruned_at = query.store.spans_pruned_at(job_id)
        if pruned_at is not None:
            why = pruned_reason(pruned_at).replace("its ", "the job's ", 1)
            print(f"ett {args.command}: note: {why}", file=sys.stderr)
    if isinstance(data, list) and (pending := query.pending_jobs()):
        how = "a running `ett serve` computes them in the background, `ett recompute` does it now"
        if query.pipeline.read_only:
            how = "the database is read-only: the primary's collector computes them"
        note = f"{pending} job(s) have spans newer than their figures; {how}"
        print(f"ett {args.command}: note: {note}", file=sys.stderr)
