"""The last read answer of each job, kept per process and checked against the database.

A job's read answer (its stored figures, ``computed_at``, ``fresh`` and ``error``) is fully
determined by a few columns of its rows: :meth:`Store.figures_stamp`. So an answer is kept as the
bytes sent, under the stamp it was read with; a later read looks the stamp up again (one indexed
lookup, without the summary) and answers the kept bytes when it is unchanged.

A stamp just checked is trusted for a short while (``recheck_s`` of :meth:`JobAnswers.trusted`,
``ETT_READ_RECHECK_S``): a read within it of the last check answers the kept bytes without the
lookup. Changes made by this process are seen by the very next read all the same: the pipeline
marks a job's kept stamp unchecked (:meth:`JobAnswers.mark_unchecked`) when it ingests spans of
the job, saves its figures or marks its recompute failed. Only changes made by another thread's
own store, another worker process or another ``ett serve`` instance take up to ``recheck_s`` to
show.

A mark can never be lost to a read under way: each read takes :meth:`JobAnswers.token` before
its lookup, and a check whose token is older than the newest mark (of any job) does not count as
a check; the next read looks the stamp up again.

Bounded: at most ``max_jobs`` jobs and ``max_bytes`` of answers, least recently read out first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..storage._store import FiguresStamp

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Bytes of kept answers at most, per process (a job's answer is 1-20 KB; one with many
checkpoints more)."""

_NEVER = float("-inf")


class _Kept:
    """One job's answer: its bytes, the stamp they were read at, and when (monotonic) that
    stamp was last found current in the database (-inf: unchecked)."""

    __slots__ = ("body", "checked", "stamp")

    def __init__(self, stamp: FiguresStamp, body: bytes, checked: float) -> None:
        self.stamp = stamp
        self.body = body
        self.checked = checked


class JobAnswers:
    """Encoded read answers of up to ``max_jobs`` jobs, each with the stamp it was read at.
    Thread-safe."""

    def __init__(
        self,
        max_jobs: int,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_jobs = max_jobs
        self.max_bytes = max_bytes
        self.clock = clock
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._marks = 0
        self.hits = 0
        """Reads answered from kept bytes (checked or trusted)."""
        self.trusted_hits = 0
        """Of :attr:`hits`, those answered without the lookup (:meth:`trusted`)."""
        self.misses = 0

    def token(self) -> int:
        """Take before a stamp's lookup; hand to :meth:`get` or :meth:`put` after it."""
        return self._marks

    def trusted(self, job_id: str, recheck_s: float) -> tuple[FiguresStamp, bytes] | None:
        """The stamp and answer kept for ``job_id`` when its stamp was checked less than
        ``recheck_s`` ago and not marked unchecked since; else None (look the stamp up)."""
        with self._lock:
            kept = self._kept.get(job_id)
            if kept is None or not self.clock() - kept.checked < recheck_s:
                return None
            self._kept.move_to_end(job_id)
            self.hits += 1
            self.trusted_hits += 1
            return kept.stamp, kept.body

    def get(
        self, job_id: str, stamp: FiguresStamp, checked: float = _NEVER, token: int = -1
    ) -> bytes | None:
        """The answer kept for ``job_id`` if it was read at ``stamp``; else None. ``checked``:
        when the lookup that found ``stamp`` began, counted as the stamp's last check when no
        mark came since ``token``."""
        with self._lock:
            kept = self._kept.get(job_id)
            if kept is None or kept.stamp != stamp:
                self.misses += 1
                return None
            if token == self._marks and checked > kept.checked:
                kept.checked = checked
            self._kept.move_to_end(job_id)
            self.hits += 1
            return kept.body

    def put(
        self,
        job_id: str,
        stamp: FiguresStamp,
        body: bytes,
        checked: float = _NEVER,
        token: int = -1,
    ) -> None:
        """Keep ``body`` as the answer of ``job_id`` at ``stamp`` (replacing an older one),
        dropping the least recently read answers past the bounds; ``checked`` and ``token`` as
        for :meth:`get`."""
        if len(body) > self.max_bytes or self.max_jobs < 1:
            return
        with self._lock:
            old = self._kept.pop(job_id, None)
            if old is not None:
                self._bytes -= len(old.body)
            if token != self._marks:
                checked = _NEVER
            self._kept[job_id] = _Kept(stamp, body, checked)
            self._bytes += len(body)
            while len(self._kept) > self.max_jobs or self._bytes > self.max_bytes:
                self._bytes -= len(self._kept.popitem(last=False)[1].body)

    def mark_unchecked(self, job_ids: Iterable[str]) -> None:
        """These jobs changed in the database (this process changed them, after its commit):
        their next reads look their stamps up."""
        with self._lock:
            self._marks += 1
            for job_id in job_ids:
                kept = self._kept.get(job_id)
                if kept is not None:
                    kept.checked = _NEVER

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def held_bytes(self) -> int:
        """Bytes of answers kept now."""
        return self._bytes
