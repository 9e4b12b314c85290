"""The last read answer of each job, kept per process and checked against the database.

A job's read answer (its stored figures, ``computed_at``, ``fresh`` and ``error``) is fully
determined by a few columns of its rows: :meth:`Store.figures_stamp`. So an answer is kept as the
bytes sent, under the stamp it was read with; a later read looks the stamp up again (one indexed
lookup, without the summary) and answers the kept bytes when it is unchanged. Validation is by the
database on every read, never by invalidation inside this process: figures saved by another
thread, worker process or ``ett serve`` instance change the stamp, and the next read answers them.

Bounded: at most ``max_jobs`` jobs and ``max_bytes`` of answers, least recently read out first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .storage._store import FiguresStamp

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Bytes of kept answers at most, per process (a job's answer is 1-20 KB; one with many
checkpoints more)."""


class JobAnswers:
    """Encoded read answers of up to ``max_jobs`` jobs, each with the stamp it was read at.
    Thread-safe."""

    def __init__(self, max_jobs: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_jobs = max_jobs
        self.max_bytes = max_bytes
        self._kept: OrderedDict[str, tuple[FiguresStamp, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, job_id: str, stamp: FiguresStamp) -> bytes | None:
        """The answer kept for ``job_id`` if it was read at ``stamp``; else None."""
        with self._lock:
            kept = self._kept.get(job_id)
            if kept is None or kept[0] != stamp:
                self.misses += 1
                return None
            self._kept.move_to_end(job_id)
            self.hits += 1
            return kept[1]

    def put(self, job_id: str, stamp: FiguresStamp, body: bytes) -> None:
        """Keep ``body`` as the answer of ``job_id`` at ``stamp`` (replacing an older one),
        dropping the least recently read answers past the bounds."""
        if len(body) > self.max_bytes or self.max_jobs < 1:
            return
        with self._lock:
            old = self._kept.pop(job_id, None)
            if old is not None:
                self._bytes -= len(old[1])
            self._kept[job_id] = (stamp, body)
            self._bytes += len(body)
            while len(self._kept) > self.max_jobs or self._bytes > self.max_bytes:
                self._bytes -= len(self._kept.popitem(last=False)[1][1])

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def held_bytes(self) -> int:
        """Bytes of answers kept now."""
        return self._bytes
