"""The running service's retention: a background loop that deletes what the ``ETT_RETAIN_*``
periods let go (``collector/storage/_retention.py``), in small batches, and on PostgreSQL
creates the day partitions of ``spans`` ahead (``collector/storage/_partitions.py``), in the
process that holds the leader lock."""

from __future__ import annotations

import logging
import time

from ett import semconv

from ..settings import Settings
from ..storage._partitions import ensure_ahead
from ..storage._retention import Policy, Retention, Tally
from ..storage._retention_policy import PASS_RUNNING
from ._disk_prune import Disk, DiskPruneLoop
from .periodic import Periodic
from .pipeline import Pipeline

log = logging.getLogger("ett_collector")

RETENTION_EVERY_S = 300.0
"""How often the service looks for data past its retention and makes partitions ahead (a pass
runs at start too)."""


class RetentionLoop:
    """Runs :class:`Retention` every :data:`RETENTION_EVERY_S` beside the pipeline's worker;
    nothing at all when every period is ``keep``."""

    def __init__(
        self,
        settings: Settings,
        pipeline: Pipeline,
        every_s: float = RETENTION_EVERY_S,
        disk: Disk | None = None,
    ):
        quiet_s = semconv.PRESUMED_DEAD_WINDOWS * settings.window_s
        self.retention = Retention(
            pipeline.store.engine,
            Policy.of(settings.retain, quiet_s),
            raw_window_retention_s=pipeline.store.compactor.retention_s,
        )
        self.disk_prune: DiskPruneLoop | None = None
        """The prune for space of ``ETT_PRUNE_ON_LOW_DISK`` (SQLite in a file only)."""
        if settings.prune_on_low_disk and disk is not None and disk.free_bytes() is not None:
            self.disk_prune = DiskPruneLoop(pipeline.store.engine, disk, quiet_s, pipeline.leader)
        self.last: Tally | None = None
        """What the last pass deleted (None before the first)."""
        self._loop = Periodic("ett-retention", self._tick, every_s, log, pipeline.leader)

    def _tick(self) -> None:
        made = ensure_ahead(self.retention.engine, time.time())  # PostgreSQL's day partitions
        if made:
            log.info("created partitions %s", ", ".join(made))
        if self.retention.policy.keeps_everything():
            return
        tally = self.retention.run(stop=self._loop.stopping)
        self.last = tally
        if tally.busy:  # another process's pass: this one waits for the next tick, not for it
            log.info("retention: %s on this database; this pass skipped", PASS_RUNNING)
        elif tally.rows():
            log.info("retention deleted %s", tally.describe())

    def start(self) -> None:
        """Start the loop (on SQLite, unless everything is kept)."""
        sqlite = self.retention.engine.dialect.name == "sqlite"
        if not (sqlite and self.retention.policy.keeps_everything()):
            self._loop.start()
        if self.disk_prune is not None:
            self.disk_prune.start()

    def stop(self) -> None:
        """Stop the loop; a pass under way ends after its current batch."""
        self._loop.stop()
        if self.disk_prune is not None:
            self.disk_prune.stop()
