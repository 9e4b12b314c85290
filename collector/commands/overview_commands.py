"""``ett fleet`` and ``ett checkpoint-advice``: the dashboards' aggregated questions on the
command line, through the same query layer as ``GET /api/v1/fleet`` and
``GET /api/v1/checkpoint-advice`` (``--json`` prints the same object the API answers).

Registered by :func:`ett_collector.commands.register`, which hands in its shared pieces
(:class:`._runner.Kit`: a subcommand with ``--db`` and the error guard, and the console), so
this module does not import ``ett_cli`` (the layer rule: only a part's ``commands`` module does).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from ._options import add_filters, add_json, add_state, add_window
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
    advice.add_argument("--since", help="jobs that ended since: 7d, ISO 8601 (default: all)")
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
    console.print(_series_table(data))
    console.print(_components_table(data["components"], lost_gpu_h))
    if data["worst_jobs"]:
        console.print(_worst_table(data["worst_jobs"]))


def _table(title: str, columns: tuple[str, ...], left: tuple[str, ...], jobs: Any = ()) -> Any:
    """A table of ``columns``, those in ``left`` justified left, the others right; a ``job``
    column is never cut (as wide as the longest id of ``jobs``)."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in columns:
        justify: Literal["left", "right"] = "left" if col in left else "right"
        if col == "job":  # job ids are never cut
            t.add_column(col, justify=justify, no_wrap=True, min_width=_widest(jobs))
        elif col in left:  # names (a model, a component) fold on a narrow terminal, never cut
            t.add_column(col, justify=justify, overflow="fold")
        else:
            t.add_column(col, justify=justify)
    return t


def _widest(jobs: Any) -> int:
    return max(len(j["job_id"]) for j in jobs)


def _series_table(data: dict[str, Any]) -> Any:
    by, bucket_s = data["by"], data["bucket_s"]
    columns = ("from", by, "ETT", "idle", "failure", "job time")
    t = _table(f"Per {'hour' if bucket_s < 86400 else 'day'}", columns, ("from", by))
    for r in data["series"]:
        t.add_row(
            _day(r["t"], bucket_s),
            "fleet" if by == "fleet" else str(r["key"] or "(none)"),
            _pct(r["productive_s"], r["wall_s"]),
            _pct(r["idle_s"], r["wall_s"]),
            _pct(r["failure_s"], r["wall_s"]),
            _duration(r["wall_s"]),
        )
    return t


def _components_table(components: list[dict[str, Any]], lost_gpu_h: float) -> Any:
    columns = ("component", "idle", "failure", "GPU-hours", "share")
    t = _table("Lost GPU-hours by component", columns, ("component",))
    for r in components:
        t.add_row(
            r["component"],
            _duration(r["idle_s"]),
            _duration(r["failure_s"]),
            f"{r['lost_gpu_h']:,.2f}",
            _pct(r["lost_gpu_h"], lost_gpu_h),
        )
    return t


def _worst_table(worst: list[dict[str, Any]]) -> Any:
    columns = ("job", "state", "model", "team", "ETT (job)", "lost", "GPU-hours")
    t = _table("Worst jobs of the window", columns, columns[:5], worst)
    for w in worst:
        ett = "—" if w["ett_pct"] is None else f"{w['ett_pct']:.1f}%"
        t.add_row(
            w["job_id"],
            str(w["state"] or "—"),
            str(w["model"] or "—"),
            str(w["team"] or "—"),
            ett,
            _duration(w["lost_s"]),
            f"{w['lost_gpu_h']:,.2f}",
        )
    return t


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
    if not data["models"]:
        console.print("No computed job matches: nothing to advise on.")
        return
    console.print(_models_table(data))
    jobs = [j for j in data["jobs"] if j.get("saving_s") and j.get("advice_ok", True)]
    if len(jobs) > SHOWN_JOBS:
        console.print(f"{len(jobs) - SHOWN_JOBS} more jobs could save time: --json lists them")
        jobs = jobs[:SHOWN_JOBS]
    if jobs:
        console.print(_advice_jobs_table(jobs))


def _models_table(data: dict[str, Any]) -> Any:
    columns = ("model", "jobs", "failures", "per day", "mean blocking", "in use", "optimum")
    t = _table("Checkpoint interval per model (Young's optimum)", columns, ("model",))
    for m in data["models"]:
        per_day = m.get("failures_per_day")
        t.add_row(
            str(m["model"] or "(none)"),
            str(m["jobs"]),
            str(m["failures"]),
            "—" if per_day is None else f"{per_day:.2f}",
            _duration(m["mean_blocking_s"]),
            _duration(m["interval_s"]),
            _optimum(m, data),
        )
    return t


def _advice_jobs_table(jobs: list[dict[str, Any]]) -> Any:
    columns = ("job", "model", "in use", "optimum", "saving")
    t = _table("Jobs a change would save the most on", columns, ("job", "model"), jobs)
    for j in jobs:
        t.add_row(
            j["job_id"],
            str(j["model"] or "—"),
            _duration(j["interval_s"]),
            _duration(j["optimal_interval_s"]),
            _duration(j["saving_s"]),
        )
    return t
