"""The wait of each step for its gradient collectives, timed inside DDP's communication hook.

In synchronous data-parallel training every rank's step takes the same wall time: the gradient
all-reduce at the end of the backward pass waits for the slowest rank. What differs is how long
each rank waited there, so the time a step spends *outside* that wait (its *compute time*) tells
the slow rank from the others (docs/metrics.md, "Inside the loop").

:class:`WaitTimer` wraps a DDP communication hook (default: torch's ``allreduce_hook``, which
computes what DDP's built-in all-reduce does). For the step's last gradient bucket
(``bucket.is_last()``) it reads the clock when the hook is called (this rank's gradients are all
computed: from here on the rank only waits) and again when the bucket's all-reduce completes
(the last one queued: every earlier bucket is reduced by then); the step's wait is the
difference (on CUDA, the GPU time between two events: see :class:`WaitTimer`), added to the
session's counter (``Session._add_wait``), which each window reports as ``ett.window.wait_s``.
The other buckets pass through untouched: the cost is one ``is_last()`` call per bucket, two
clock reads (or two CUDA events) and one ``then`` callback per step, none of it in
``Session.step()``.

Not measured: collectives outside DDP's gradient reduction (FSDP, an explicit ``all_reduce`` of
the loss, a barrier): their waits count as compute time.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ._errors import log_once

Hook = Callable[[Any, Any], Any]
"""A DDP communication hook: ``hook(state, bucket) -> torch.futures.Future``."""


class WaitTimer:
    """Times each step's wait for its last gradient bucket; adds it through ``add_wait(ns)``.

    CPU buckets (gloo): the wall clock, read before the bucket's hook and in the callback of
    its all-reduce's future, which completes when the all-reduce has. CUDA buckets (NCCL): an
    NCCL future completes as soon as the collective is enqueued, so the wall clock would read
    no wait at all; instead two CUDA timing events are recorded, one on the current stream
    before the hook (after the last gradients' kernels) and one in the callback (on a stream
    that waits for the all-reduce): the GPU time between them is the wait. Their elapsed time is
    read once both completed, without a synchronisation: at a later step's last bucket.
    """

    def __init__(self, hook: Hook, add_wait: Callable[[int], None]) -> None:
        self._hook = hook
        self._add_wait = add_wait
        self._lock = threading.Lock()  # the completion callback runs on a backend's thread
        self._pending: deque[tuple[Any, Any]] = deque()
        self.steps = 0
        """Steps whose wait was timed."""

    def __call__(self, state: Any, bucket: Any) -> Any:
        """The communication hook DDP calls for every bucket."""
        try:
            last = bool(bucket.is_last())
            ready: Any = _cuda_event(bucket) if last else None
            ready_ns = time.time_ns()
        except Exception:
            log_once("ddp_waits.bucket", "could not time a gradient bucket", exc_info=True)
            last = False
        fut = self._hook(state, bucket)
        if not last:
            return fut
        if ready is None:

            def done(f: Any) -> Any:
                waited = time.time_ns() - ready_ns
                value = f.value()  # raises for an all-reduce that failed (a peer died): its
                self._record(waited)  # wait, until the loss was seen, belongs to no step
                return value

            return fut.then(done)
        self._drain()

        def done_cuda(f: Any) -> Any:
            try:
                end = _cuda_event(bucket)
                with self._lock:
                    self._pending.append((ready, end))
            except Exception:
                log_once("ddp_waits.cuda", "could not time a CUDA all-reduce", exc_info=True)
            return f.value()

        return fut.then(done_cuda)

    def _drain(self) -> None:
        """Record the CUDA waits whose events have both completed."""
        while True:
            with self._lock:
                if not self._pending or not self._pending[0][1].query():
                    return
                ready, end = self._pending.popleft()
            self._record(int(ready.elapsed_time(end) * 1e6))  # milliseconds

    def _record(self, wait_ns: int) -> None:
        try:
            with self._lock:
                self.steps += 1
                self._add_wait(max(0, wait_ns))
        except Exception:
            log_once("ddp_waits.record", "could not record a collective wait", exc_info=True)


def _cuda_event(bucket: Any) -> Any:
    """A timing event recorded now on the current CUDA stream of the bucket's device; None for
    a bucket on the CPU."""
    buffer = bucket.buffer()
    if not getattr(buffer, "is_cuda", False):
        return None
    import torch

    event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    event.record(torch.cuda.current_stream(buffer.device))
    return event


def default_hook(model: Any) -> tuple[Any, Hook]:
    """``(state, hook)`` computing what DDP's built-in reduction does: torch's
    ``allreduce_hook`` over the model's process group."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    return getattr(model, "process_group", None), allreduce_hook


def install(
    model: Any, add_wait: Callable[[int], None], state: Any = None, hook: Hook | None = None
) -> WaitTimer | None:
    """Register a :class:`WaitTimer` around ``hook`` (default: :func:`default_hook`) as
    ``model``'s communication hook. None, and nothing changed, when the model already has a
    hook (DDP takes one only), uses DDP's mixed precision, or refuses the registration."""
    if getattr(model, "_comm_hooks", None) or getattr(model, "mixed_precision", None) is not None:
        log_once("ddp_waits.taken", "the DDP model has its own comm hook: waits are not timed")
        return None
    if hook is None:
        state, hook = default_hook(model)
    timer = WaitTimer(hook, add_wait)

    def comm_hook(state: Any, bucket: Any) -> Any:
        return timer(state, bucket)

    # DDP reads the hook's signature and name: no annotations (here they are strings), and
    # the name of the hook it wraps (DDP treats some hooks by name)
    comm_hook.__annotations__ = {}
    comm_hook.__name__ = getattr(hook, "__name__", "comm_hook")
    comm_hook.__qualname__ = comm_hook.__name__
    try:
        model.register_comm_hook(state, comm_hook)
    except Exception:
        log_once("ddp_waits.register", "DDP refused the timing comm hook", exc_info=True)
        return None
    return timer
