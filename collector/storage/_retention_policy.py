"""What retention keeps (:class:`Policy`, from the ``ETT_RETAIN_*`` settings), how far each
job has been pruned (``jobs.pruned``), and what a pass deleted (:class:`Tally`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy import Engine

DEFAULT_BATCH_ROWS = 2000
"""Rows deleted per transaction: about a millisecond or two of a writer's time on SQLite."""

_NEVER = -1e300
"""The cutoff of a kind kept forever (``keep``): no instant is before it."""

RESOLVED_ALERTS = "SELECT {what} FROM alerts WHERE state = 'resolved' AND resolved_at < {ph}"
"""Alerts resolved before a cutoff (``alerts`` table, migration 0003)."""

PASS_RUNNING = "a prune is already running"
"""What a pass that found another one running says (:attr:`Tally.busy`)."""

KEPT, SPANS_GOING, SPANS_GONE, RUNS_GONE = 0, 1, 2, 3
"""Values of ``jobs.pruned`` (migration 0007)."""


@dataclass(frozen=True)
class Policy:
    """Retention periods in seconds (None: ``keep``); the settings are ``ETT_RETAIN_*``."""

    spans_s: float | None = 30 * 86400.0
    runs_s: float | None = 90 * 86400.0
    figures_s: float | None = 400 * 86400.0
    alerts_s: float | None = 400 * 86400.0
    quiet_s: float = 30.0
    """A job with a span ingested this recently (collector clock) is left alone."""

    @classmethod
    def of(cls, retain: Mapping[str, float | None], quiet_s: float = 30.0) -> Policy:
        """From ``Settings.retain`` (keys ``spans``, ``runs``, ``figures``, ``alerts``)."""
        return cls(retain["spans"], retain["runs"], retain["figures"], retain["alerts"], quiet_s)

    def keeps_everything(self) -> bool:
        """True when every period is ``keep``."""
        return all(v is None for v in (self.spans_s, self.runs_s, self.figures_s, self.alerts_s))


# kept alike: the library's spool counters (instrument/_spool_send.py, Drained) have this shape;
# the library and the server share no code but the span vocabulary.
@dataclass
class Tally:
    """What a pass deleted (or, for a plan, would delete)."""

    span_jobs: int = 0
    spans: int = 0
    run_jobs: int = 0
    runs: int = 0
    series: int = 0
    jobs: int = 0
    segments: int = 0
    alerts: int = 0
    partitions: int = 0
    """Day partitions of ``spans`` dropped whole (PostgreSQL), their rows not in ``spans``."""
    partition_rows: int = 0
    """About how many rows those partitions held (the planner's estimate)."""
    vacuumed_pages: int = 0
    busy: bool = False
    """The pass deleted nothing: another pass held the database's pass lock (PostgreSQL)."""

    def rows(self) -> int:
        """Rows deleted in all."""
        return self.spans + self.runs + self.series + self.segments + self.jobs + self.alerts

    def describe(self) -> str:
        """One line: ``raw spans of 3 jobs (1,200 spans); runs of ...``."""
        if self.busy:
            return (
                f"nothing: {PASS_RUNNING} on this database (another `ett db prune`, or a "
                "collector's retention); run this one again once it has ended"
            )
        parts = [
            f"raw spans of {self.span_jobs:,} job(s) ({self.spans:,} spans)",
            f"heartbeat runs of {self.run_jobs:,} job(s) ({self.runs:,} runs, "
            f"{self.series:,} series rows)",
            f"figures of {self.jobs:,} job(s) ({self.segments:,} segments)",
            f"{self.alerts:,} resolved alert(s)",
        ]
        if self.partitions:
            parts.insert(
                1,
                f"{self.partitions:,} day partition(s) of spans dropped "
                f"(about {self.partition_rows:,} spans)",
            )
        return "; ".join(parts)


Progress = Callable[[Tally], None]


def pruned_jobs(engine: Engine) -> int:
    """How many jobs have had their raw spans pruned and kept their figures as stored (those
    that got spans since are counted with the failed recomputes: ``jobs.failure`` says why)."""
    with engine.connect() as conn:
        sql = f"SELECT count(*) FROM jobs WHERE pruned > {KEPT} AND failure IS NULL"
        return int(conn.exec_driver_sql(sql).scalar_one())
