"""PyTorch integrations. torch is imported lazily, inside the functions: importing this module is
free, and a program without torch can still import it.

- :func:`install_compile_hooks`: an ``ett.compile`` span per dynamo compilation (dynamo's compile
  callbacks, ``torch._dynamo.callback_handler``), with the frames compiled and the cache outcome
  from ``torch._dynamo.utils.get_compilation_metrics()`` (inductor FX-graph and AOTAutograd cache
  hits/misses: all hits ``hit``, all misses ``miss``, both ``partial``, no lookup ``off``).
- :func:`load_compile_cache` / :func:`save_compile_cache`: ``torch.compiler.load_cache_artifacts``
  timed as an ``ett.compile`` span (trigger ``cache_load``, cache ``hit`` when artifacts loaded,
  ``miss`` when there were none).
- :func:`dcp_save`, :func:`dcp_async_save`, :func:`dcp_load`: ``torch.distributed.checkpoint``
  with ``ett.checkpoint.save`` (the call: what blocks the loop), ``ett.checkpoint.persist`` (until
  the returned future, or the response's ``upload_completion``, completes) and the start-up phase
  ``checkpoint_load``.
- :func:`init_process_group`: the start-up phase ``pg_init`` (a barrier); it warns once on a
  torchrun restart on gloo without ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``.
- :func:`destroy_process_group`: ``ett.shutdown.pg_teardown`` of a completed attempt.
- :func:`init_cuda`: the first CUDA context creation as the start-up phase ``cuda_init``.
- :func:`time_ddp_waits`: each step's wait for DDP's gradient all-reduce, timed in its
  communication hook, reported on every window as ``ett.window.wait_s`` (the compute time behind
  the collector's straggler rank: ``ett._ddp_waits``).

Where this torch lacks a hook, the function degrades to what exists and logs it once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from . import semconv
from ._compile import CompileTracker, cache_status
from ._config import ddp_waits_enabled
from ._errors import log_once
from ._session import Session, span_sink, wait_sink
from ._setup import current

__all__ = [
    "cache_status",
    "dcp_async_save",
    "dcp_load",
    "dcp_save",
    "ddp_waits_enabled",
    "destroy_process_group",
    "init_cuda",
    "init_process_group",
    "install_compile_hooks",
    "load_compile_cache",
    "save_compile_cache",
    "state_dict_nbytes",
    "time_ddp_waits",
    "uninstall_compile_hooks",
]


def _session(session: Session | None) -> Session:
    return session if session is not None else current()


def _dcp() -> Any:
    import torch.distributed.checkpoint as dcp

    return dcp


# --- compile -------------------------------------------------------------------------------------


_installed: tuple[Any, CompileTracker] | None = None


def install_compile_hooks(session: Session | None = None) -> bool:
    """Emit an ``ett.compile`` span for every dynamo compilation from now on (one span per
    outermost compilation; recompiles and lazy backward compiles included). Returns False when
    this torch has no compile callbacks. Installing again moves the hooks to ``session``."""
    global _installed
    try:
        import torch._dynamo

        handler: Any = getattr(torch._dynamo, "callback_handler", None)
        if handler is None:
            from torch._dynamo.callback import callback_handler as handler
    except ImportError:
        log_once("torch.callbacks", "torch has no dynamo compile callbacks: no ett.compile spans")
        return False
    uninstall_compile_hooks()
    sess = _session(session)
    tracker = CompileTracker(span_sink(sess))
    handler.register_start_callback(tracker.on_start)
    handler.register_end_callback(tracker.on_end)
    sess.add_end_callback(tracker.finalize)
    _installed = (handler, tracker)
    return True


def uninstall_compile_hooks() -> None:
    """Remove the hooks :func:`install_compile_hooks` installed (pending spans are ended)."""
    global _installed
    if _installed is None:
        return
    handler, tracker = _installed
    _installed = None
    for remove, callback in (
        (handler.remove_start_callback, tracker.on_start),
        (handler.remove_end_callback, tracker.on_end),
    ):
        try:
            remove(callback)
        except (ValueError, AttributeError):
            pass
    tracker.finalize()


def load_compile_cache(
    artifacts: bytes | str | os.PathLike[str] | None, session: Session | None = None
) -> Any:
    """``torch.compiler.load_cache_artifacts`` timed as ``ett.compile`` (trigger
    ``cache_load``): ``artifacts`` is the bytes or a file path (missing file: a miss). Returns
    torch's ``CacheInfo`` or None. torch's own errors propagate unchanged."""
    values = semconv.CompileCacheValues
    trigger = semconv.CompileTriggerValues.CACHE_LOAD.value
    with _session(session).compile(cache=values.MISS.value, trigger=trigger) as block:
        data = artifacts
        if isinstance(data, str | os.PathLike):
            try:
                with open(data, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = None
        info = None
        if data:
            import torch.compiler

            info = torch.compiler.load_cache_artifacts(data)
        if info is not None:
            block.set_attribute(semconv.COMPILE_CACHE, values.HIT.value)
    return info


def save_compile_cache(path: str | os.PathLike[str]) -> bool:
    """Write ``torch.compiler.save_cache_artifacts()`` to ``path`` (atomically). False when
    there was nothing to save."""
    import torch.compiler

    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return False
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(saved[0])
    os.replace(tmp, path)
    return True


# --- distributed ---------------------------------------------------------------------------------


def init_process_group(*args: Any, session: Session | None = None, **kwargs: Any) -> None:
    """``torch.distributed.init_process_group(*args, **kwargs)`` as start-up phase ``pg_init``
    (marked ``ett.barrier``). Before it, on a torchrun restart with gloo (the backend asked
    for, or torch's default, which includes gloo) and no store of the caller's own, warns once
    unless ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` (see ``docs/instrument.md``)."""
    import torch.distributed as dist

    sess = _session(session)
    if kwargs.get("store") is None and len(args) < 4:  # (backend, init_method, timeout, ...)
        backend = kwargs.get("backend", args[0] if args else None)
        sess.set_backend(str(backend) if backend is not None else "gloo")
    with sess.startup(semconv.StartupPhaseValues.PG_INIT, barrier=True):
        dist.init_process_group(*args, **kwargs)


def time_ddp_waits(
    model: Any, state: Any = None, hook: Any = None, session: Session | None = None
) -> bool:
    """Time each step's wait for ``model``'s (a ``DistributedDataParallel``) gradient
    all-reduce: registers a communication hook that wraps ``hook`` (with its ``state``; default
    torch's ``allreduce_hook``, the same result as DDP's built-in reduction). Call it once,
    before the first backward, instead of ``model.register_comm_hook(state, hook)``. Returns
    False, and changes nothing, when the model already has a hook, DDP refuses one, or the
    session records nothing."""
    from . import _ddp_waits

    try:
        sess = _session(session)
        if not sess.enabled:
            return False
        add = wait_sink(sess)
        return _ddp_waits.install(model, add, state, hook) is not None
    except Exception:
        log_once("torch.ddp_waits", "could not time DDP's collective waits", exc_info=True)
        return False


def destroy_process_group(*args: Any, session: Session | None = None, **kwargs: Any) -> None:
    """``torch.distributed.destroy_process_group(*args, **kwargs)`` timed as
    ``ett.shutdown.pg_teardown`` (component ``comms``): call it before the session ends."""
    import torch.distributed as dist

    with _session(session).shutdown(semconv.ShutdownStepValues.PG_TEARDOWN):
        dist.destroy_process_group(*args, **kwargs)


def _create_cuda_context(device: Any) -> None:
    import torch

    torch.cuda.set_device(device)
    torch.empty(1, device=device)  # the first allocation creates the context
    torch.cuda.synchronize(device)


def init_cuda(device: Any = None, session: Session | None = None) -> bool:
    """Create this process's CUDA context now (``torch.cuda.set_device`` and a first
    allocation), timed as the start-up phase ``cuda_init`` (component ``runtime``): call it
    early, before the process group. ``device``: a ``torch.device``, ``"cuda:1"``, an index,
    or None for ``LOCAL_RANK`` (else 0). Returns False, and emits nothing, without CUDA, for a
    device that is not CUDA, or when torch already initialised CUDA in this process. The phase
    starts before ``torch.cuda.is_available()``, whose driver initialisation (``cuInit``) is part
    of the first context's cost (an H200 with torch 2.11: 0.37 s in all, 0.23 s before the
    first allocation)."""
    import torch

    start_ns = time.time_ns()
    if torch.cuda.is_initialized() or not torch.cuda.is_available():  # type: ignore[no-untyped-call]
        return False
    if device is None:
        device = int(os.environ.get("LOCAL_RANK", "0") or 0)
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if dev.type != "cuda":
        return False
    return _time_cuda_init(_session(session), lambda: _create_cuda_context(dev), start_ns)


def _time_cuda_init(session: Session, create: Any, start_ns: int | None = None) -> bool:
    """Run ``create()`` (what creates the CUDA context) as the ``cuda_init`` phase, from
    ``start_ns`` (default: now) until it returns; its exception is recorded and propagates."""
    phase = semconv.StartupPhaseValues.CUDA_INIT
    sink = span_sink(session)
    attrs: dict[str, Any] = {semconv.COMPONENT: semconv.default_component(phase)}
    span = sink.start(semconv.startup_span_name(phase), attrs, start_ns or time.time_ns())
    try:
        create()
    except BaseException as exc:
        sink.end(span, exc)
        raise
    sink.end(span)
    return True


def state_dict_nbytes(state_dict: Any) -> int:
    """Bytes of the tensors this rank holds in ``state_dict`` (nested dicts/lists; DTensor and
    ShardedTensor count their local shards, as does TorchRec's ``LocalShardsWrapper`` inside a
    DTensor, whose ``local_shards()`` are plain tensors; other objects count 0)."""
    total = 0
    stack = [state_dict]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif hasattr(item, "local_shards") and callable(item.local_shards):
            # ShardedTensor's shards carry a .tensor; LocalShardsWrapper's are tensors
            stack.extend(getattr(shard, "tensor", shard) for shard in item.local_shards())
        elif hasattr(item, "to_local") and callable(item.to_local):
            stack.append(item.to_local())
        elif hasattr(item, "element_size") and hasattr(item, "numel"):
            total += int(item.numel()) * int(item.element_size())
    return total


def _nbytes(state_dict: Any, nbytes: int | None) -> int | None:
    if nbytes is not None:
        return nbytes
    try:
        return state_dict_nbytes(state_dict)
    except Exception:
        log_once("torch.nbytes", "could not size the state dict", exc_info=True)
        return None


def dcp_save(
    state_dict: Any,
    *,
    step: int,
    session: Session | None = None,
    nbytes: int | None = None,
    **kwargs: Any,
) -> Any:
    """``torch.distributed.checkpoint.save`` as a ``sync`` ``ett.checkpoint.save`` of ``step``
    (the span covers all the call blocks: the first call's import of DCP too)."""
    with _session(session).checkpoint_save(step, mode="sync") as save:
        dcp = _dcp()
        _set_bytes(save, state_dict, nbytes)
        return dcp.save(state_dict, **kwargs)


def _set_bytes(save: Any, state_dict: Any, nbytes: int | None) -> None:
    size = _nbytes(state_dict, nbytes)
    if size is not None:
        save.set_bytes(size)


def dcp_async_save(
    state_dict: Any,
    *,
    step: int,
    session: Session | None = None,
    nbytes: int | None = None,
    wait_staging: bool = False,
    **kwargs: Any,
) -> Any:
    """``torch.distributed.checkpoint.async_save``: the call is the blocking ``async`` save (plus
    the wait for ``staging_completion`` when ``wait_staging``); ``ett.checkpoint.persist`` ends
    when the upload completes. Returns what ``async_save`` returned. Without ``async_save`` in
    this torch: a sync save."""
    sess = _session(session)
    with sess.checkpoint_save(step, mode="async") as save:  # what blocks, the import included
        dcp = _dcp()
        _set_bytes(save, state_dict, nbytes)
        if not hasattr(dcp, "async_save"):
            log_once("torch.async_save", "torch has no dcp.async_save: saving synchronously")
            save.set_attribute(semconv.CHECKPOINT_MODE, semconv.CheckpointModeValues.SYNC.value)
            return dcp.save(state_dict, **kwargs)
        response = dcp.async_save(state_dict, **kwargs)
        staging = getattr(response, "staging_completion", None)
        if wait_staging and staging is not None:
            staging.result()
    save.persist(response)
    return response


def dcp_load(
    state_dict: Any, *, step: int | None = None, session: Session | None = None, **kwargs: Any
) -> None:
    """``torch.distributed.checkpoint.load`` as the start-up phase ``checkpoint_load`` of
    checkpoint ``step``."""
    with _session(session).checkpoint_load(step):
        dcp = _dcp()
        dcp.load(state_dict, **kwargs)
