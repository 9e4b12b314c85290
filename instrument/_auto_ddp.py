"""Zero-code timing of DDP's collective waits, beside a user's own communication hook.

``ett-instrument`` times each step's wait for its gradient all-reduce (``ett.window.wait_s``,
:mod:`ett._ddp_waits`) on every ``DistributedDataParallel`` model without a line of the user's
code. DDP takes one communication hook per model, and a second registration raises; so the hook
registered here is a :class:`HookSlot`: a timed dispatcher whose inner hook starts as torch's
``allreduce_hook`` (what DDP's built-in reduction computes) and is *replaced* when the program
registers its own:

- ``model.register_comm_hook(state, hook)``: DDP's own checks run (a bad hook raises what DDP
  raises), then the slot calls ``hook`` with ``state``: the user's hook wins, its wait is timed;
- ``model._register_builtin_comm_hook(ALLREDUCE | FP16_COMPRESS)``: the same, with torch's
  Python equivalent of the built-in (``allreduce_hook``, ``fp16_compress_hook``);
- ``ett.torch_hooks.time_ddp_waits(model, state, hook)``: its hook (defined in
  :mod:`ett._ddp_waits`) times itself, so the slot stops timing (no wait counted twice).

A second user registration raises as it would without ETT. Models that the slot would change
are left alone (their waits are not timed): DDP's mixed precision, sparse gradients (an
``nn.Embedding(sparse=True)``), and the Python reducer of compiled autograd. The measured wait
with a user's hook is what the hook's future waits for, its own compression work included.
One difference from DDP's built-in reduction remains: under ``model.join(
divide_by_initial_world_size=False)`` torch's ``allreduce_hook`` still divides by the whole
group's size (as it does for a program that registers it itself).

Cost: a Python hook per gradient bucket instead of DDP's C++ reduction. On one H200 (NCCL, 403 M
parameters in 16 buckets, an 18.4 ms step) torch's ``allreduce_hook`` alone adds 0.77-0.86 ms a
step and the timed slot 0.76-0.93 ms (about 55 us a bucket; ``bench_ddp_hook_cost_cuda.py``):
the timing itself is within the noise, the Python hook is the cost.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ._ddp_waits import Hook, WaitTimer, default_hook
from ._errors import log_once

SLOT_ATTR = "_ett_hook_slot"
"""The attribute of a DDP model that holds its :class:`HookSlot`."""


class HookSlot:
    """The communication hook registered on one DDP model: ``hook(state, bucket)`` under a
    :class:`~ett._ddp_waits.WaitTimer`, until :meth:`take` swaps in the program's hook."""

    def __init__(self, state: Any, hook: Hook, add_wait: Callable[[int], None]) -> None:
        self.state = state
        self.hook = hook
        self.taken = False
        """True once the program registered its own hook (a second registration is DDP's)."""
        self.timed = True
        self.timer = WaitTimer(self._inner, add_wait)

    def _inner(self, state: Any, bucket: Any) -> Any:
        return self.hook(self.state, bucket)

    def __call__(self, bucket: Any) -> Any:
        """The reduction of one gradient bucket."""
        if self.timed:
            return self.timer(self.state, bucket)
        return self.hook(self.state, bucket)

    def take(self, state: Any, hook: Hook) -> None:
        """The program's hook replaces the default; a hook of ``ett._ddp_waits`` times itself."""
        self.state, self.hook, self.taken = state, hook, True
        self.timed = getattr(hook, "__module__", None) != WaitTimer.__module__


def _skip_reason(model: Any) -> str | None:
    """Why ``model``'s waits are left untimed, or None."""
    if getattr(model, "mixed_precision", None) is not None:
        return "DDP mixed precision"
    if getattr(model, "_use_python_reducer", False):
        return "the Python reducer (compiled autograd)"
    if getattr(model, "_comm_hooks", None):
        return "a communication hook already registered"
    module: Any = getattr(model, "module", None)
    modules = module.modules() if module is not None and hasattr(module, "modules") else ()
    if any(getattr(m, "sparse", False) is True for m in modules):
        return "sparse gradients"
    return None


def install(model: Any, add_wait: Callable[[int], None]) -> HookSlot | None:
    """Register a :class:`HookSlot` (torch's ``allreduce_hook`` to begin with) on a freshly
    built DDP ``model``; None, with nothing changed, where :func:`_skip_reason` says so or DDP
    refuses. The model keeps no entry in ``_comm_hooks``: to DDP it still has no user hook."""
    reason = _skip_reason(model)
    if reason is not None:
        log_once(f"auto_ddp.skip.{reason}", f"DDP waits are not timed: {reason}")
        return None
    state, hook = default_hook(model)
    slot = HookSlot(state, hook, add_wait)

    def allreduce_hook(state: Any, bucket: Any) -> Any:
        return slot(bucket)

    # DDP reads the hook's signature (no annotations: here they are strings) and its name
    allreduce_hook.__annotations__ = {}
    allreduce_hook.__qualname__ = allreduce_hook.__name__
    try:
        _original(type(model), "register_comm_hook")(model, None, allreduce_hook)
        model._comm_hooks.clear()
    except Exception:
        log_once("auto_ddp.register", "DDP refused the timing comm hook", exc_info=True)
        return None
    setattr(model, SLOT_ATTR, slot)
    return slot


def _original(cls: type, name: str) -> Callable[..., Any]:
    method: Any = getattr(cls, name)
    return getattr(method, "__ett_original__", method)  # type: ignore[no-any-return]


def _free_slot(model: Any) -> HookSlot | None:
    slot = getattr(model, SLOT_ATTR, None)
    return slot if isinstance(slot, HookSlot) and not slot.taken else None


def _register_comm_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def register_comm_hook(self: Any, state: Any, hook: Any) -> None:
        slot = _free_slot(self)
        if slot is None:
            original(self, state, hook)
            return
        self._check_comm_hook(hook)  # what DDP raises for a bad hook
        slot.take(state, hook)
        self._comm_hooks.append((hook, state))
        _set_name(self, getattr(hook, "__qualname__", "comm_hook"))

    register_comm_hook.__ett_original__ = original  # type: ignore[attr-defined]
    return register_comm_hook


def _register_builtin(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _register_builtin_comm_hook(self: Any, comm_hook_type: Any) -> None:
        slot = _free_slot(self)
        hook = _builtin_hook(comm_hook_type) if slot is not None else None
        if slot is None or hook is None:
            original(self, comm_hook_type)
            return
        slot.take(getattr(self, "process_group", None), hook)
        _set_name(self, str(comm_hook_type))

    _register_builtin_comm_hook.__ett_original__ = original  # type: ignore[attr-defined]
    return _register_builtin_comm_hook


def _builtin_hook(comm_hook_type: Any) -> Hook | None:
    """torch's Python hook computing what a built-in C++ hook does; None for another type."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    name = getattr(comm_hook_type, "name", str(comm_hook_type)).rsplit(".", 1)[-1]
    return {
        "ALLREDUCE": default_hooks.allreduce_hook,
        "FP16_COMPRESS": default_hooks.fp16_compress_hook,
    }.get(name)


def _set_name(model: Any, name: str) -> None:
    try:
        model.logger._set_comm_hook_name(name)
    except Exception:
        log_once("auto_ddp.name", "could not name the comm hook in DDP's logging data")


def patch(ddp: type) -> None:
    """Let ``ddp``'s (``DistributedDataParallel``) hook registrations fill a model's free
    :class:`HookSlot` (idempotent)."""
    for name, wrap in (
        ("register_comm_hook", _register_comm_hook),
        ("_register_builtin_comm_hook", _register_builtin),
    ):
        method = getattr(ddp, name, None)
        if callable(method) and not hasattr(method, "__ett_original__"):
            setattr(ddp, name, wrap(method))


def unpatch(ddp: type) -> None:
    """Undo :func:`patch` (tests)."""
    for name in ("register_comm_hook", "_register_builtin_comm_hook"):
        method = getattr(ddp, name, None)
        original = getattr(method, "__ett_original__", None)
        if original is not None:
            setattr(ddp, name, original)
