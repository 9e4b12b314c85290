"""The exit watchdog: a rank that recorded its failure must leave, or torchrun never restarts.

A failed rank's way out can hang: a collective its peer never joins, a communicator destroyed
while a peer still sits in a collective (``destroy_process_group`` on NCCL), an export thread, a
checkpoint writer. torchelastic restarts a job only when a worker *exits*, so until the hang ends
(a collective timeout: 10 minutes by default, or never) the whole job is stuck, and that time
shows as ``failure`` in the attempt's shutdown.

Once the attempt has ended as not completed and its spans are flushed, :class:`ExitWatchdog`
gives the process ``timeout_s`` more to exit. If it is still alive then, it records the hang as
one more ``ett.failure`` (the attempt's cause, ``error.type`` ``ExitTimeout``, the phase the
program said it was in via :meth:`ExitWatchdog.phase`, and the main thread's stack), flushes for
at most ``flush_s`` and leaves with ``os._exit(EXIT_CODE)``.

Two threads do it, so that a hang holding the GIL (a C++ destructor, say) cannot stop it: a
daemon Python thread that records and exits, and ``faulthandler.dump_traceback_later(...,
exit=True)`` as a backstop ``flush_s + 1`` seconds later; that one needs no GIL, prints every
thread's stack to stderr and exits with status 1 (the hang then goes unrecorded).

Not armed in an interactive interpreter (a REPL or notebook lives on after a failure), and
disarmed when a new session starts in the same process (an in-process retry).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from ._errors import log_once

EXIT_CODE = 124
"""Exit status of a process the exit watchdog ended (as coreutils ``timeout``)."""

ERROR_TYPE = "ExitTimeout"
"""``error.type`` of the ``ett.failure`` that records a hang on the way out."""

DEFAULT_PHASE = "exit"
"""The phase reported when the program named none after its failure."""

BACKSTOP_SLACK_S = 1.0
"""How long after the Python thread's deadline (plus its flush) the native backstop fires."""

HangRecorder = Callable[[str, str, str, float], None]
"""Called as ``record(cause, phase, stack, waited_s)`` to emit the hang's ``ett.failure``."""

Flush = Callable[[float], None]
"""Flushes the span pipeline within a timeout (seconds)."""

_STACK_FRAMES = 12


def _interactive() -> bool:
    return bool(getattr(sys, "ps1", None)) or bool(sys.flags.interactive)


def _stderr() -> Any:
    """Where the native backstop writes: ``sys.stderr``, or the interpreter's own when
    ``sys.stderr`` has no file descriptor (``torch.distributed``'s excepthook swaps in a
    ``StringIO`` while it calls the previous hook, ours, which arms the watchdog)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None and stream.fileno() >= 0:
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return sys.stderr  # faulthandler says why it cannot: logged once by arm()


def main_thread_stack(limit: int = _STACK_FRAMES) -> str:
    """The innermost ``limit`` frames of the main thread, formatted (empty when unknown)."""
    ident = threading.main_thread().ident
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is None:
        return ""
    return "".join(traceback.format_stack(frame)[-limit:])


class ExitWatchdog:
    """Ends a failed process that does not exit (module docstring). Disabled when
    ``timeout_s`` <= 0. Thread-safe; no method raises."""

    def __init__(
        self,
        timeout_s: float,
        record: HangRecorder,
        flush: Flush,
        *,
        flush_s: float = 2.0,
    ) -> None:
        self.timeout_s = float(timeout_s)
        self._record = record
        self._flush = flush
        self._flush_s = max(0.0, flush_s)
        self._phase = DEFAULT_PHASE
        self._lock = threading.Lock()
        self._expecting = False
        self._armed = False
        self._fired = False
        self._cancel = threading.Event()
        self._pid = os.getpid()

    @property
    def enabled(self) -> bool:
        """True when a timeout is set (``ETT_EXIT_TIMEOUT_S`` > 0)."""
        return self.timeout_s > 0

    @property
    def armed(self) -> bool:
        """True while the clock runs (the process is expected to exit)."""
        return self._armed

    @property
    def keeps_pipeline_open(self) -> bool:
        """True from :meth:`expect` until the watchdog fired or was disarmed: the span pipeline
        must outlive the attempt's end, so the hang can still be exported."""
        return (self._expecting or self._armed) and not self._fired

    def phase(self, name: str) -> None:
        """Name what the process is doing on its way out (``abort_process_groups``, say): a hang
        is reported in the last phase named."""
        self._phase = str(name) or DEFAULT_PHASE

    @property
    def current_phase(self) -> str:
        """The last phase named (``exit`` when none was)."""
        return self._phase

    def expect(self) -> None:
        """A failed end is under way: keep the pipeline open for a possible hang record."""
        if self.enabled and not _interactive():
            self._expecting = True

    def arm(self, cause: str) -> None:
        """Start the clock (after the failure's flush): exit within ``timeout_s`` or be ended.
        A second call does nothing."""
        if not self.enabled or _interactive() or os.getpid() != self._pid:
            self._expecting = False
            return
        with self._lock:
            if self._armed or self._fired:
                return
            self._armed = True
            self._cancel.clear()
        try:
            faulthandler.dump_traceback_later(
                self.timeout_s + self._flush_s + BACKSTOP_SLACK_S, exit=True, file=_stderr()
            )
        except Exception:
            log_once("watchdog.backstop", "exit watchdog: no faulthandler backstop", exc_info=True)
        thread = threading.Thread(
            target=self._run, args=(cause,), name="ett-exit-watchdog", daemon=True
        )
        thread.start()

    def disarm(self) -> None:
        """Stop the clock: the process lives on (a new attempt in the same process, say)."""
        with self._lock:
            was_armed = self._armed
            self._armed = False
            self._expecting = False
            self._cancel.set()
        if was_armed:
            try:
                faulthandler.cancel_dump_traceback_later()
            except Exception:
                pass

    def _run(self, cause: str) -> None:
        if self._cancel.wait(self.timeout_s):
            return
        with self._lock:
            if not self._armed:
                return
            self._fired = True
        try:
            self._record(cause, self._phase, main_thread_stack(), self.timeout_s)
            self._flush(self._flush_s)
        except Exception:
            log_once("watchdog.record", "exit watchdog: could not record the hang", exc_info=True)
        finally:
            try:
                sys.stderr.write(
                    f"ett: still running {self.timeout_s:g} s after the failure was recorded "
                    f"(phase {self._phase}): exiting with status {EXIT_CODE}\n"
                )
                sys.stderr.flush()
            finally:
                os._exit(EXIT_CODE)
