"""What the library knows about torchrun's restarts: the shared-store trap on gloo.

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
from collections.abc import Mapping

from ._errors import LOGGER_NAME

DISABLE_SHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
"""The torch environment variable that gives each restart a store of its own."""

_warned = False


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
