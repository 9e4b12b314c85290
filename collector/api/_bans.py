"""A small per-address ban for wrong tokens: guessing costs the guesser, not the collector.

An address that sends ``max_failures`` wrong tokens (or tokens in the URL) within ``ban_s`` of
its first one has every request without a valid token answered 429 with ``Retry-After`` for
``ban_s`` from the last of them. A request with a valid token still passes: many clients share
an address (a host, a NAT, a proxy), and one with a stale token must not lock out the others.
So the ban does not stop a guess that is right: what defeats guessing is the tokens' length
(at least 16 characters; ``openssl rand -hex 32`` gives 64). The ban keeps a guesser's wrong
tokens from being counted and logged one by one, and shows them in
``ett_auth_refusals_total{reason="banned"}``. Each server process keeps its own table of at most
:data:`MAX_ADDRESSES` addresses (the least recently failing one is forgotten first), so a flood
from many addresses costs bounded memory.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("ett_collector.auth")

MAX_ADDRESSES = 10_000


@dataclass
class _Record:
    first: float
    failures: int
    banned_until: float = 0.0


class Bans:
    """Failures per address and the bans they earn (thread-safe)."""

    def __init__(
        self, max_failures: int, ban_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_failures = max_failures
        self.ban_s = ban_s
        self._clock = clock
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._lock = threading.Lock()

    def banned_for(self, address: str) -> int | None:
        """Whole seconds (at least 1) until ``address`` may try again; None when not banned."""
        record = self._records.get(address)  # a dict read: no lock on the hot path
        if record is None or record.banned_until == 0.0:
            return None
        left = record.banned_until - self._clock()
        return max(1, math.ceil(left)) if left > 0 else None

    def failed(self, address: str) -> None:
        """Count one wrong token from ``address``; ban it at :attr:`max_failures` within
        :attr:`ban_s`."""
        now = self._clock()
        with self._lock:
            record = self._records.pop(address, None)
            if record is None or now - record.first > self.ban_s:
                record = _Record(first=now, failures=0)
            record.failures += 1
            self._records[address] = record  # most recent last
            if record.failures >= self.max_failures:
                if record.banned_until <= now:
                    log.warning(
                        "address %s sent %d wrong tokens in %.0f s: refused for %.0f s",
                        address,
                        record.failures,
                        now - record.first,
                        self.ban_s,
                    )
                record.banned_until = now + self.ban_s
            while len(self._records) > MAX_ADDRESSES:
                self._records.popitem(last=False)

    def banned_addresses(self) -> int:
        """Addresses banned now."""
        now = self._clock()
        return sum(1 for r in list(self._records.values()) if r.banned_until > now)
