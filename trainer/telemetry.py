"""The trainer's link to the ETT instrumentation library (``instrument``).

:func:`open_session` starts an ``instrument`` session for this rank: the library resolves who
the rank is, and installs its exception, SIGTERM and exit hooks (on SIGTERM it records the
preemption, then raises :class:`ett.Preempted` in the main thread, so the trainer's
teardown runs). :func:`timed_phase` wraps a
start-up phase in its span and writes its length to the step log as well, so the trainer's own
account and the collector's can be compared.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import ett
from trainer.config import TrainConfig
from trainer.steplog import StepLog

DEFAULT_MODEL = "dlrm"
"""``ett.model`` when neither ``--model-name`` nor ``ETT_MODEL`` names one."""


def open_session(cfg: TrainConfig) -> ett.Session:
    """The ``instrument`` session of this rank's attempt (rank, world size and attempt from
    torchrun's environment; job id from ``--job-id`` or ``ETT_JOB_ID``). It never raises: at
    worst it records nothing (its identity is still resolved)."""
    return ett.init(
        job_id=cfg.job_id,
        model=cfg.model_name or os.environ.get("ETT_MODEL") or DEFAULT_MODEL,
        team=cfg.team,
        window_s=cfg.window_s,
        raise_on_sigterm=True,
    )


@contextlib.contextmanager
def timed_phase(sess: ett.Session, log: StepLog, phase: str, **attrs: Any) -> Iterator[None]:
    """A start-up phase: its ``ett.startup.<phase>`` span plus a ``phase`` step-log event."""
    t0 = time.perf_counter()
    with sess.startup(phase):
        yield
    log.event("phase", phase=phase, duration_s=round(time.perf_counter() - t0, 6), **attrs)
