"""``ett report``, ``ett jobs`` and ``ett lost-time``: the questions about jobs, through the same
query layer as ``GET /api/v1/jobs/{id}``, ``/api/v1/jobs`` and ``/api/v1/lost-time``
(``--json`` prints the object the API answers)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from ..domain.model import GroupBy
from ._options import WHEN, add_filters, add_json, add_state, add_window
from ._runner import Kit, read


def register(sub: Any, kit: Kit) -> None:
    """Add ``report``, ``jobs`` and ``lost-time`` to ``ett``."""
    _add_report(kit.command(sub, "report", partial(_report, kit.console), **REPORT))
    _add_jobs(kit.command(sub, "jobs", partial(_jobs, kit.console), **JOBS))
    _add_lost_time(kit.command(sub, "lost-time", partial(_lost_time, kit.console), **LOST_TIME))


def _report(console: Callable[[], Any], args: argparse.Namespace) -> int:
    from ..read.performance import with_performance
    from . import _render

    # --json: the API's object exactly; the table also shows "Inside the loop" of a job whose
    # stored figures hold no performance block yet
    return read(
        args,
        (lambda q: q.job(args.job_id))
        if args.json
        else (lambda q: with_performance(q, q.job(args.job_id))),
        lambda d: _render.print_report(d, console()),
    )


def _jobs(console: Callable[[], Any], args: argparse.Namespace) -> int:
    from . import _render

    def render(rows: list[Any]) -> None:
        _render.print_jobs(rows, console())
        if not rows:  # the header alone says nothing: say that no job matched
            given = [f"--{k} {v}" for k, v in vars(args).items() if k in _FILTERS and v]
            where = f" ({' '.join(given)})" if given else ""
            print(f"ett jobs: no job matches{where}", file=sys.stderr)
        elif len(rows) == args.limit:  # there may be more: say where the list was cut
            print(f"ett jobs: the {args.limit} newest shown; --limit N shows more", file=sys.stderr)

    return read(
        args, lambda q: q.jobs(args.state, args.model, args.team, args.since, args.limit), render
    )


_FILTERS = ("state", "model", "team", "since")
"""The options of ``ett jobs`` that narrow the list."""


def _lost_time(console: Callable[[], Any], args: argparse.Namespace) -> int:
    from ..read.query import parse_instant
    from . import _render

    span: list[tuple[float | None, float]] = []

    def ask(q: Any) -> Any:
        now = q.clock()  # the window as the query reads it: relative times from this now
        rows = q.lost_time(args.by, args.since, args.until)
        until = parse_instant(args.until, now)
        span.append((parse_instant(args.since, now), now if until is None else until))
        return rows

    return read(args, ask, lambda d: _render.print_lost_time(d, args.by, console(), span[0]))


REPORT = {
    "help": "one job's figures (ETT-SPEC section 5)",
    "description": "One job's ETT, idle and failure shares, time to start and to recover, "
    "unsaved work, checkpoint blocking, lost time by component and checkpoint advice. "
    "When the job has spans newer than its figures, this computes them and waits for "
    "them up to ETT_READ_WAIT_S (default 2 s), then prints the stored figures marked "
    "'newer spans not included yet' (the HTTP API never waits: it answers the stored "
    "figures with fresh: false). On a read-only database (a hot standby) it never computes: "
    "it prints the stored figures and says so.",
}
JOBS = {
    "help": "list jobs, newest first",
    "description": "List jobs, newest first, with their ETT, idle and failure shares. Job ids "
    "are never cut; piped, the table is plain text.",
}
LOST_TIME = {
    "help": "idle + failure seconds in a window, largest first",
    "description": "Idle and failure seconds of every job in a window (clipped to it), "
    "grouped and largest first: where the fleet's GPU hours went.",
}


def _add_report(rep: argparse.ArgumentParser) -> None:
    rep.add_argument("job_id", metavar="JOB_ID", help="the job's ett.job.id (see `ett jobs`)")
    add_json(rep, "the read API's JSON object")


def _add_jobs(jobs: argparse.ArgumentParser) -> None:
    add_state(jobs)
    add_filters(jobs, attributes=True)
    jobs.add_argument("--since", help=f"jobs that ended since: 7d, 12h, {WHEN} (default: all)")
    jobs.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    add_json(jobs, "a JSON list")


def _add_lost_time(lost: argparse.ArgumentParser) -> None:
    lost.add_argument(
        "--by",
        default=GroupBy.COMPONENT.value,
        choices=[g.value for g in GroupBy],
        help="group by (default component)",
    )
    add_window(lost)
    add_json(lost, "a JSON list")
