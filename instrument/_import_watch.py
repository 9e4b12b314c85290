"""Post-import callbacks: run a function right after a named module finishes importing.

Zero-code instrumentation starts before the program imports torch, so it cannot patch torch
then; instead it asks to be called when ``torch.distributed`` (say) has been executed. An
:class:`ImportWatch` on ``sys.meta_path`` finds the module's spec through the finders after it,
and wraps that spec's own loader's ``exec_module`` (on the loader instance: its type, and so
``inspect`` and ``importlib.resources``, are unchanged). A module already imported when the
watch is installed gets its callback at once. Callbacks never raise into the import.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from ._errors import log_once

Callback = Callable[[ModuleType], None]


def _run(name: str, callback: Callback, module: ModuleType) -> None:
    try:
        callback(module)
    except Exception:
        log_once(f"import_watch.{name}", "ETT hook for %s failed (ignored)", name, exc_info=True)


class ImportWatch(MetaPathFinder):
    """Calls ``callbacks[name](module)`` once, after module ``name`` is executed."""

    def __init__(self, callbacks: dict[str, Callback]) -> None:
        self._callbacks = dict(callbacks)
        self._lock = threading.Lock()
        self._busy: set[str] = set()

    def install(self) -> None:
        """Put the watch first on ``sys.meta_path``; modules already imported are handled now."""
        for name in list(self._callbacks):
            module = sys.modules.get(name)
            if module is not None:
                _run(name, self._callbacks.pop(name), module)
        if self._callbacks and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        """Stop watching (callbacks not yet run never will)."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        with self._lock:
            if fullname not in self._callbacks or fullname in self._busy:
                return None
            self._busy.add(fullname)
        try:
            spec = self._find_after_me(fullname, path, target)
        finally:
            with self._lock:
                self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        with self._lock:
            callback = self._callbacks.pop(fullname, None)
            if not self._callbacks:
                self.uninstall()
        if callback is not None:
            self._wrap(spec.loader, fullname, callback)
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

    @staticmethod
    def _wrap(loader: Any, fullname: str, callback: Callback) -> None:
        exec_module = loader.exec_module

        def exec_then_call(module: ModuleType) -> None:
            exec_module(module)
            _run(fullname, callback, module)

        try:
            loader.exec_module = exec_then_call
        except (AttributeError, TypeError):
            log_once(f"import_watch.wrap.{fullname}", "cannot watch the import of %s", fullname)
