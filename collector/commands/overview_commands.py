"""``ett fleet`` and ``ett checkpoint-advice``: the dashboards' aggregated questions on the
command line, through the same query layer as ``GET /api/v1/fleet`` and
``GET /api/v1/checkpoint-advice`` (``--json`` prints the same object the API answers).

Registered by :func:`ett_collector.commands.register`, which hands in its shared pieces (a
subcommand with ``--db`` and the error guard, the read runner and the console), so this module
does not import the commands module (the layer rule: only a part's ``commands`` module imports
``cli``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ._options import add_filters, add_json, add_state, add_window

SHOWN_JOBS = 20
"""Jobs ``ett checkpoint-advice`` prints (``--json`` has them all)."""


def register(
    sub: Any,
    command: Callable[..., Any],
    read: Callable[[argparse.Namespace, Callable[[Any], Any], Callable[[Any], None]], int],
    console: Callable[[], Any],
) -> None:
    """Add ``fleet`` and ``checkpoint-advice`` to ``ett``: ``command(sub, name, fn, **texts)``
    adds a subcommand that takes ``--db`` and runs ``fn``; ``read(args, question, render)``
    answers ``question(query)`` through the query layer and prints it (``--json``: as JSON)."""

    def fleet_command(args: argparse.Namespace) -> int:
        from ..read.overview import Overview

        return read(
            args,
            lambda q: Overview(q).fleet(
                args.since,
                args.until,
                args.by,
                args.bucket,
                args.model,
                args.team,
                args.state,
                args.limit,
            ),
            lambda d: print_fleet(d, console()),
        )

    def advice_command(args: argparse.Namespace) -> int:
        from ..read.overview import Overview

        return read(
            args,
            lambda q: Overview(q).checkpoint_advice(args.since, args.model, args.team),
            lambda d: print_advice(d, console()),
        )

    fleet = command(
        sub,
        "fleet",
        fleet_command,
        help="fleet ETT, idle and failure over time, lost GPU-hours by component, worst jobs",
        description="The fleet over a window: ETT, idle and failure shares per hour or day "
        "(for the whole fleet, per model or per team), lost GPU-hours by component "
        "(GPU-hours = seconds x ranks), and the jobs that lost the most. The same answer as "
        "GET /api/v1/fleet and the dashboard's Fleet page.",
    )
    add_window(fleet, "7d")
    fleet.add_argument(
        "--by", default="fleet", choices=["fleet", "model", "team"], help="split (default fleet)"
    )
    fleet.add_argument(
        "--bucket",
        choices=["hour", "day"],
        help="time bucket (default: hour for windows up to 2 days, else day)",
    )
    add_filters(fleet)
    add_state(fleet, every=False)
    fleet.add_argument("--limit", type=int, default=10, help="worst jobs shown (default 10)")
    add_json(fleet, "the API's JSON object")

    advice = command(
        sub,
        "checkpoint-advice",
        advice_command,
        help="checkpoint interval in use vs Young's optimum, per model and per job",
        description="The checkpoint interval in use against Young's optimum sqrt(2*B*T/F), per "
        "model (pooled over its jobs) and per job, largest saving first. The same answer as "
        "GET /api/v1/checkpoint-advice and the dashboard's Checkpoint advisor.",
    )
    advice.add_argument("--since", help="jobs that ended since: 7d, ISO 8601 (default: all)")
    add_filters(advice)
    add_json(advice, "the API's JSON object")


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "—"


def _day(t: float, bucket_s: int) -> str:
    fmt = "%Y-%m-%d %H:00" if bucket_s < 86400 else "%Y-%m-%d"
    return datetime.fromtimestamp(t, UTC).strftime(fmt)


def print_fleet(data: dict[str, Any], console: Any) -> None:
    """The ``ett fleet`` tables: totals, the series, components ranked, the worst jobs."""
    from rich.table import Table

    from ._render import duration

    series = data["series"]
    prod, idle, fail = (sum(r[c] for r in series) for c in ("productive_s", "idle_s", "failure_s"))
    wall = prod + idle + fail
    lost_gpu_h = sum(r["lost_gpu_h"] for r in data["components"])
    span = f"{_day(data['since'], 3600)} to {_day(data['until'], 3600)} UTC"
    if not series:
        console.print(f"No job ran between {span} with these filters.")
        return
    console.print(
        f"Fleet {span}: ETT {_pct(prod, wall)}, idle {_pct(idle, wall)}, "
        f"failure {_pct(fail, wall)} of {duration(wall)} job time; "
        f"lost {lost_gpu_h:,.1f} GPU-hours (GPU-hours = seconds x ranks)"
    )
    t = Table(title=f"Per {'hour' if data['bucket_s'] < 86400 else 'day'}", title_justify="left")
    for col in ("from", data["by"], "ETT", "idle", "failure", "job time"):
        t.add_column(col, justify="left" if col in ("from", data["by"]) else "right")
    for r in series:
        t.add_row(
            _day(r["t"], data["bucket_s"]),
            "fleet" if data["by"] == "fleet" else str(r["key"] or "(none)"),
            _pct(r["productive_s"], r["wall_s"]),
            _pct(r["idle_s"], r["wall_s"]),
            _pct(r["failure_s"], r["wall_s"]),
            duration(r["wall_s"]),
        )
    console.print(t)
    t = Table(title="Lost GPU-hours by component", title_justify="left")
    for col in ("component", "idle", "failure", "GPU-hours", "share"):
        t.add_column(col, justify="left" if col == "component" else "right")
    for r in data["components"]:
        t.add_row(
            r["component"],
            duration(r["idle_s"]),
            duration(r["failure_s"]),
            f"{r['lost_gpu_h']:,.2f}",
            _pct(r["lost_gpu_h"], lost_gpu_h),
        )
    console.print(t)
    if data["worst_jobs"]:
        t = Table(title="Worst jobs of the window", title_justify="left")
        for col in ("job", "state", "model", "team", "ETT (job)", "lost", "GPU-hours"):
            t.add_column(  # job ids are never cut
                col, justify="right" if col in ("lost", "GPU-hours") else "left",
                no_wrap=col == "job", min_width=max(len(w["job_id"]) for w in data["worst_jobs"])
                if col == "job" else None,
            )  # fmt: skip
        for w in data["worst_jobs"]:
            ett = "—" if w["ett_pct"] is None else f"{w['ett_pct']:.1f}%"
            t.add_row(
                w["job_id"], str(w["state"] or "—"), str(w["model"] or "—"),
                str(w["team"] or "—"), ett, duration(w["lost_s"]), f"{w['lost_gpu_h']:,.2f}",
            )  # fmt: skip
        console.print(t)


def _optimum(row: dict[str, Any], data: dict[str, Any]) -> str:
    """Young's optimum of a row, or why it is withheld (the rule of ``ett report``)."""
    from ._render import duration

    if row["optimal_interval_s"] is None or row.get("advice_ok", True):
        return duration(row["optimal_interval_s"])
    return f"not enough failures yet ({row['failures']} of {data['min_failures']})"


def print_advice(data: dict[str, Any], console: Any) -> None:
    """The ``ett checkpoint-advice`` tables: per model, then per job."""
    from rich.table import Table

    from ._render import duration

    if not data["models"]:
        console.print("No computed job matches: nothing to advise on.")
        return
    t = Table(title="Checkpoint interval per model (Young's optimum)", title_justify="left")
    for col in ("model", "jobs", "failures", "per day", "mean blocking", "in use", "optimum"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for m in data["models"]:
        per_day = m.get("failures_per_day")
        t.add_row(
            str(m["model"] or "(none)"), str(m["jobs"]), str(m["failures"]),
            "—" if per_day is None else f"{per_day:.2f}", duration(m["mean_blocking_s"]),
            duration(m["interval_s"]), _optimum(m, data),
        )  # fmt: skip
    console.print(t)
    jobs = [j for j in data["jobs"] if j.get("saving_s") and j.get("advice_ok", True)]
    if len(jobs) > SHOWN_JOBS:
        console.print(f"{len(jobs) - SHOWN_JOBS} more jobs could save time: --json lists them")
        jobs = jobs[:SHOWN_JOBS]
    if jobs:
        t = Table(title="Jobs a change would save the most on", title_justify="left")
        for col in ("job", "model", "in use", "optimum", "saving"):
            t.add_column(  # job ids are never cut
                col, justify="left" if col in ("job", "model") else "right",
                no_wrap=col == "job", min_width=max(len(j["job_id"]) for j in jobs)
                if col == "job" else None,
            )  # fmt: skip
        for j in jobs:
            t.add_row(
                j["job_id"], str(j["model"] or "—"), duration(j["interval_s"]),
                duration(j["optimal_interval_s"]), duration(j["saving_s"]),
            )  # fmt: skip
        console.print(t)
