"""When the ingest route asks a client to come back later, and for how long.

Two reasons, both answered with a status OTLP exporters retry (``Retry-After`` honoured):

- :class:`OutageClock`: the database cannot take spans now (503). ``Retry-After`` grows with the
  outage: :data:`~ett_collector.storage.RETRY_AFTER_S` at first, then the age of the outage so far
  (at most :data:`MAX_RETRY_AFTER_S`). An SDK exporter retries a batch 6 times, honouring the
  header, so a batch first refused as an outage begins is retried after 2, 2, 4, 8 and 16 s: it
  outlives an outage of about 30 s when the exporter's timeout allows it (its default 10 s
  stops after about 8 s), and clients back off further while a long outage lasts instead of
  knocking on a database that is starting.
- :class:`InflightBudget`: too many decoded bytes are being ingested at once (429). The bytes of a
  request are charged while it is read, decoded and stored, and given back when it is answered,
  so the memory that concurrent large requests hold stays bounded. A request is admitted
  whenever nothing else is in flight, so one request of any accepted size always gets through.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Final

from ..storage import RETRY_AFTER_S

MAX_RETRY_AFTER_S: Final = 30
"""The longest ``Retry-After`` (seconds) answered during a database outage."""

BUSY_RETRY_AFTER_S: Final = 1
"""``Retry-After`` (seconds) of a request refused because the in-flight budget is spent."""


class OutageClock:
    """How long a refused client should wait: the age of the current outage, bounded."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: float | None = None
        self._lock = threading.Lock()

    def refused(self) -> int:
        """Note a write refused for a passing reason; the ``Retry-After`` to answer, in seconds."""
        now = self._clock()
        with self._lock:
            if self._since is None:
                self._since = now
            age = now - self._since
        return min(MAX_RETRY_AFTER_S, max(RETRY_AFTER_S, math.ceil(age)))

    def stored(self) -> None:
        """Note a write that went through: the outage, if any, is over."""
        if self._since is not None:
            with self._lock:
                self._since = None


class Busy(Exception):
    """The in-flight budget cannot take a request now; retry after ``retry_after_s``."""

    def __init__(self, wanted: int, inflight: int, limit: int) -> None:
        super().__init__(
            f"the collector is ingesting {inflight} bytes and a request of {wanted} more would "
            f"pass ETT_MAX_INFLIGHT_BYTES={limit}; retry"
        )
        self.retry_after_s = BUSY_RETRY_AFTER_S


class InflightBudget:
    """A bound on the decoded bytes of requests being ingested at once (thread-safe).

    :meth:`charge` never waits: it takes the bytes or raises :class:`Busy`. A :class:`Ticket`
    holds what one request was charged, and gives it all back once.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the in-flight limit must be positive, got {limit}")
        self.limit = limit
        self._inflight = 0
        self._peak = 0
        self._lock = threading.Lock()

    @property
    def inflight(self) -> int:
        """Bytes charged now."""
        return self._inflight

    @property
    def peak(self) -> int:
        """The most bytes charged at once since start."""
        return self._peak

    def ticket(self) -> Ticket:
        """A new, empty charge for one request."""
        return Ticket(self)

    def _take(self, n: int, held: int) -> None:
        with self._lock:
            others = self._inflight - held
            if others > 0 and self._inflight + n > self.limit:
                raise Busy(n, self._inflight, self.limit)
            self._inflight += n
            self._peak = max(self._peak, self._inflight)

    def _give(self, n: int) -> None:
        with self._lock:
            self._inflight -= n


class Ticket:
    """The bytes one request holds of an :class:`InflightBudget`; a context manager that gives
    them back on exit."""

    def __init__(self, budget: InflightBudget) -> None:
        self._budget = budget
        self.held = 0

    def charge_up_to(self, total: int) -> None:
        """Hold ``total`` bytes in all (no change when already holding as many); raises
        :class:`Busy` when the budget cannot take the difference and others hold some."""
        extra = total - self.held
        if extra > 0:
            self._budget._take(extra, self.held)
            self.held = total

    def release(self) -> None:
        """Give back everything held (idempotent)."""
        if self.held:
            self._budget._give(self.held)
            self.held = 0

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
