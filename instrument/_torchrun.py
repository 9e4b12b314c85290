"""What the library knows about torchrun: its share of start-up, and the shared-store trap.

**torchrun's share, seen from a worker** (:func:`launcher_marks`). A worker cannot ask torchrun
when it did what (it exports no timestamps), but three instants are on the machine's disk and in
``/proc``, and they come in this order on a fresh start:

1. the agent's process start: the worker's parent (``/proc/<ppid>/stat``); from there the agent
   runs its interpreter and imports (torch): the phase ``launcher``;
2. the birth time of torchrun's root log directory (``torchelastic_*``, made by ``mkdtemp`` as it
   reads its arguments, before it builds the rendezvous): from there the phase ``rendezvous``
   (building the rendezvous and waiting for every node; its few milliseconds of agent set-up are
   charged to it too). Linux ``statx`` birth time; where the file system does not keep one, or a
   ``--log-dir`` already existed, this instant is unknown and ``launcher`` runs on to 3;
3. the creation of this attempt's log directory (``attempt_<restart>``, the parent of the
   worker's ``TORCHELASTIC_ERROR_FILE`` directory), made after the rendezvous, just before the
   workers are started: from there the phase ``worker_spawn``, which ends at the worker's own
   process start.

An instant that is unknown, or out of that order (a wrapper process between torchrun and the
worker, a log directory that existed before), is left out and the phase before it runs on. On a
restart the agent started long ago and its rendezvous is not seen (only 3 is); the start-up
module keeps every phase within the attempt, so those instants only count where the attempt's
allocation is before them.

torchrun (torch.distributed.elastic) shares its rendezvous TCP store with the workers. On a
restart (``TORCHELASTIC_RESTART_COUNT`` > 0) a gloo process group built on that store can read
the previous attempt's addresses and fail in ``init_process_group`` ("Gloo connectFullMesh
failed ... Connection refused"), or hang: seen in 3 of 6 instrumented restarts of a plain
trainer (and 2 of 3 hangs uninstrumented); ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` avoided it
in 6 of 6. A trainer that builds its own store per attempt (``init_process_group(store=...)``,
e.g. a ``PrefixStore`` named after the restart count) is not exposed.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Mapping

from . import semconv
from ._errors import LOGGER_NAME

DISABLE_SHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
"""The torch environment variable that gives each restart a store of its own."""

_warned = False

_AT_FDCWD = -100
_STATX_BTIME = 0x800
_STATX_BTIME_OFFSET = 80  # struct statx: stx_btime (tv_sec i64, tv_nsec u32) at byte 80


def birth_ns(path: str) -> int | None:
    """Unix nanoseconds at which ``path`` was created (Linux ``statx``); None where unknown."""
    import ctypes  # here: only a torchrun worker's start-up needs it

    try:
        statx = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):
        return None
    statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    statx.restype = ctypes.c_int
    buf = ctypes.create_string_buffer(256)
    try:
        if statx(_AT_FDCWD, os.fsencode(path), 0, _STATX_BTIME, buf) != 0:
            return None
    except (OSError, ValueError, TypeError):
        return None
    if not int.from_bytes(buf.raw[:4], "little") & _STATX_BTIME:
        return None
    sec, nsec = struct.unpack_from("<qI", buf.raw, _STATX_BTIME_OFFSET)
    return sec * 1_000_000_000 + nsec if sec > 0 else None


def _created_ns(path: str) -> int | None:
    """Birth time of ``path``, else its last change (a directory torchrun wrote once)."""
    born = birth_ns(path)
    if born is not None:
        return born
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def launcher_marks(
    env: Mapping[str, str] | None = None, agent_start_ns: int | None = None
) -> list[tuple[str, int]]:
    """torchrun's share before this worker started (module docstring), as ``(phase, instant)``
    marks in time order: each phase starts at its instant and runs to the next mark (the last
    to the worker's start). Empty when not a torchrun worker. Never raises."""
    env = os.environ if env is None else env
    if "TORCHELASTIC_RUN_ID" not in env or "TORCHELASTIC_RESTART_COUNT" not in env:
        return []
    agent, rendezvous, spawn = agent_start_ns, None, None
    try:
        error_file = env.get("TORCHELASTIC_ERROR_FILE", "").strip()
        attempt_dir = os.path.dirname(os.path.dirname(error_file))
        if os.path.isabs(error_file) and os.path.basename(attempt_dir).startswith("attempt_"):
            rendezvous = birth_ns(os.path.dirname(os.path.dirname(attempt_dir)))
            spawn = _created_ns(attempt_dir)
    except (OSError, ValueError):
        rendezvous = spawn = None
    if spawn is not None and agent is not None and agent > spawn:
        agent = None  # the parent started after torchrun spawned: a wrapper, not the agent
    if rendezvous is not None and (
        (spawn is not None and rendezvous > spawn) or (agent is not None and rendezvous < agent)
    ):
        rendezvous = None  # a log directory made before this agent (an existing --log-dir)
    phases = semconv.LauncherPhaseValues
    marks = [
        (phases.LAUNCHER.value, agent),
        (semconv.StartupPhaseValues.RENDEZVOUS.value, rendezvous),
        (phases.WORKER_SPAWN.value, spawn),
    ]
    return [(phase, instant) for phase, instant in marks if instant is not None]


def _is_gloo(backend: str) -> bool:
    """True when ``backend`` (``gloo``, ``cpu:gloo,cuda:nccl``, ...) uses gloo for CPU."""
    return "gloo" in backend.lower()


def restart_store_at_risk(backend: str | None, env: Mapping[str, str] | None = None) -> bool:
    """True for a torchrun restart on gloo without ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE``."""
    env = os.environ if env is None else env
    try:
        restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0").strip() or 0)
    except ValueError:
        return False
    disabled = env.get(DISABLE_SHARED_STORE, "").strip() not in ("", "0")
    return restart > 0 and not disabled and backend is not None and _is_gloo(str(backend))


def warn_restart_store(backend: str | None, env: Mapping[str, str] | None = None) -> bool:
    """Warn once per process (logger ``ett_instrument``) when :func:`restart_store_at_risk`.
    Returns True when it warned now."""
    global _warned
    if _warned or not restart_store_at_risk(backend, env):
        return False
    _warned = True
    logging.getLogger(LOGGER_NAME).warning(
        "torchrun restart %s on %s without %s=1: the restarted process group can read the "
        "previous attempt's addresses from torchrun's shared store and fail in "
        "init_process_group ('Gloo connectFullMesh failed') or hang. Set %s=1 in the "
        "environment of torchrun (or pass init_process_group a store of this attempt's own).",
        (env or os.environ).get("TORCHELASTIC_RESTART_COUNT"),
        backend,
        DISABLE_SHARED_STORE,
        DISABLE_SHARED_STORE,
    )
    return True
