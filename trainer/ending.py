"""The end of an attempt on one rank: tearing down its process groups, and a failed rank's exit.

A completed attempt tears down its groups through :func:`teardown`; a failed or preempted one
goes through :func:`end_failed`, which records the failure in the session and the step log,
tears down (aborting the groups, see :func:`trainer.distributed.shutdown`) and exits the
process at once (:func:`leave`).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any, NoReturn

import ett
from ett.semconv import EndReasonValues, FailureCauseValues
from trainer.config import TrainConfig
from trainer.distributed import Groups, shutdown
from trainer.steplog import StepLog


def teardown(
    sess: ett.Session, log: StepLog, groups: Groups | None, failed: bool, mode: str
) -> None:
    """Tear down the process groups (after a failure: abort them, see
    :func:`trainer.distributed.shutdown`), naming the phase for the library's exit watchdog and
    logging how long it took."""
    abort = failed and mode == "abort"
    phase = "abort_process_groups" if abort else "destroy_process_group"
    sess.exit_watchdog.phase(phase)
    t0 = time.perf_counter()
    shutdown(groups, failed=abort)
    log.event("teardown", phase=phase, duration_s=round(time.perf_counter() - t0, 6))
    sess.exit_watchdog.phase("exit")


def leave(status: int, log: StepLog) -> NoReturn:
    """Exit a failed rank now, skipping the interpreter's finalization: the process-group objects'
    destructors would wait there for a collective that no peer will join (on gloo the rank's own
    queued work, seen on 2 CPU ranks with a collective in flight; it holds the GIL, so not even
    a Python watchdog thread runs). The failure is recorded and flushed by now."""
    log.close()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def log_failure(
    sess: ett.Session, log: StepLog, cause: str, error: str, reason: str, **fields: Any
) -> None:
    """The step log's account of a failure: ``failure`` at the step in progress, then ``end``."""
    log.event("failure", step=sess.current_step, cause=cause, error_type=error, **fields)
    log.event("end", reason=reason)


def end_failed(
    exc: BaseException, cfg: TrainConfig, sess: ett.Session, log: StepLog, groups: Groups | None
) -> NoReturn:
    """End this rank's failed (or preempted) attempt: record it, tear down, exit at once."""
    # A rank whose collective failed because a peer vanished has nothing left to wait for
    # (a persist in flight needs that peer too): it aborts its groups at once, before the
    # library's end (persist wait, flush), so that torchrun, which stops the remaining
    # ranks as soon as one exits, cannot stop it mid-flush with its groups still up. A rank
    # that failed on its own first lets the library wait for its persists in flight.
    abort_first = (
        cfg.failure_teardown == "abort"
        and not isinstance(exc, ett.Preempted)
        and ett.is_peer_loss(exc)
    )
    if abort_first:
        teardown(sess, log, groups, True, cfg.failure_teardown)
    if isinstance(exc, ett.Preempted):  # the library recorded the preemption; the attempt
        cause = FailureCauseValues.PREEMPTION.value  # ends here, as preempted
        log_failure(sess, log, cause, type(exc).__name__, EndReasonValues.PREEMPTED.value)
        sess.end(EndReasonValues.PREEMPTED.value)
        status = exc.exit_status
    else:
        # The library's cause; a rank whose collective failed because a peer vanished says
        # "unknown", so the peer's own report (or the collector's "killed") names it.
        cause = ett.classify_failure(exc).value
        reason = EndReasonValues.FAILED.value
        log_failure(sess, log, cause, type(exc).__name__, reason, peer_loss=ett.is_peer_loss(exc))
        sess.fail(exc)  # ett.failure at the step in progress, the attempt ended failed
        traceback.print_exception(exc)
        status = 1
    if not abort_first:
        teardown(sess, log, groups, True, cfg.failure_teardown)
    leave(status, log)
