"""Process hooks: uncaught exceptions, SIGTERM and interpreter exit end the attempt.

Each hook does the telemetry first (never raising), then hands over to what was there before,
so the user's program behaves exactly as without the library:

- ``sys.excepthook``: the previous hook runs with the same exception (it prints the traceback);
- ``threading.excepthook``: likewise, for exceptions that end a non-main thread;
- ``SIGTERM``: a previous Python handler is called; ``SIG_IGN`` is honoured (nothing is
  recorded); otherwise, when the program asked for it (``init(raise_on_sigterm=True)``),
  :class:`Preempted` is raised in the main thread, so its ``finally`` blocks run; else the
  default action is restored and the signal re-raised, so the exit status stays "killed by
  SIGTERM" (143 under a shell). A program that handles the signal (its own handler, or
  :class:`Preempted`) goes on recording: ``on_sigterm(True)``, and the attempt ends at its real
  exit (the ``atexit`` hook, an ``os._exit`` the program calls, or its own ``end()``), so a
  checkpoint saved after the signal is part of it; one that does not is ended at once
  (``on_sigterm(False)``) and dies by the signal. A SIGTERM that
  arrives while the attempt's end is being recorded and flushed (a rank failing on its own gets
  torchrun's SIGTERM just then: its peer died first) takes that action once the end returns,
  not in the middle of its flush, which would lose the spans the end records;
- ``atexit``: runs at a normal interpreter exit.

Hooks are only active in the process that installed them (not in forked children).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, NoReturn

from ._errors import log_once

ExceptionCallback = Callable[[BaseException], None]


class Preempted(SystemExit):
    """Raised in the main thread on SIGTERM, once the preemption is recorded, by a session
    started with ``raise_on_sigterm=True``. A ``SystemExit``: ``except Exception`` does not catch
    it, ``finally`` blocks run, and uncaught it ends the interpreter quietly with
    :attr:`exit_status` (128 + the signal: 143). The session records on until the exit (a
    checkpoint saved in ``except Preempted``), where the attempt ends ``preempted``."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        self.signum = int(signum)
        """The signal received."""
        self.exit_status = 128 + self.signum
        """What a shell reports for a process ended by the signal."""
        super().__init__(self.exit_status)

    def __str__(self) -> str:
        return f"received signal {self.signum}"


class ProcessHooks:
    """Installs and chains the process hooks; the callbacks must not raise (they are guarded)."""

    def __init__(
        self,
        *,
        on_exception: ExceptionCallback,
        on_thread_exception: ExceptionCallback,
        on_sigterm: Callable[[bool], None],
        on_exit: Callable[[], None],
        raise_on_sigterm: bool = False,
        defer: Callable[[Callable[[], None]], bool] | None = None,
    ) -> None:
        self._raise_on_sigterm = raise_on_sigterm
        self._defer = defer
        """``defer(action)``: True when the attempt's end is running in this thread and will
        call ``action`` when it returns (``Session.defer_while_ending``)."""
        self._on_exception = on_exception
        self._on_thread_exception = on_thread_exception
        self._on_sigterm = on_sigterm
        """``on_sigterm(handled)``: ``handled`` when the program stops by itself (its own
        handler, or :class:`Preempted`): the attempt then ends at the exit, not now."""
        self._on_exit = on_exit
        self._pid = os.getpid()
        self._prev_excepthook = sys.excepthook
        self._prev_thread_hook = threading.excepthook
        self._prev_sigterm: Any = None
        self._sigterm_installed = False

    def install(self) -> None:
        """Install every hook (SIGTERM only from the main thread, as Python requires)."""
        self._prev_excepthook = sys.excepthook
        sys.excepthook = self._excepthook
        self._prev_thread_hook = threading.excepthook
        threading.excepthook = self._thread_hook
        atexit.register(self._atexit)
        if threading.current_thread() is threading.main_thread():
            self._prev_sigterm = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self._sigterm)
            self._sigterm_installed = True
        else:
            log_once("hooks.sigterm", "init() not on the main thread: SIGTERM is not captured")

    def _mine(self) -> bool:
        return os.getpid() == self._pid

    def _guarded(self, callback: Callable[[], None], key: str) -> None:
        try:
            if self._mine():
                callback()
        except Exception:
            log_once(key, "ETT %s hook failed (ignored)", key, exc_info=True)

    def _excepthook(
        self,
        exc_type: type[BaseException],
        exc: BaseException,
        tb: TracebackType | None,
    ) -> None:
        self._guarded(lambda: self._on_exception(exc), "excepthook")
        self._prev_excepthook(exc_type, exc, tb)

    def _thread_hook(self, args: threading.ExceptHookArgs) -> None:
        exc = args.exc_value
        if exc is not None and not isinstance(exc, SystemExit):
            self._guarded(lambda: self._on_thread_exception(exc), "threading.excepthook")
        self._prev_thread_hook(args)

    def _sigterm(self, signum: int, frame: FrameType | None) -> None:
        if self._defer is not None and self._mine():
            try:
                held = self._defer(lambda: self._on_signal(signum, frame))
            except Exception:
                log_once("sigterm.defer", "ETT could not hold SIGTERM (ignored)", exc_info=True)
                held = False
            if held:
                return
        self._on_signal(signum, frame)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        prev = self._prev_sigterm
        if prev == signal.SIG_IGN:  # the program ignores SIGTERM: so does its telemetry
            log_once("hooks.sigterm_ignored", "SIGTERM ignored (SIG_IGN, as the program set)")
            return
        raising = self._raise_on_sigterm and self._mine()
        handled = callable(prev) or raising
        self._guarded(lambda: self._on_sigterm(handled), "sigterm")
        if handled and self._mine():
            self._end_at_os_exit()
        if callable(prev):
            prev(signum, frame)
            return
        if raising:
            raise Preempted(signum)
        # SIG_DFL, or a handler installed outside Python: die by the signal, as without us.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _end_at_os_exit(self) -> None:
        """After a SIGTERM the program handles, the attempt ends at the exit: the ``atexit`` hook,
        or ``os._exit`` (which skips it: a trainer that leaves a failed rank at once, past the
        process groups' destructors), so the latter ends it first while a session is open."""
        real = os._exit
        if getattr(real, "_ett_hooks", None) is self:
            return

        def _exit(status: int) -> NoReturn:
            try:
                self._guarded(self._on_exit, "os._exit")
            except KeyboardInterrupt:
                pass
            finally:
                real(status)

        _exit._ett_hooks = self  # type: ignore[attr-defined]
        os._exit = _exit

    def _atexit(self) -> None:
        """The end at the interpreter's exit. A Ctrl-C during its flush is said in one line
        (the session's), not as a traceback; the exit status stays the program's: an ``atexit``
        hook can change it only with ``os._exit``, which would skip the exit handlers registered
        before the library's (logging's flush, multiprocessing's clean-up)."""
        try:
            self._guarded(self._on_exit, "atexit")
        except KeyboardInterrupt as exc:
            if not getattr(exc, "_ett_said", False):
                log_once(
                    "hooks.atexit_interrupted",
                    "ETT: the attempt's end at exit was interrupted (KeyboardInterrupt)",
                )
