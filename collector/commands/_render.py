"""Readable terminal tables for the CLI (rich), over the read vocabulary of ``schemas``."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..schemas import (
    LIVE_STATES,
    MIN_ADVICE_FAILURES,
    JobJSON,
    JobRowJSON,
    LostTimeJSON,
    advice_ok,
    clock_skew_noted,
)

_UNSEEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Characters a terminal acts on instead of showing: escape sequences (colours, a window
title, a cleared screen), bell, carriage return, tab, line and paragraph separators, and the
bidirectional overrides that reorder what follows them."""

_UNSEEN_OR_LINE = re.compile(_UNSEEN.pattern[:-1] + "\n]")
"""The same and the line feed."""


def visible(text: str, lines: bool = False) -> str:
    """``text`` with every character of :data:`_UNSEEN`, and its line feeds unless ``lines``,
    written as its escape (``\\x1b`` for ESC, ``\\n`` for a line feed): a job id, model or
    team is whatever a sender wrote, and printed raw it could colour or clear a terminal, or
    forge a row of piped ``ett jobs``."""
    unseen = _UNSEEN if lines else _UNSEEN_OR_LINE
    return unseen.sub(lambda m: ascii(m.group())[1:-1], text) if unseen.search(text) else text


class VisibleConsole(Console):
    """A rich console that shows text as it is: no markup (``[red]`` in a job id is text, and
    ``a[/]b`` stopped ``ett jobs`` with a MarkupError) and :func:`visible` characters only.
    Line feeds stay: the commands' own cells have lines (an alert's expression), and a job id
    of two lines stays inside its cell's frame."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(markup=False, **kwargs)  # type: ignore[arg-type]

    def render_str(self, text: str, **kwargs: object) -> Text:
        return super().render_str(visible(text, lines=True), **kwargs)  # type: ignore[arg-type]


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
    """A unix time in UTC to the second, marked so (``2026-11-29 08:00:00Z``, as ``ett alerts``
    prints it): a time without its zone reads as local time."""
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def window(since: float | None, until: float) -> str:
    """The window a fleet-wide sum covers, in UTC (``since`` None: everything stored)."""

    def second(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")

    if since is None:
        return f"everything stored up to {second(until)} UTC"
    return f"{second(since)} to {second(until)} UTC"


def _bar(part: float, whole: float, width: int = 24) -> str:
    n = 0 if whole <= 0 else round(width * part / whole)
    return "█" * n


def recovery(job: JobJSON) -> str:
    """Time to recover after each failed attempt, or why there is none."""
    attempts = {a["attempt"]: a for a in job["attempts"]}
    failed = [a["attempt"] for a in job["attempts"] if a["failed"]]
    parts = []
    for i, t in enumerate(job["ttr_s"]):
        if t is not None:
            parts.append(duration(t))
            continue
        nxt = failed[i] + 1 if i < len(failed) else None
        if nxt is not None and nxt in attempts:
            last = nxt == max(attempts) and job["state"] in LIVE_STATES
            parts.append(f"attempt {nxt} " + ("has not trained yet" if last else "never trained"))
        else:
            parts.append("no restart")
    return ", ".join(parts) or "-"


def advice(job: JobJSON) -> str:
    """The checkpoint interval in use and Young's optimum, with how much evidence it rests on:
    below :data:`MIN_ADVICE_FAILURES` failures (none at all included) the optimum is withheld in
    the words of ``ett checkpoint-advice`` and the dashboard."""
    adv = job["checkpoint_advice"]
    text = f"in use {duration(adv['interval_s'])}"
    n = job["failures"]
    if adv["optimal_interval_s"] is None or not advice_ok(n):
        return text + f", optimal: not enough failures yet ({n} of {MIN_ADVICE_FAILURES})"
    return (
        text + f", optimal {duration(adv['optimal_interval_s'])} (from {n} failures)"
        f", would save {duration(adv['saving_s'])}"
    )


def checkpoint_rows(job: JobJSON) -> list[tuple[str, str]]:
    """The report's checkpoint lines: blocking while training, each save's blocking (every save,
    the final one at exit included), restores, and how they (with the saves and persist waits at
    exit) make up the ``checkpoint`` component of lost time. Under a second the figures are in
    milliseconds, so that the parts add up as printed (0.1 s = 0.0 s + 0.0 s did not)."""
    blocking = job["checkpoint_blocking_s"]
    restore = job.get("checkpoint_restore_s")
    stats = job.get("checkpoint_blocking_stats")
    if restore is None or stats is None:  # figures stored before these existed
        note = "saves only; the checkpoint component below also counts restores"
        return [("checkpoint blocking", f"{duration(blocking)}  ({note})")]
    rows = [("checkpoint blocking", f"{fine(blocking)} while training")]
    n = stats["count"]
    if n:
        rows.append(
            (
                "per save",
                f"{n} save{'s' if n != 1 else ''}, any final one included: min "
                f"{fine(stats['min_s'])}, mean {fine(stats['mean_s'])}, p95 "
                f"{fine(stats['p95_s'])}, max {fine(stats['max_s'])}",
            )
        )
    rows.append(("checkpoint restore", fine(restore)))
    component = job["lost_by_component"].get("checkpoint", 0.0)
    at_exit = component - blocking - restore
    if component > 0:
        parts = f"blocking {fine(blocking)} + restore {fine(restore)}"
        if at_exit >= 0.0005:
            parts += f" + {fine(at_exit)} at exit (final save, persist wait)"
        rows.append(("checkpoint component", f"{fine(component)} = {parts}"))
    return rows


def fine(seconds: float | None) -> str:
    """:func:`duration`, in milliseconds under a second (``0.0 s`` read as nothing lost)."""
    if seconds is not None and abs(seconds) < 1.0:
        return f"{1000 * seconds:.0f} ms"
    return duration(seconds)


def print_report(job: JobJSON, console: Console) -> None:
    """The ``ett report`` view of one job: its figures, lost time, attempts, performance."""
    console.print(_figures_table(job))
    lost = _lost_table(job)
    if lost is not None:
        console.print(lost)
    print_rows(console, "Attempts (rank: the critical rank)", _ATTEMPT_COLUMNS, _attempt_rows(job))
    perf = job.get("performance")  # issue 26: `ett report` adds it
    if isinstance(perf, dict):
        from ._render_performance import print_performance

        print_performance(perf, console)


def _figures_table(job: JobJSON) -> Table:
    """The job's figures, one per row."""
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
    head.add_row("time to recover", recovery(job))
    causes = ", ".join(f"{k} ×{v}" for k, v in job["failure_causes"].items())
    head.add_row("failures", f"{job['failures']}" + (f"  ({causes})" if causes else ""))
    head.add_row("unsaved training", duration(job["unsaved_s"]))
    if job.get("expected_unsaved_s") is not None:
        head.add_row(
            "expected unsaved",
            f"{duration(job['expected_unsaved_s'])}  (failures × checkpoint interval in use / 2)",
        )
    if job["state"] in LIVE_STATES:
        head.add_row("at risk", duration(job["at_risk_s"]))
    for name, text in checkpoint_rows(job):
        head.add_row(name, text)
    head.add_row("checkpoint interval", advice(job))
    events = job.get("blocking_events") or []
    if events:
        head.add_row(
            "blocking events",
            "; ".join(
                f"{e['name'] or '(unnamed)'} → {e['component']}: {e['count']}×, "
                f"{duration(e['seconds'])}"
                for e in events
            ),
        )
    lost_spans = job.get("telemetry_lost_spans") or 0
    if lost_spans:
        head.add_row("telemetry", incomplete_telemetry(lost_spans))
    skew = job.get("clock_skew_s")
    if skew is not None and clock_skew_noted(skew):
        head.add_row("clocks", disagreeing_clocks(skew))
    if "computed_at" in job:
        note = "" if job.get("fresh", True) else "  (newer spans not included yet)"
        head.add_row("figures as of", instant(job["computed_at"]) + note)
    return head


def incomplete_telemetry(lost_spans: int) -> str:
    """What ``lost_spans`` spans that the job's emitters lost do to its figures."""
    return (
        f"INCOMPLETE: the job's emitters lost {lost_spans:,} span(s) (exporter queue or spool "
        "full, or refused for good); the figures miss what they said (a lost save reads as "
        "training, lost windows at an attempt's end as its shutdown)"
    )


def disagreeing_clocks(skew_s: float) -> str:
    """What a job whose ranks' clocks put one barrier's end ``skew_s`` apart is told."""
    return (
        f"DISAGREE: the ranks put one barrier's end {duration(skew_s)} apart (every rank leaves "
        "it at one instant); time moves between start-up, training and checkpoint blocking by up "
        "to that much: synchronize the hosts' clocks (NTP)"
    )


def _lost_table(job: JobJSON) -> Table | None:
    """Lost time by component, with a bar of its share of the wall time (None: none lost)."""
    lost = job["lost_by_component"]
    if not lost:
        return None
    t = Table(title="Lost time by component", title_justify="left")
    t.add_column("component", min_width=max(map(len, lost)), no_wrap=True)  # never cut
    t.add_column("lost", justify="right", no_wrap=True)
    t.add_column("% of wall", justify="right")
    t.add_column("", overflow="crop", no_wrap=True)  # the bar gives way first
    for comp, secs in lost.items():
        t.add_row(
            comp,
            duration(secs),
            f"{100 * secs / job['wall_s']:.1f}%" if job["wall_s"] else "-",
            _bar(secs, job["wall_s"]),
        )
    return t


_ATTEMPT_COLUMNS = ("#", "allocated", "first batch", "end", "end reason", "cause", "rank")


def _attempt_rows(job: JobJSON) -> list[tuple[str, ...]]:
    return [
        (
            str(a["attempt"]),
            instant(a["alloc"]),
            instant(a["first_batch"]),
            instant(a["end"]),
            a["end_reason"] or "-",
            a["failure_cause"] or "-",
            str(a["critical_rank"]),
        )
        for a in job["attempts"]
    ]


def wide_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """A table whose columns wrap between words; a word is folded, never cut (each column at
    least as wide as its longest word, up to 10: a longer one folds)."""
    table = Table(title=title, title_justify="left")
    for i, col in enumerate(headers):
        words = [w for r in rows for w in r[i].split()] + col.split()
        table.add_column(col, overflow="fold", min_width=min(max(map(len, words), default=1), 10))
    for row in rows:
        table.add_row(*row)
    return table


_DRAWN = re.compile(r"[\s\u2500-\u257f]")
"""Whitespace and box-drawing characters: what a table's frame and layout add."""


def _whole(table: Table, width: int) -> bool:
    """True when ``table`` renders at ``width`` whole: every character of its title, headers
    and cells, and its right border. Rich otherwise crops the columns on the right off (it cut
    "cause" and "rank" at 60 columns), ends cells with "…", or shrinks a column to nothing."""
    out = io.StringIO()
    VisibleConsole(file=out, width=width, color_system=None, force_terminal=False).print(table)
    texts = [str(table.title or "")]
    for column in table.columns:
        texts.append(str(column.header))
        texts.extend(str(cell) for cell in column.cells)
    texts = [visible(t, lines=True) for t in texts]
    expected = sum(len(_DRAWN.sub("", t)) for t in texts)
    top = next((ln for ln in out.getvalue().splitlines() if ln.startswith("┏")), "┓")
    return len(_DRAWN.sub("", out.getvalue())) == expected and top.rstrip().endswith("┓")


def print_rows(
    console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]
) -> None:
    """:func:`wide_table` through :func:`print_table`."""
    print_table(console, wide_table(title, headers, rows))


def print_table(console: Console, table: Table) -> None:
    """``table``, or, on a terminal too narrow for its columns (where rich would cut the
    columns on the right off), one small table per row, its headers down the side."""
    if _whole(table, console.width):
        console.print(table)
        return
    headers = [str(c.header) for c in table.columns]
    cells = [[str(x) for x in c.cells] for c in table.columns]
    if table.title:
        console.print(str(table.title), style="italic")
    for i in range(table.row_count):
        card = Table(show_header=False, box=None, padding=(0, 1))
        card.add_column(style="bold", no_wrap=True)
        card.add_column(overflow="fold")
        for header, column in zip(headers, cells, strict=True):
            card.add_row(header or " ", column[i])
        console.print(card)
        console.print()


_JOB_COLUMNS = (
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
)
_RIGHT = frozenset(("wall", "ETT", "idle", "failure", "failures"))
_DROPPED_WHEN_NARROW = ("team", "model", "ended", "wall", "idle", "failures", "failure")
"""Columns left out, in this order, while a terminal is too narrow for the table."""


def _job_cells(r: JobRowJSON) -> dict[str, str]:
    return {
        "job": r["job_id"],
        "state": r["state"],
        "model": r.get("model") or "-",
        "team": r.get("team") or "-",
        "ended": instant(r["end"]),
        "wall": duration(r["wall_s"]),
        "ETT": f"{r['ett_pct']:.1f}%",
        "idle": f"{r['idle_pct']:.1f}%",
        "failure": f"{r['failure_pct']:.1f}%",
        "failures": str(r["failures"]),
    }


def plain_table(columns: Sequence[str], rows: Sequence[dict[str, str]]) -> str:
    """Columns aligned with spaces, nothing cut, no box drawing: for pipes and files."""
    rows = [{c: visible(r[c]) for c in columns} for r in rows]
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in columns}

    def line(cells: dict[str, str]) -> str:
        out = [
            cells[c].rjust(widths[c]) if c in _RIGHT else cells[c].ljust(widths[c]) for c in columns
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line({c: c for c in columns}), *(line(r) for r in rows)])


def print_jobs(rows: list[JobRowJSON], console: Console) -> None:
    """The ``ett jobs`` table: plain text when not on a terminal; job ids are never cut."""
    cells = [_job_cells(r) for r in rows]
    if not console.is_terminal:  # piped: no header for no rows (`| wc -l` counts jobs)
        if cells:
            console.file.write(plain_table(_JOB_COLUMNS, cells) + "\n")
        return
    columns = list(_JOB_COLUMNS)
    natural = {c: max([len(c), *(len(r[c]) for r in cells)]) for c in columns}

    def fits() -> bool:
        return sum(natural[c] + 3 for c in columns) + 1 <= console.width

    for drop in _DROPPED_WHEN_NARROW:
        if fits():
            break
        columns.remove(drop)
    t = Table(title=f"{len(rows)} jobs", title_justify="left")
    for col in columns:  # too narrow even for these: a card per job (an id is never folded)
        t.add_column(
            col,
            justify="right" if col in _RIGHT else "left",
            no_wrap=True,
            min_width=natural[col] if col == "job" else None,
        )
    for r in cells:
        t.add_row(*(r[c] for c in columns))
    print_table(console, t)


def print_lost_time(
    rows: list[LostTimeJSON],
    by: str,
    console: Console,
    span: tuple[float | None, float] | None = None,
) -> None:
    """The ``ett lost-time`` table, largest first, with bars on a wide terminal; on a narrow one
    without the idle and failure split (lost and share stay), else as cards. ``span``: the
    window summed, ``(since, until)`` in unix seconds, said on a line of its own first."""
    if span is not None:
        console.print(f"Window: {window(*span)} (segments clipped to it)")
    bars = console.width >= LOST_TIME_BARS_FROM  # on a narrow terminal the figures come first
    table = _lost_time_table(rows, by, ("idle", "failure", "lost", "share"), bars)
    if not _whole(table, console.width):
        table = _lost_time_table(rows, by, ("lost", "share"), False)
    print_table(console, table)


def _lost_time_table(
    rows: list[LostTimeJSON], by: str, columns: tuple[str, ...], bars: bool
) -> Table:
    total = sum(r["lost_s"] for r in rows)
    t = Table(title=f"Lost time by {by} (total {duration(total)})", title_justify="left")
    longest = max((len(str(r["key"])) for r in rows), default=len(by))
    t.add_column(by, overflow="fold", min_width=min(longest, 24))  # a name is never cut
    for column in columns:
        t.add_column(column, justify="right", no_wrap=True)  # nor a figure
    if bars:
        t.add_column("")
    for r in rows:
        share = 100 * r["lost_s"] / total if total else 0.0
        cells = {
            "idle": duration(r["idle_s"]),
            "failure": duration(r["failure_s"]),
            "lost": duration(r["lost_s"]),
            "share": f"{share:.1f}%",
        }
        bar = [_bar(r["lost_s"], total)] if bars else []
        t.add_row(str(r["key"]), *(cells[c] for c in columns), *bar)
    return t


LOST_TIME_BARS_FROM = 100
"""Terminal columns from which ``ett lost-time`` draws its bars (24 columns of them)."""
