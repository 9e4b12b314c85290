"""What zero-code instrumentation times in a plain PyTorch program, hooked as torch is imported.

Until the first batch, the main thread's imports are timed as the start-up phase ``imports``
(:class:`ImportPhases`). Each hook reuses the library's own integrations
(:mod:`ett.torch_hooks`) and runs when its torch module has been imported
(:class:`~ett._import_watch.ImportWatch`):

- ``torch.distributed``: ``init_process_group`` as the start-up phase ``pg_init`` and
  ``destroy_process_group`` as ``ett.shutdown.pg_teardown``;
- ``torch.nn.parallel.distributed``: wrapping a model in ``DistributedDataParallel`` before the
  first batch as the start-up phase ``model_init``, a barrier (its constructor broadcasts the
  parameters and compares their shapes across ranks: the ranks wait there for the last one);
  and every DDP model's wait for its gradient all-reduce, each step (``ett.window.wait_s``,
  beside the program's own communication hook: ``ett._auto_ddp``);
- ``torch.distributed.checkpoint``: ``save``, ``async_save`` and ``load`` as
  ``ett.checkpoint.save`` (+ ``ett.checkpoint.persist``) and the phase ``checkpoint_load``;
- ``torch.distributed.checkpoint.state_dict``: the optimizer step that ``get_state_dict`` takes
  to initialise an empty optimizer's state is not counted as training;
- ``torch.optim.optimizer``: a global optimizer step post-hook: each step of the first optimizer
  that steps is one ``Session.step()``, and its first step is the first batch;
- ``torch._dynamo``: ``install_compile_hooks`` (an ``ett.compile`` span per compilation).

The global step of a checkpoint is the integer at key ``step`` (or ``global_step``,
``iteration``) of the saved or restored state dict when it has one (a restore then also sets the
step training resumes at), else the steps counted so far.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from opentelemetry.util.types import AttributeValue

from . import _auto_ddp, semconv
from ._config import ddp_waits_enabled
from ._errors import log_once
from ._import_watch import Callback, ImportWatch
from ._session import Session, span_sink, wait_sink
from ._spans import SpanSink

STEP_KEYS = ("step", "global_step", "iteration")
"""State-dict keys read as the checkpoint's global step."""


def step_of(state_dict: Any) -> int | None:
    """The global step a state dict records at one of :data:`STEP_KEYS` (an int or a
    one-element integer tensor), else None."""
    if not isinstance(state_dict, Mapping):
        return None
    for key in STEP_KEYS:
        value = state_dict.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        numel = getattr(value, "numel", None)
        is_float = getattr(value, "is_floating_point", None)
        item = getattr(value, "item", None)
        if not (callable(numel) and callable(is_float) and callable(item)):
            continue
        if numel() == 1 and not is_float():
            return int(item())
    return None


JOIN_S = 0.02
"""Imports less than this apart are one ``imports`` span."""


class ImportPhases:
    """The start-up phase ``imports`` (part ``packages``) from timed imports: the first span starts
    where the session started (before it, the session's own start-up phases name the
    interpreter's start-up and ``sitecustomize``: ``ett._startup``); imports less than
    :data:`JOIN_S` apart join one span; a span is emitted once the next import starts later,
    or at :meth:`flush`."""

    def __init__(self, sink: SpanSink, start_ns: int) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._pending: list[int] | None = [start_ns, time.time_ns()]
        self._join_ns = int(JOIN_S * 1e9)

    def add(self, start_ns: int, end_ns: int) -> None:
        """One outermost import ran from ``start_ns`` to ``end_ns``."""
        with self._lock:
            pending = self._pending
            if pending is not None and start_ns - pending[1] <= self._join_ns:
                pending[1] = max(pending[1], end_ns)
                return
            self._pending = [start_ns, end_ns]
        if pending is not None:
            self._emit(pending)

    def flush(self) -> None:
        """Emit the span in progress (start-up is over)."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self._emit(pending)

    def _emit(self, interval: list[int]) -> None:
        phase = semconv.StartupPhaseValues.IMPORTS
        attrs: dict[str, AttributeValue] = {
            semconv.COMPONENT: semconv.default_component(phase),
            semconv.STARTUP_PART: semconv.ImportsPartValues.PACKAGES.value,
        }
        span = self._sink.start(semconv.startup_span_name(phase), attrs, interval[0])
        self._sink.end(span, end_ns=interval[1])


class AutoTorch:
    """The hooks of one zero-code session (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._local = threading.local()
        self._optimizer: weakref.ref[Any] | None = None
        self._resume_step = 0
        # from the session's start: the interpreter's start-up and the imports before it
        # (sitecustomize's own) are the session's start-up phases (ett._startup)
        self.imports = ImportPhases(span_sink(session), session.started_ns)
        self.watch = ImportWatch(self.callbacks(), timer=self.imports.add)
        session.add_end_callback(self._startup_over)

    def callbacks(self) -> dict[str, Callback]:
        """Module name → the hook to run once it is imported."""
        return {
            "torch.distributed": self._patch_distributed,
            "torch.distributed.checkpoint": self._patch_checkpoint,
            "torch.distributed.checkpoint.state_dict": self._patch_state_dict,
            "torch.nn.parallel.distributed": self._patch_ddp,
            "torch.optim.optimizer": self._hook_optimizer,
            "torch._dynamo": self._hook_compile,
        }

    def install(self) -> None:
        """Start watching (and timing) imports."""
        self.watch.install()

    def _startup_over(self) -> None:
        self.watch.stop_timing()
        self.imports.flush()

    # --- process group and checkpoints -----------------------------------------------------------

    def _inside(self) -> bool:
        return bool(getattr(self._local, "inside", False))

    def _passthrough(
        self, original: Callable[..., Any], timed: Callable[..., Any], max_args: int = 1
    ) -> Any:
        """``original`` wrapped: the first call on a thread goes to ``timed``, which calls the
        module's function again; that nested call (and a call with more than ``max_args``
        positional arguments) is ``original``'s."""

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._inside() or len(args) > max_args:
                return original(*args, **kwargs)
            self._local.inside = True
            try:
                return timed(*args, **kwargs)
            finally:
                self._local.inside = False

        return wrapper

    def _patch_distributed(self, module: ModuleType) -> None:
        from . import torch_hooks

        session = self.session

        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            return torch_hooks.init_process_group(*args, session=session, **kwargs)

        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            return torch_hooks.destroy_process_group(*args, session=session, **kwargs)

        for name, timed in (
            ("init_process_group", init_process_group),
            ("destroy_process_group", destroy_process_group),
        ):
            original = getattr(module, name, None)
            if callable(original):
                setattr(module, name, self._passthrough(original, timed, max_args=8))

    def _patch_ddp(self, module: ModuleType) -> None:
        ddp = getattr(module, "DistributedDataParallel", None)
        original = getattr(ddp, "__init__", None)
        if ddp is None or not callable(original):
            return
        session = self.session
        timing = ddp_waits_enabled()  # ETT_DDP_WAITS=0: DDP's own reduction, untimed

        @functools.wraps(original)
        def __init__(wrapped: Any, *args: Any, **kwargs: Any) -> None:
            if self._inside() or session.current_step is not None:
                original(wrapped, *args, **kwargs)
            else:
                self._local.inside = True
                try:
                    with session.startup(semconv.StartupPhaseValues.MODEL_INIT, barrier=True):
                        original(wrapped, *args, **kwargs)
                finally:
                    self._local.inside = False
            if timing and not self._inside():  # the outermost DDP constructor
                self._time_waits(wrapped)

        ddp.__init__ = __init__
        if timing:
            _auto_ddp.patch(ddp)

    def _time_waits(self, model: Any) -> None:
        """Time the DDP model's collective waits (``ett._auto_ddp``); never raises."""
        try:
            _auto_ddp.install(model, wait_sink(self.session))
        except Exception:
            log_once("auto.ddp_waits", "could not time DDP's collective waits", exc_info=True)

    def _save_step(self, state_dict: Any) -> int:
        step = step_of(state_dict)
        if step is None:
            step = self.session.current_step
        return step or 0

    def _patch_checkpoint(self, module: ModuleType) -> None:
        from . import torch_hooks

        session = self.session

        def save(state_dict: Any, **kwargs: Any) -> Any:
            step = self._save_step(state_dict)
            return torch_hooks.dcp_save(state_dict, step=step, session=session, **kwargs)

        def async_save(state_dict: Any, **kwargs: Any) -> Any:
            step = self._save_step(state_dict)
            return torch_hooks.dcp_async_save(state_dict, step=step, session=session, **kwargs)

        def load(state_dict: Any, **kwargs: Any) -> Any:
            with session.checkpoint_load() as phase:
                result = module.load(state_dict, **kwargs)  # the original: we are inside
                step = step_of(state_dict)
                if step is not None:
                    phase.set_step(step)
                    self._resume_step = step
            return result

        for name, timed in (("save", save), ("async_save", async_save), ("load", load)):
            original = getattr(module, name, None)
            if callable(original):
                setattr(module, name, self._passthrough(original, timed))

    def _patch_state_dict(self, module: ModuleType) -> None:
        original = getattr(module, "_init_optim_state", None)
        if not callable(original):
            return

        @functools.wraps(original)
        def init_optim_state(*args: Any, **kwargs: Any) -> Any:
            self._local.no_step = True
            try:
                return original(*args, **kwargs)
            finally:
                self._local.no_step = False

        setattr(module, "_init_optim_state", init_optim_state)  # noqa: B010

    # --- training progress and compile -----------------------------------------------------------

    def _hook_optimizer(self, module: ModuleType) -> None:
        register = getattr(module, "register_optimizer_step_post_hook", None)
        if not callable(register):
            log_once("auto.optimizer", "torch has no global optimizer step hook: no training")
            return
        register(self._on_optimizer_step)

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            if getattr(self._local, "no_step", False):
                return
            counted = self._optimizer() if self._optimizer is not None else None
            if counted is None:
                self._optimizer = weakref.ref(optimizer)
            elif counted is not optimizer:
                return  # only the first optimizer's steps count (one step per iteration)
            session = self.session
            if session.current_step is None:
                session.first_batch(step=self._resume_step)
                self._startup_over()
            session.step()
        except Exception:
            log_once("auto.step", "optimizer step hook failed", exc_info=True)

    def _hook_compile(self, module: ModuleType) -> None:
        from . import torch_hooks

        torch_hooks.install_compile_hooks(self.session)
