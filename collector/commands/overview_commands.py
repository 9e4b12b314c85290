"""``ett fleet`` and ``ett checkpoint-advice``: the dashboards' aggregated questions on the
command line, through the same query layer as ``GET /api/v1/fleet`` and
``GET /api/v1/checkpoint-advice`` (``--json`` prints the same object the API answers).

Registered by :func:`ett_collector.commands.register`, which hands in its shared pieces
(:class:`._runner.Kit`: a subcommand with ``--db`` and the error guard, and the console), so
this module does not import ``ett_cli`` (the layer rule: only a part's ``commands`` module does).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from ..schemas import NO_LABEL
from ._options import WHEN, add_filters, add_json, add_state, add_window
from ._runner import Kit, read

SHOWN_JOBS = 20
"""Jobs ``ett checkpoint-advice`` prints (``--json`` has them all)."""


def register(sub: Any, kit: Kit) -> None:
    """Add ``fleet`` and ``checkpoint-advice`` to ``ett``."""
    _add_fleet(kit.command(sub, "fleet", partial(_fleet, kit.console), **FLEET))
    _add_advice(kit.command(sub, "checkpoint-advice", partial(_advice, kit.console), **ADVICE))


def _fleet(console: Callable[[], Any], args: argparse.Namespace) -> int:
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


def _advice(console: Callable[[], Any], args: argparse.Namespace) -> int:
    from ..read.overview import Overview

    return read(
        args,
        lambda q: Overview(q).checkpoint_advice(args.since, args.model, args.team),
        lambda d: print_advice(d, console()),
    )


FLEET = {
    "help": "fleet ETT, idle and failure over time, lost GPU-hours by component, worst jobs",
    "description": "The fleet over a window: ETT, idle and failure shares per hour or day "
    "(for the whole fleet, per model or per team), lost GPU-hours by component "
    "(GPU-hours = seconds x ranks), and the jobs that lost the most. The same answer as "
    "GET /api/v1/fleet and the dashboard's Fleet page.",
}
ADVICE = {
    "help": "checkpoint interval in use vs Young's optimum, per model and per job",
    "description": "The checkpoint interval in use against Young's optimum sqrt(2*B*T/F), per "
    "model (pooled over its jobs) and per job, largest saving first. The same answer as "
    "GET /api/v1/checkpoint-advice and the dashboard's Checkpoint advisor.",
}


def _add_fleet(fleet: argparse.ArgumentParser) -> None:
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


def _add_advice(advice: argparse.ArgumentParser) -> None:
    advice.add_argument("--since", help=f"jobs that ended since: 7d, 12h, {WHEN} (default: all)")
    add_filters(advice)
    add_json(advice, "the API's JSON object")


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "—"


def _day(t: float, bucket_s: int) -> str:
    fmt = "%Y-%m-%d %H:00" if bucket_s < 86400 else "%Y-%m-%d"
    return datetime.fromtimestamp(t, UTC).strftime(fmt)


def _minute(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


def print_fleet(data: dict[str, Any], console: Any) -> None:
    """The ``ett fleet`` tables: totals, the series, components ranked, the worst jobs."""
    series = data["series"]
    prod, idle, fail = (sum(r[c] for r in series) for c in ("productive_s", "idle_s", "failure_s"))
    wall = prod + idle + fail
    lost_gpu_h = sum(r["lost_gpu_h"] for r in data["components"])
    span = f"{_minute(data['since'])} to {_minute(data['until'])} UTC"  # the window as asked
    if not series:
        console.print(f"No job ran between {span} with these filters.")
        return
    console.print(
        f"Fleet {span}: ETT {_pct(prod, wall)}, idle {_pct(idle, wall)}, "
        f"failure {_pct(fail, wall)} of {_duration(wall)} job time; "
        f"lost {lost_gpu_h:,.1f} GPU-hours (GPU-hours = seconds x ranks)"
    )
    from ._render import print_table

    print_table(console, _series_table(data))
    print_table(console, _components_table(data["components"], lost_gpu_h))
    if data["worst_jobs"]:
        print_table(console, _worst_table(data["worst_jobs"]))


def _table(
    title: str, columns: tuple[str, ...], left: tuple[str, ...], rows: Sequence[Sequence[str]]
) -> Any:
    """A table of ``columns`` and ``rows``, those in ``left`` justified left, the others right;
    no name or figure is folded or cut (a terminal too narrow for them gets the rows as cards:
    ``_render.print_table``)."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        justify: Literal["left", "right"] = "left" if col in left else "right"
        widest = max((len(r[i]) for r in rows), default=len(col))
        if widest <= _UNBROKEN:  # an id, a name, a figure: on one line
            t.add_column(col, justify=justify, no_wrap=True, min_width=widest)
        else:  # words (a reason): wrapped between them
            word = max((len(w) for r in rows for w in r[i].split()), default=1)
            t.add_column(col, justify=justify, overflow="fold", min_width=word)
    for r in rows:
        t.add_row(*r)
    return t


_UNBROKEN = 24
"""Cells up to this long stay on one line (job ids, model names, durations)."""


def _series_table(data: dict[str, Any]) -> Any:
    by, bucket_s = data["by"], data["bucket_s"]
    columns = ("from", by, "ETT", "idle", "failure", "job time")
    rows = [
        (
            _day(r["t"], bucket_s),
            "fleet" if by == "fleet" else str(r["key"] or NO_LABEL),
            _pct(r["productive_s"], r["wall_s"]),
            _pct(r["idle_s"], r["wall_s"]),
            _pct(r["failure_s"], r["wall_s"]),
            _duration(r["wall_s"]),
        )
        for r in data["series"]
    ]
    return _table(f"Per {'hour' if bucket_s < 86400 else 'day'}", columns, ("from", by), rows)


def _components_table(components: list[dict[str, Any]], lost_gpu_h: float) -> Any:
    columns = ("component", "idle", "failure", "GPU-hours", "share")
    rows = [
        (
            r["component"],
            _duration(r["idle_s"]),
            _duration(r["failure_s"]),
            f"{r['lost_gpu_h']:,.2f}",
            _pct(r["lost_gpu_h"], lost_gpu_h),
        )
        for r in components
    ]
    return _table("Lost GPU-hours by component", columns, ("component",), rows)


def _worst_table(worst: list[dict[str, Any]]) -> Any:
    columns = ("job", "state", "model", "team", "ETT", "lost", "GPU-h")
    rows = [
        (
            w["job_id"],
            str(w["state"] or "—"),
            str(w["model"] or "—"),
            str(w["team"] or "—"),
            "—" if w["ett_pct"] is None else f"{w['ett_pct']:.1f}%",
            _duration(w["lost_s"]),
            f"{w['lost_gpu_h']:,.2f}",
        )
        for w in worst
    ]
    return _table("Worst jobs of the window (ETT of the job)", columns, columns[:4], rows)


def _duration(seconds: float | None) -> str:
    """``_render.duration`` (imported when first asked: rich stays out of ``ett --help``)."""
    from ._render import duration

    return duration(seconds)


def _optimum(row: dict[str, Any], data: dict[str, Any]) -> str:
    """Young's optimum of a row, or why it is withheld (the rule of ``ett report``)."""
    if row["optimal_interval_s"] is None or row.get("advice_ok", True):
        return _duration(row["optimal_interval_s"])
    return f"not enough failures yet ({row['failures']} of {data['min_failures']})"


def print_advice(data: dict[str, Any], console: Any) -> None:
    """The ``ett checkpoint-advice`` tables: per model, then per job."""
    from ._render import print_table

    if not data["models"]:
        console.print("No computed job matches: nothing to advise on.")
        return
    print_table(console, _models_table(data))
    jobs = [j for j in data["jobs"] if j.get("saving_s") and j.get("advice_ok", True)]
    if len(jobs) > SHOWN_JOBS:
        console.print(f"{len(jobs) - SHOWN_JOBS} more jobs could save time: --json lists them")
        jobs = jobs[:SHOWN_JOBS]
    if jobs:
        print_table(console, _advice_jobs_table(jobs))


def _models_table(data: dict[str, Any]) -> Any:
    columns = ("model", "jobs", "failures", "per day", "mean blocking", "in use", "optimum")
    rows = []
    for m in data["models"]:
        per_day = m.get("failures_per_day")
        rows.append(
            (
                str(m["model"] or NO_LABEL),
                str(m["jobs"]),
                str(m["failures"]),
                "—" if per_day is None else f"{per_day:.2f}",
                _duration(m["mean_blocking_s"]),
                _duration(m["interval_s"]),
                _optimum(m, data),
            )
        )
    return _table("Checkpoint interval per model (Young's optimum)", columns, ("model",), rows)


def _advice_jobs_table(jobs: list[dict[str, Any]]) -> Any:
    columns = ("job", "model", "in use", "optimum", "saving")
    rows = [
        (
            j["job_id"],
            str(j["model"] or "—"),
            _duration(j["interval_s"]),
            _duration(j["optimal_interval_s"]),
            _duration(j["saving_s"]),
        )
        for j in jobs
    ]
    return _table("Jobs a change would save the most on", columns, ("job", "model"), rows)
