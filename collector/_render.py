"""Readable terminal tables for the CLI (rich), over the read vocabulary of ``schemas``."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

from .schemas import LIVE_STATES, JobJSON, JobRowJSON, LostTimeJSON


def duration(seconds: float | None) -> str:
    """``1h 02m 03s`` style; ``-`` for None."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s < 60:
        return f"{sign}{s:.1f}s"
    m, sec = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{sign}{h}h {m:02d}m {sec:02d}s" if h else f"{sign}{m}m {sec:02d}s"


def instant(t: float | None) -> str:
    """A unix time as UTC ISO 8601 (seconds)."""
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _bar(part: float, whole: float, width: int = 24) -> str:
    n = 0 if whole <= 0 else round(width * part / whole)
    return "█" * n


def print_report(job: JobJSON, console: Console) -> None:
    """The ``ett report`` view of one job."""
    head = Table(title=f"Job {job['job_id']}", show_header=False, title_justify="left")
    head.add_column(style="bold")
    head.add_column()
    head.add_row("state", job["state"])
    head.add_row("model / team", f"{job.get('model') or '-'} / {job.get('team') or '-'}")
    head.add_row("wall time", duration(job["wall_s"]))
    head.add_row("ETT", f"{job['ett_pct']:.1f}%  ({duration(job['productive_s'])} productive)")
    head.add_row("idle", f"{job['idle_pct']:.1f}%  ({duration(job['idle_s'])})")
    head.add_row("failure", f"{job['failure_pct']:.1f}%  ({duration(job['failure_s'])})")
    head.add_row("time to start", duration(job["tts_s"]))
    head.add_row("time to recover", ", ".join(duration(t) for t in job["ttr_s"]) or "-")
    causes = ", ".join(f"{k} ×{v}" for k, v in job["failure_causes"].items())
    head.add_row("failures", f"{job['failures']}" + (f"  ({causes})" if causes else ""))
    head.add_row("unsaved training", duration(job["unsaved_s"]))
    if job["state"] in LIVE_STATES:
        head.add_row("at risk", duration(job["at_risk_s"]))
    head.add_row("checkpoint blocking", duration(job["checkpoint_blocking_s"]))
    adv = job["checkpoint_advice"]
    head.add_row(
        "checkpoint interval",
        f"in use {duration(adv['interval_s'])}, optimal {duration(adv['optimal_interval_s'])}"
        f", would save {duration(adv['saving_s'])}",
    )
    if "computed_at" in job:
        note = "" if job.get("fresh", True) else "  (newer spans not included yet)"
        head.add_row("figures as of", instant(job["computed_at"]) + note)
    console.print(head)
    lost = job["lost_by_component"]
    if lost:
        t = Table(title="Lost time by component", title_justify="left")
        t.add_column("component")
        t.add_column("lost", justify="right")
        t.add_column("% of wall", justify="right")
        t.add_column("")
        for comp, secs in lost.items():
            t.add_row(
                comp,
                duration(secs),
                f"{100 * secs / job['wall_s']:.1f}%" if job["wall_s"] else "-",
                _bar(secs, job["wall_s"]),
            )
        console.print(t)
    att = Table(title="Attempts", title_justify="left")
    for col in (
        "attempt",
        "allocated",
        "first batch",
        "end",
        "end reason",
        "cause",
        "critical rank",
    ):
        att.add_column(col)
    for a in job["attempts"]:
        att.add_row(
            str(a["attempt"]),
            instant(a["alloc"]),
            instant(a["first_batch"]),
            instant(a["end"]),
            a["end_reason"] or "-",
            a["failure_cause"] or "-",
            str(a["critical_rank"]),
        )
    console.print(att)


def print_jobs(rows: list[JobRowJSON], console: Console) -> None:
    """The ``ett jobs`` table."""
    t = Table(title=f"{len(rows)} jobs", title_justify="left")
    for col in (
        "job",
        "state",
        "model",
        "team",
        "ended",
        "wall",
        "ETT",
        "idle",
        "failure",
        "failures",
    ):
        t.add_column(
            col,
            justify="right" if col in ("wall", "ETT", "idle", "failure", "failures") else "left",
        )
    for r in rows:
        t.add_row(
            r["job_id"],
            r["state"],
            r.get("model") or "-",
            r.get("team") or "-",
            instant(r["end"]),
            duration(r["wall_s"]),
            f"{r['ett_pct']:.1f}%",
            f"{r['idle_pct']:.1f}%",
            f"{r['failure_pct']:.1f}%",
            str(r["failures"]),
        )
    console.print(t)


def print_lost_time(rows: list[LostTimeJSON], by: str, console: Console) -> None:
    """The ``ett lost-time`` table, largest first, with bars."""
    total = sum(r["lost_s"] for r in rows)
    t = Table(title=f"Lost time by {by} (total {duration(total)})", title_justify="left")
    t.add_column(by)
    t.add_column("idle", justify="right")
    t.add_column("failure", justify="right")
    t.add_column("lost", justify="right")
    t.add_column("share", justify="right")
    t.add_column("")
    for r in rows:
        share = 100 * r["lost_s"] / total if total else 0.0
        t.add_row(
            str(r["key"]),
            duration(r["idle_s"]),
            duration(r["failure_s"]),
            duration(r["lost_s"]),
            f"{share:.1f}%",
            _bar(r["lost_s"], total),
        )
    console.print(t)
