"""Post-import callbacks and import timing, from one finder on ``sys.meta_path``.

Zero-code instrumentation starts before the program imports torch, so it cannot patch torch
then; instead it asks to be called when ``torch.distributed`` (say) has been executed, and it
times the program's imports during start-up (they are most of a PyTorch process's start).
An :class:`ImportWatch` finds each module's spec through the finders after it and wraps that
spec's own loader's ``exec_module`` (on the loader instance, and only a loader of that one
module: its type, and so ``inspect`` and ``importlib.resources``, are unchanged). A module
already imported when the watch is installed gets its callback at once. Neither callbacks nor
the timer ever raise into the import.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from ._errors import log_once

Callback = Callable[[ModuleType], None]
Timer = Callable[[int, int], None]
"""Called as ``timer(start_ns, end_ns)`` for each outermost import the main thread ran."""


def _run(name: str, callback: Callback, module: ModuleType) -> None:
    try:
        callback(module)
    except Exception:
        log_once(f"import_watch.{name}", "ETT hook for %s failed (ignored)", name, exc_info=True)


class ImportWatch(MetaPathFinder):
    """Calls ``callbacks[name](module)`` once, after module ``name`` is executed; while
    ``timer`` is set, reports each outermost module execution of the main thread to it."""

    def __init__(self, callbacks: dict[str, Callback], timer: Timer | None = None) -> None:
        self._callbacks = dict(callbacks)
        self._timer = timer
        self._lock = threading.Lock()
        self._busy: set[str] = set()
        self._main = threading.main_thread().ident
        self._depth = 0
        self._in_timer = False

    def install(self) -> None:
        """Put the watch first on ``sys.meta_path``; modules already imported are handled now."""
        for name in list(self._callbacks):
            module = sys.modules.get(name)
            if module is not None:
                _run(name, self._callbacks.pop(name), module)
        if (self._callbacks or self._timer) and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def stop_timing(self) -> None:
        """Stop timing imports (the watch leaves once its callbacks have run too)."""
        with self._lock:
            self._timer = None
            done = not self._callbacks
        if done:
            self.uninstall()

    def uninstall(self) -> None:
        """Stop watching (callbacks not yet run never will)."""
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        with self._lock:
            if fullname in self._busy or (fullname not in self._callbacks and not self._timer):
                return None
            self._busy.add(fullname)
        try:
            spec = self._find_after_me(fullname, path, target)
        finally:
            with self._lock:
                self._busy.discard(fullname)
        loader = spec.loader if spec is not None else None
        if (
            loader is None
            or isinstance(loader, type)  # a class (built-in, frozen): never patch it
            or getattr(loader, "name", None) != fullname  # a loader shared by modules (zip)
            or not hasattr(loader, "exec_module")
        ):
            return spec
        with self._lock:
            callback = self._callbacks.pop(fullname, None)
            finished = not self._callbacks and not self._timer
        if finished:
            self.uninstall()
        self._wrap(loader, fullname, callback)
        return spec

    def _find_after_me(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec: ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _wrap(self, loader: Any, fullname: str, callback: Callback | None) -> None:
        exec_module = loader.exec_module
        pending = [callback] if callback is not None else []  # once, even if reloaded

        def exec_then_call(module: ModuleType) -> None:
            outer = self._timer is not None and self._depth == 0 and not self._in_timer
            outer = outer and threading.get_ident() == self._main
            start = time.time_ns() if outer else 0
            if threading.get_ident() == self._main:
                self._depth += 1
            try:
                exec_module(module)
            finally:
                if threading.get_ident() == self._main:
                    self._depth -= 1
                if outer:
                    self._time(start, time.time_ns())
            while pending:
                _run(fullname, pending.pop(), module)

        try:
            loader.exec_module = exec_then_call
        except (AttributeError, TypeError):
            log_once(f"import_watch.wrap.{fullname}", "cannot watch the import of %s", fullname)

    def _time(self, start_ns: int, end_ns: int) -> None:
        timer = self._timer
        if timer is None:
            return
        self._in_timer = True  # imports the timer itself causes are not timed
        try:
            timer(start_ns, end_ns)
        except Exception:
            log_once("import_watch.timer", "ETT import timer failed (ignored)", exc_info=True)
        finally:
            self._in_timer = False
