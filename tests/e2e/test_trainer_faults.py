"""Injected faults end to end: each kind kills attempt 0, torchrun restarts, attempt 1 resumes
from the last committed checkpoint. Checked against the trainer's step log and through a real
``ett serve``'s figures (see ``test_trainer_e2e.py`` for the harness)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_trainer_e2e import (
    LAUNCH_S,
    assert_one_failure,
    assert_resumed,
    figures,
    require_training_stack,
    stored_spans,
    train,
)

from instrument import semconv
from tests.support.collector_process import Collector

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(LAUNCH_S + 120)]


@pytest.fixture(scope="module", autouse=True)
def _training_stack() -> None:
    require_training_stack()


def test_exception_restarts_and_resumes_from_committed_step(
    tmp_path: Path, module_collector: Collector
) -> None:
    run = train(tmp_path, module_collector, "--steps", "50", "--ckpt-every-steps", "20",
                "--no-compile", "--fail-at-step", "30", "--fail-rank", "1",
                max_restarts=1)  # fmt: skip
    assert_resumed(run, failed_at=30, resumed_at=20, steps=50)
    failures = [(f["cause"], f["error_type"], f["step"]) for f in run.events(1, "failure", 0)]
    assert failures == [("exception", "InjectedFault", 30)]
    [peer] = run.events(0, "failure", 0)  # rank 0 saw its peer vanish: not the cause
    assert (peer["cause"], peer["peer_loss"]) == ("unknown", True)
    # the restored state and the step-keyed data reproduce the lost steps' losses
    lost = {e["step"]: e["loss"] for e in run.events(0, "step", 0) if e["step"] >= 20}
    redone = {e["step"]: e["loss"] for e in run.events(0, "step", 1) if e["step"] < 30}
    assert redone == pytest.approx(lost, rel=1e-4)
    job = figures(module_collector, run.job_id)
    assert_one_failure(job, "exception")  # rank 1's cause, not its peer's "unknown"
    spans = stored_spans(module_collector, run.job_id)
    [load] = [s for s in spans if s.attempt == 1 and s.rank == 0
              and s.name == semconv.startup_span_name("checkpoint_load")]  # fmt: skip
    assert load.attr(semconv.CHECKPOINT_STEP) == 20
    assert job["lost_by_component"]["checkpoint"] > 0


@pytest.mark.parametrize("kind", ["sigkill", "sigterm"])
def test_signal_fault_restarts(tmp_path: Path, module_collector: Collector, kind: str) -> None:
    run = train(tmp_path, module_collector, "--steps", "40", "--ckpt-every-steps", "10",
                "--no-compile", "--fail-at-step", "25", "--fail-rank", "0", "--fail-kind", kind,
                max_restarts=1)  # fmt: skip
    assert_resumed(run, failed_at=25, resumed_at=20, steps=40)
    own = run.events(0, "failure", 0)
    if kind == "sigkill":
        assert own == [] and run.events(0, "end", 0) == []  # a killed process says nothing
        assert "exitcode: -9" in run.output
    else:
        assert [(f["cause"], f["error_type"]) for f in own] == [("preemption", "Preempted")]
        assert run.events(0, "end", 0)[-1]["reason"] == "preempted"
    # SIGKILL: the module_collector infers "killed" (the rank went silent); SIGTERM: "preemption"
    assert_one_failure(
        figures(module_collector, run.job_id), "killed" if kind == "sigkill" else "preemption"
    )


def test_hang_is_ended_by_the_watchdog(tmp_path: Path, module_collector: Collector) -> None:
    run = train(tmp_path, module_collector, "--steps", "30", "--ckpt-every-steps", "10",
                "--no-compile", "--fail-at-step", "15", "--fail-rank", "1", "--fail-kind", "hang",
                "--watchdog-s", "3", max_restarts=1)  # fmt: skip
    assert_resumed(run, failed_at=15, resumed_at=10, steps=30)
    [failure] = run.events(1, "failure", 0)  # the hung rank; its peer, stuck in a collective,
    assert failure["error_type"] == "WatchdogTimeout"  # may see the connection close first
    assert "exitcode: 124" in run.output
    job = figures(module_collector, run.job_id)
    assert job["failures"] == 1 and job["state"] == "completed"
    # the hang is the failed attempt's shutdown: from its last progress to its end, >= ~watchdog
    a0 = job["attempts"][0]
    assert a0["end"] - a0["progress"] >= 2.0
    assert job["lost_by_component"]["failure"] >= job["unsaved_s"] + 2.0
