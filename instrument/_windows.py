"""Training windows: turn the hot loop's step counters into ``ett.train.window`` spans.

The training thread only increments two integers and stores one clock reading, the instant of
its last step (:meth:`ett.Session.step`). A daemon thread polls them every ``poll_s`` (a
tenth of a window, at most 1 s). Every ``window_s`` it emits one window covering the steps since
the previous window, ending at the instant of the last step it saw (without that instant: the
poll at which it saw the counters move); the next window starts where this one ended, so windows
tile the training time, and the last window (at exit) ends exactly at the last ``step()`` call,
not at the next poll.

Decision (heartbeat): a window is emitted only when at least one step completed since the last
one. While the loop runs, that is one window per ``window_s``: the heartbeat. A loop that stops
stepping (a hang before an NCCL timeout, a long eval) emits no window, so the collector's
``progress(a)`` stays at the last real step, which is what docs/metrics.md needs to charge a
hang to ``failure`` rather than to training; liveness during an eval or a checkpoint comes from
that span when it ends, and a silent rank is shown *presumed dead* after three windows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

WindowSink = Callable[[int, int, int, int, int], None]
"""Called as ``sink(start_ns, end_ns, step_first, step_last, samples)`` to emit one window."""

Counters = Callable[[], tuple[int, int]]
"""Returns ``(steps completed, samples consumed)`` so far."""

Instant = Callable[[], int]
"""Returns the unix-nanosecond instant of the last step (0: not known)."""


class WindowClock:
    """Decides window boundaries from polled counters; thread-safe; emits through a sink."""

    def __init__(
        self,
        counters: Counters,
        sink: WindowSink,
        window_s: float,
        last_step_ns: Instant | None = None,
    ) -> None:
        self._counters = counters
        self._last_step_ns = last_step_ns
        self._sink = sink
        self._window_ns = int(max(window_s, 0.001) * 1e9)
        self._lock = threading.Lock()
        self._started = False
        self._resume_step = 0
        self._window_start_ns = 0
        self._emitted = (0, 0)
        self._seen = (0, 0)
        self._progress_ns = 0

    def start(self, start_ns: int, resume_step: int, count_from_zero: bool = False) -> None:
        """Training begins at ``start_ns`` (the first batch), at global step ``resume_step``.
        Steps counted before count toward the first window only with ``count_from_zero``."""
        with self._lock:
            if self._started:
                return
            self._started = True
            self._resume_step = resume_step
            self._window_start_ns = start_ns
            self._progress_ns = start_ns
            self._emitted = self._seen = (0, 0) if count_from_zero else self._counters()

    @property
    def resume_step(self) -> int:
        """The global step of the first step counted (set by :meth:`start`)."""
        return self._resume_step

    def tick(self, now_ns: int | None = None) -> None:
        """One poll: note progress; emit a window when ``window_s`` has passed and steps moved."""
        self._poll(now_ns, final=False)

    def flush(self, now_ns: int | None = None) -> None:
        """The last window, at exit: up to now if steps moved since the last poll."""
        self._poll(now_ns, final=True)

    def _poll(self, now_ns: int | None, final: bool) -> None:
        now_ns = time.time_ns() if now_ns is None else now_ns
        with self._lock:
            if not self._started:
                return
            counts = self._counters()
            if counts[0] != self._seen[0]:
                self._seen = counts
                self._progress_ns = self._step_instant(now_ns)
            if final or now_ns - self._window_start_ns >= self._window_ns:
                self._emit_locked(self._progress_ns)

    def _step_instant(self, now_ns: int) -> int:
        """The last step's own instant when known (read after the counters: it belongs to the
        last counted step or to one just after it), else the poll's ``now_ns``."""
        instant = self._last_step_ns() if self._last_step_ns is not None else 0
        if instant <= 0:
            return now_ns
        return min(now_ns, max(instant, self._progress_ns))

    def _emit_locked(self, end_ns: int) -> None:
        steps, samples = self._seen
        done_steps, done_samples = self._emitted
        if steps <= done_steps:
            return
        first = self._resume_step + done_steps
        last = self._resume_step + steps - 1
        start_ns = self._window_start_ns
        self._emitted = self._seen
        self._window_start_ns = max(end_ns, start_ns)
        self._sink(start_ns, self._window_start_ns, first, last, samples - done_samples)


class PollThread:
    """A daemon thread that calls ``poll()`` every ``interval()`` seconds until stopped."""

    def __init__(self, poll: Callable[[], None], interval: Callable[[], float]) -> None:
        self._poll = poll
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ett-windows", daemon=True)

    def start(self) -> None:
        """Start polling."""
        self._thread.start()

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop polling and wait (briefly) for the thread."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.wait(self._interval()):
            try:
                self._poll()
            except Exception:  # the sinks log their own errors; keep the heartbeat alive
                pass


STARTUP_POLL_S = 0.02
"""Poll interval before the first batch, to catch the first ``step()`` (without a clock read in
it) when the trainer does not call ``first_batch()``."""


def poll_interval(window_s: float) -> float:
    """How often the window thread polls the counters: a tenth of a window, 10 ms to 1 s."""
    return min(1.0, max(0.01, window_s / 10.0))
