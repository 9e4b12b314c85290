"""Injected faults end to end: each kind kills attempt 0, torchrun restarts, attempt 1 resumes
from the last committed checkpoint. Checked against the trainer's step log (see
``test_trainer_e2e.py`` for the harness)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_trainer_e2e import assert_resumed, require_training_stack, train

from instrument import semconv
from trainer.testing import OtlpSink, otlp_sink

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", autouse=True)
def _training_stack() -> None:
    require_training_stack()


@pytest.fixture
def otlp_endpoint() -> Iterator[OtlpSink]:
    """Where the trainer sends its spans."""
    with otlp_sink() as sink:
        yield sink


def test_exception_restarts_and_resumes_from_committed_step(
    tmp_path: Path, otlp_endpoint: OtlpSink
) -> None:
    run = train(tmp_path, otlp_endpoint, "--steps", "50", "--ckpt-every-steps", "20",
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
    assert semconv.SPAN_FAILURE in otlp_endpoint.span_names
    assert semconv.startup_span_name("checkpoint_load") in otlp_endpoint.span_names


@pytest.mark.parametrize("kind", ["sigkill", "sigterm"])
def test_signal_fault_restarts(tmp_path: Path, otlp_endpoint: OtlpSink, kind: str) -> None:
    run = train(tmp_path, otlp_endpoint, "--steps", "40", "--ckpt-every-steps", "10",
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


def test_hang_is_ended_by_the_watchdog(tmp_path: Path, otlp_endpoint: OtlpSink) -> None:
    run = train(tmp_path, otlp_endpoint, "--steps", "30", "--ckpt-every-steps", "10",
                "--no-compile", "--fail-at-step", "15", "--fail-rank", "1", "--fail-kind", "hang",
                "--watchdog-s", "3", max_restarts=1)  # fmt: skip
    assert_resumed(run, failed_at=15, resumed_at=10, steps=30)
    [failure] = run.events(1, "failure", 0)  # the hung rank; its peer, stuck in a collective,
    assert failure["error_type"] == "WatchdogTimeout"  # may see the connection close first
    assert "exitcode: 124" in run.output
