"""Fault injection and the hang watchdog.

A :class:`FaultSpec` names one fault: what kind, at which step, on which rank and attempt.
:func:`inject` makes it happen the way a real failure would look from outside:

- ``exception``: a Python exception escapes the training loop (the trainer records it and exits 1);
- ``sigkill``: the process vanishes without a word (no span is exported: the collector infers it);
- ``sigterm``: the process is asked to stop, as a scheduler preempting it would;
- ``hang``: the process stops progressing; its :class:`Watchdog` ends it after ``--watchdog-s``;
- ``collective``: the rank raises while its own all-reduce on the default group is still in
  flight, and every other rank waits for it in a barrier of the checkpoint group (the shape of a
  rank failing mid-way through overlapped communication while its peers moved on). Tearing this
  down with ``destroy_process_group`` waits for that all-reduce, which waits for the peers, who
  wait for the failed rank: it hangs until the collective timeout, on gloo and NCCL alike. Only
  aborting the groups (``trainer.distributed.shutdown``) or the exit watchdog ends it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

FAIL_KINDS = ("exception", "sigkill", "sigterm", "hang", "collective")
WATCHDOG_EXIT_CODE = 124
"""Exit status of a process the watchdog ended (the same as coreutils ``timeout``)."""


class InjectedFault(RuntimeError):
    """The exception that ``--fail-kind exception`` raises."""


class WatchdogTimeout(RuntimeError):
    """Reported (as ``error.type``) when the watchdog ends a process that stopped progressing."""


@dataclass(frozen=True)
class FaultSpec:
    """One fault to inject: ``kind`` at the start of ``step`` on ``rank`` in ``attempt``.

    ``attempt`` -1 fires in every attempt (a job that can never get past the step).
    """

    kind: str
    step: int
    rank: int = 0
    attempt: int = 0

    def __post_init__(self) -> None:
        if self.kind not in FAIL_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAIL_KINDS}")
        if self.step < 0 or self.rank < 0 or self.attempt < -1:
            raise ValueError(f"bad fault {self}: step and rank must be >= 0, attempt >= -1")

    def fires(self, step: int, rank: int, attempt: int) -> bool:
        """True when this fault is due at ``step`` on ``rank`` in ``attempt``."""
        return step == self.step and rank == self.rank and self.attempt in (-1, attempt)

    def holds(self, step: int, rank: int, attempt: int) -> bool:
        """True when ``rank`` (not the faulting one) must wait in a collective at ``step``."""
        due = step == self.step and self.attempt in (-1, attempt)
        return self.kind == "collective" and due and rank != self.rank

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """Parse ``KIND@STEP[:rank=R][:attempt=A]``, e.g. ``sigkill@120:rank=1``."""
        head, *opts = text.split(":")
        kind, sep, step = head.partition("@")
        if not sep:
            raise ValueError(f"expected KIND@STEP, got {text!r}")
        fields: dict[str, int] = {}
        for opt in opts:
            key, eq, value = opt.partition("=")
            if not eq or key not in ("rank", "attempt"):
                raise ValueError(f"unknown fault option {opt!r} in {text!r}")
            fields[key] = int(value)
        return cls(kind=kind.strip(), step=int(step), **fields)


def inject(
    spec: FaultSpec,
    *,
    step: int,
    hang_s: float = 10**9,
    in_flight: Callable[[], object] | None = None,
) -> None:
    """Make the fault in ``spec`` happen now (it is due at ``step``). ``in_flight`` starts the
    collective that a ``collective`` fault leaves in flight (see the module docstring)."""
    if spec.kind == "exception":
        raise InjectedFault(f"injected fault at step {step} on rank {spec.rank}")
    if spec.kind == "collective":
        if in_flight is not None:
            in_flight()
        raise InjectedFault(
            f"injected fault at step {step} on rank {spec.rank}, a collective in flight"
        )
    if spec.kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif spec.kind == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    elif spec.kind == "hang":
        time.sleep(hang_s)  # the watchdog (or a collective timeout) ends the process first
    time.sleep(5)  # a signal is delivered between bytecodes: give it the chance


class Watchdog:
    """Ends the process when :meth:`beat` is not called for ``timeout_s`` seconds.

    It runs on a daemon thread and calls ``on_timeout(idle_s)`` (to record the failure; it must not
    block) before ``os._exit(WATCHDOG_EXIT_CODE)``. Disarmed while ``timeout_s`` <= 0.
    """

    def __init__(self, timeout_s: float, on_timeout: Callable[[float], None]) -> None:
        self.timeout_s = timeout_s
        self._on_timeout = on_timeout
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        """Record progress."""
        self._last = time.monotonic()

    def idle_s(self) -> float:
        """Seconds since the last :meth:`beat`."""
        return time.monotonic() - self._last

    def start(self) -> Watchdog:
        """Start watching (from now); a no-op when disarmed."""
        if self.timeout_s > 0 and self._thread is None:
            self.beat()
            self._thread = threading.Thread(target=self._run, name="ett-watchdog", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()

    def _run(self) -> None:
        period = min(1.0, self.timeout_s / 4)
        while not self._stop.wait(period):
            idle = self.idle_s()
            if idle >= self.timeout_s:
                try:
                    self._on_timeout(idle)
                finally:
                    os._exit(WATCHDOG_EXIT_CODE)
