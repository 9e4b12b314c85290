"""``ett db upgrade``, ``ett db grant-readonly``, ``ett db prune`` and ``ett recompute``: the
database's schema, its read-only role for Grafana, its retention, and the figures re-derived
from the raw spans."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from . import _target
from ._runner import PRUNE_ENVIRONMENT, CommandError, Kit, open_pipeline, settings_for
from ._upgrades import describe, run_upgrade


def register(sub: Any, kit: Kit) -> None:
    """Add ``db`` (``upgrade``, ``grant-readonly``, ``prune``) and ``recompute`` to ``ett``."""
    db = sub.add_parser(
        "db",
        help="database schema management",
        description="The collector's database: its schema (upgrade), the read-only role "
        "Grafana logs in as (grant-readonly) and its retention (prune). Each ACTION takes "
        "--db; `ett db ACTION -h` for its options.",
    )
    dbsub = db.add_subparsers(dest="db_command", metavar="ACTION")
    dbsub.required = True
    kit.command(
        dbsub,
        "upgrade",
        _upgrade,
        help="apply Alembic migrations up to the latest schema",
        description="Apply the Alembic migrations the database lacks, oldest first, up to the "
        "latest schema, and say which it applied; a SQLite file that does not exist yet is "
        "created at the latest schema. `ett serve` does the same when it starts.",
    )
    ro = kit.command(
        dbsub,
        "grant-readonly",
        _grant_readonly,
        help="create or update a PostgreSQL role that may only read the ett_v1_* views "
        "(for Grafana)",
        description="Create the PostgreSQL role ROLE, or update it, so that it may log in and "
        "read the ett_v1_* views (the SQL interface of docs/grafana.md) and nothing else, in "
        "read-only transactions: the login of Grafana's PostgreSQL data source. The database "
        "is migrated first. PostgreSQL only: SQLite has no roles.",
    )
    ro.add_argument("role", metavar="ROLE", help="role name, e.g. ett_grafana")
    ro.add_argument(
        "--password-env",
        metavar="VAR",
        default=None,
        help="set the role's password from this environment variable (never on the command line)",
    )
    prune = kit.command(
        dbsub,
        "prune",
        _prune,
        help="delete what the ETT_RETAIN_* periods let go (the service does it by itself)",
        description="Delete the raw spans, heartbeat runs, job figures and resolved alerts "
        "older than their retention (ETT_RETAIN_SPANS, ETT_RETAIN_RUNS, ETT_RETAIN_FIGURES, "
        "ETT_RETAIN_ALERTS), in small batches. A running job is never pruned; a job whose raw "
        "spans are gone keeps its figures, segments and fleet cells.",
        epilog=PRUNE_ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say what would be deleted; delete nothing"
    )
    rec = kit.command(
        sub,
        "recompute",
        _recompute,
        help="re-derive jobs' segments and figures from raw spans",
        description="Re-derive the segments and figures of the named jobs (default: every "
        "job) from their stored raw spans, as the collector computed them, with today's "
        "definitions; jobs whose raw spans retention removed keep their stored figures.",
    )
    rec.add_argument("jobs", nargs="*", metavar="JOB", help="job ids (default: every job)")


def _refuse_a_read_only_upgrade(target: Any, store: Any) -> None:
    """Refuse (exit 1) to upgrade a read-only PostgreSQL database at an older schema (or none):
    it failed at its first statement with the driver's "cannot execute ALTER TABLE in a
    read-only transaction". At the newest schema it is up to date; at one no ett migration
    names, the upgrade itself says so."""
    from ..storage._migrate import applied_between, head_revision

    head = head_revision()
    revision = store.revision()
    if revision == head or (revision is not None and revision not in applied_between(None, head)):
        return
    _target.require_writable(target, store, "`ett db upgrade`")


def _upgrade(args: argparse.Namespace) -> int:
    from ..storage import Store

    path = args.target.sqlite_path
    created = path is not None and not path.exists()
    if path is not None:
        _require_sqlite_place(args.target, path)  # before anything is created
    try:
        store = Store(args.target.url)
        try:
            if path is None:  # a hot standby: refused in one line before a statement fails
                _refuse_a_read_only_upgrade(args.target, store)
            applied = run_upgrade(store, "ett db upgrade")[1]
        finally:
            store.close()
    except OSError as exc:  # a folder of the default place that cannot be made
        raise CommandError(
            f"cannot create the database {args.target.shown} (from {args.target.source}): "
            f"{exc.strerror}: {exc.filename}",
            exit_code=1,
        ) from None
    if created:
        print(f"created {args.target.shown}")
    elif applied:  # it said "up to date" right after migrating 0009 and 0010
        print(f"applied migration(s) {', '.join(applied)}: the schema is now {applied[-1]}")
    else:
        print("database schema is up to date")
    return 0


def _require_sqlite_place(target: Any, path: Path) -> None:
    """Refuse, before anything is created, a SQLite file whose folder is missing (exit 2: a
    typo'd ``--db /tmp/x/nope/x.db`` made the folders and a new database, and "succeeded"),
    unless it is the default place (``ETT_HOME``), made as ``ett serve`` makes it; and a file
    or folder this user may not write (exit 1), in the words of ``ett jobs``."""
    where = f"{target.shown} (from {target.source})"
    folder = path.parent
    if not folder.exists():
        if target.source not in ("--db", "ETT_DB_URL"):
            return  # the data folder: made on first use
        raise CommandError(
            f"the folder {folder} of the database {where} does not exist: check the path, "
            "or create the folder first to start a new database there"
        )
    if not folder.is_dir():
        raise CommandError(f"cannot create the database {where}: {folder} is not a folder")
    what = "create" if not path.exists() else "upgrade"
    if not os.access(folder, os.W_OK):
        raise CommandError(
            f"cannot {what} the database {where}: its folder {folder} cannot be written (a "
            "read-only mount?), and a SQLite database needs its -wal and -shm files beside it: "
            "pass a --db in a folder you may write",
            exit_code=1,
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise CommandError(
            f"cannot upgrade the database {where}: {path} cannot be written by this user; run "
            "`ett db upgrade` as its owner",
            exit_code=1,
        )


def _grant_readonly(args: argparse.Namespace) -> int:
    from sqlalchemy.engine import make_url

    from ..storage import Store
    from ..storage._roles import RoleError, grant_readonly, readonly_statements

    if make_url(args.target.url).get_backend_name() == "sqlite":  # refused before it is touched
        raise CommandError(
            f"{args.target.shown} is a SQLite file, and SQLite has no roles: point read-only "
            "readers at the file with 'file:PATH?mode=ro' (or a copy); `ett db grant-readonly` "
            "is for PostgreSQL"
        )
    try:
        readonly_statements(args.role, "", "", None)  # the role's name, checked first
    except RoleError as exc:
        raise CommandError(str(exc)) from exc
    password = None
    if args.password_env:
        password = os.environ.get(args.password_env)
        if not password:
            raise CommandError(f"--password-env {args.password_env}: that variable is not set")
    store = Store(args.target.url)
    try:
        said = describe(*run_upgrade(store, "ett db grant-readonly"))
        if said is not None:  # it migrated 0010 to 0011 without a word
            print(f"ett db grant-readonly: {args.target.shown}: {said}", file=sys.stderr)
        views = grant_readonly(store.engine, args.role, password)
    except RoleError as exc:
        raise CommandError(str(exc)) from exc
    finally:
        store.close()
    print(f"role {args.role} may log in and read {', '.join(views)} (read-only transactions)")
    return 0


def _prune(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from ett import semconv as sc

    from ..storage._retention import Policy, Retention

    settings = settings_for(args.target.url)  # the ETT_RETAIN_* periods, checked
    writing = None if args.dry_run else "`ett db prune`"
    store = _target.open_for_reading(args.target, writing)  # a mistyped path creates nothing
    if not args.dry_run:
        _target.require_writable(args.target, store, "`ett db prune`")
    quiet_s = sc.PRESUMED_DEAD_WINDOWS * settings.window_s
    retention = Retention(
        store.engine,
        Policy.of(settings.retain, quiet_s),
        raw_window_retention_s=settings.raw_window_retention_s,  # the kept loop figures' line
    )
    if args.dry_run:
        print(f"would delete: {retention.plan().describe()}")
        return 0
    with Progress(transient=True, console=Console(stderr=True)) as progress:  # stdout: the answer
        task = progress.add_task("pruning", total=None)
        tally = retention.run(
            progress=lambda t: progress.update(task, description=f"deleted {t.rows():,} rows")
        )
    if tally.busy:  # another pass holds the database's prune lock: this one deleted nothing
        print(f"ett db prune: deleted {tally.describe()}", file=sys.stderr)
        return 1
    print(f"deleted: {tally.describe()}")
    return 0


def _recompute(args: argparse.Namespace) -> int:
    # an existing database: a mistyped path creates nothing
    pipeline = open_pipeline(args, read=True, writing="`ett recompute`")
    _target.require_writable(args.target, pipeline.store, "`ett recompute`")
    if args.jobs:
        return _recompute_jobs(pipeline, args.jobs)
    return _recompute_all(pipeline)


def _recompute_jobs(pipeline: Any, jobs: list[str]) -> int:
    """Recompute the named jobs; one line on stderr for each that could not be (exit 1)."""
    from ..write.pipeline import Outcome, pruned_reason

    not_done = 0
    for j in jobs:
        outcome = pipeline.recompute_job(j)
        if outcome is Outcome.SAVED:
            continue
        not_done += 1
        if outcome is Outcome.FAILED:
            why = pipeline.store.recompute_failure(j) or "the error is logged above"
            print(
                f"ett recompute: the figures of job {j!r} could not be computed: {why}",
                file=sys.stderr,
            )
        elif outcome is Outcome.PRUNED:
            why = pruned_reason(pipeline.store.spans_pruned_at(j) or 0.0)
            print(f"ett recompute: job {j!r} cannot be recomputed: {why}", file=sys.stderr)
        elif outcome is Outcome.BUSY:
            print(
                f"ett recompute: job {j!r} is being recomputed by a collector now", file=sys.stderr
            )
        else:
            print(f"ett recompute: no spans for job {j!r}", file=sys.stderr)
    if not_done < len(jobs):  # the errors above alone say that none was
        print(f"recomputed {len(jobs) - not_done} job(s)")
    return 1 if not_done else 0


def _recompute_all(pipeline: Any) -> int:
    """Recompute every job, with a progress bar; exit 1 when some could not be computed."""
    from rich.progress import Progress

    from ..storage._retention import pruned_jobs

    with Progress(transient=True) as progress:
        task = progress.add_task("recomputing jobs", total=None)
        n = pipeline.recompute_all(
            lambda done, total: progress.update(task, completed=done, total=total)
        )
    failed = pipeline.store.span_counts()["failed_jobs"]
    pruned = pruned_jobs(pipeline.store.engine)
    print(f"recomputed {n - failed - pruned} job(s)")
    if pruned:
        print(
            f"{pruned} job(s) kept their stored figures: their raw spans were pruned "
            "(ETT_RETAIN_SPANS)"
        )
    if failed:
        print(
            f"ett: {failed} job(s) could not be computed; `ett report JOB` says why",
            file=sys.stderr,
        )
        return 1
    return 0
