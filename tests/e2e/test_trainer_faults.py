"""Injected faults end to end: each kind kills attempt 0, torchrun restarts, attempt 1 resumes
from the last committed checkpoint. Checked against the trainer's step log and through a real
``ett serve``'s figures (see ``test_trainer_e2e.py`` for the harness)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

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

from ett import semconv
from ett_collector.domain import summarize
from ett_collector.storage import Store
from tests.support.collector_process import Collector
from trainer.testing import Run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(LAUNCH_S + 120)]


@pytest.fixture(scope="module", autouse=True)
def _training_stack() -> None:
    require_training_stack()


def explain(collector: Collector, run: Run, job: dict[str, Any]) -> str:
    """What a failed check of the collector's figures needs to be understood from its own log:
    the figures read, the spans the collector holds by attempt, rank and name, the figures of a
    recompute of those spans from scratch (``Store(loads_kept=0)``: a collector bug when they
    differ from the figures read, missing spans when they agree), and what each rank's step log
    says it did at its end."""
    lines = [
        f"figures read: state={job['state']} failures={job['failures']} "
        f"causes={job['failure_causes']} unsaved_s={job['unsaved_s']:.3f} "
        f"computed_at={job.get('computed_at')}"
    ]
    lines += [
        f"  attempt {a['attempt']}: alloc={a['alloc']:.3f} first={a['first_batch']} "
        f"end={a['end']:.3f} reason={a['end_reason']} failed={a['failed']}"
        for a in job["attempts"]
    ]
    store = Store(collector.db_url, loads_kept=0)
    try:
        raw = store.load_spans(run.job_id, raw=True)
        spans = store.load_spans(run.job_id)
    finally:
        store.close()
    by_key = Counter((s.attempt, s.rank, s.name) for s in raw)
    lines.append(f"stored spans ({len(raw)} raw rows):")
    lines += [f"  attempt {a} rank {r} {name}: {n}" for (a, r, name), n in sorted(by_key.items())]
    if spans:
        again = summarize(spans, max(s.end for s in spans) + 1.0)
        numbers = [a.attempt for a in again.attempts]
        lines.append(
            f"recomputed from scratch: state={again.state} failures={again.failures} "
            f"causes={again.failure_causes} attempts={numbers}"
        )
    for rank in (0, 1):
        for attempt in (0, 1):
            ends = [
                (e["event"], e.get("reason") or e.get("cause"), e["time"])
                for e in run.events(rank, None, attempt)
                if e["event"] in ("fault", "failure", "end", "teardown")
            ]
            lines.append(f"step log rank {rank} attempt {attempt}: {ends}")
    lines.append("torchrun output (tail):\n" + run.output[-3000:])
    return "\n".join(lines)


def assert_one_failure_explained(
    collector: Collector, run: Run, job: dict[str, Any], cause: str
) -> None:
    """:func:`assert_one_failure`, its failure message carrying :func:`explain`."""
    try:
        assert_one_failure(job, cause)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(collector, run, job)}") from exc


def test_exception_restarts_and_resumes_from_committed_step(
    tmp_path: Path, module_collector: Collector
) -> None:
    run = train(
        tmp_path,
        module_collector,
        "--steps",
        "50",
        "--ckpt-every-steps",
        "20",
        "--no-compile",
        "--fail-at-step",
        "30",
        "--fail-rank",
        "1",
        max_restarts=1,
    )
    assert_resumed(run, failed_at=30, resumed_at=20, steps=50)
    failures = [(f["cause"], f["error_type"], f["step"]) for f in run.events(1, "failure", 0)]
    assert failures == [("exception", "InjectedFault", 30)]
    [peer] = run.events(0, "failure", 0)  # rank 0 saw its peer vanish: not the cause
    # either its collective failed for the lost peer, or it waited in it until its watchdog
    # ended it (which came first depends on the machine's load): neither names a cause
    assert peer["cause"] == "unknown"
    assert peer.get("peer_loss") is True or peer["error_type"] == "WatchdogTimeout", peer
    # the restored state and the step-keyed data reproduce the lost steps' losses
    lost = {e["step"]: e["loss"] for e in run.events(0, "step", 0) if e["step"] >= 20}
    redone = {e["step"]: e["loss"] for e in run.events(0, "step", 1) if e["step"] < 30}
    assert redone == pytest.approx(lost, rel=1e-4)
    job = figures(module_collector, run.job_id)
    assert_one_failure(job, "exception")  # rank 1's cause, not its peer's "unknown"
    spans = stored_spans(module_collector, run.job_id)
    [load] = [
        s
        for s in spans
        if s.attempt == 1 and s.rank == 0 and s.name == semconv.startup_span_name("checkpoint_load")
    ]
    assert load.attr(semconv.CHECKPOINT_STEP) == 20
    assert job["lost_by_component"]["checkpoint"] > 0


@pytest.mark.parametrize("kind", ["sigkill", "sigterm"])
def test_signal_fault_restarts(tmp_path: Path, module_collector: Collector, kind: str) -> None:
    run = train(
        tmp_path,
        module_collector,
        "--steps",
        "40",
        "--ckpt-every-steps",
        "10",
        "--no-compile",
        "--fail-at-step",
        "25",
        "--fail-rank",
        "0",
        "--fail-kind",
        kind,
        max_restarts=1,
    )
    assert_resumed(run, failed_at=25, resumed_at=20, steps=40)
    own = run.events(0, "failure", 0)
    if kind == "sigkill":
        assert own == [] and run.events(0, "end", 0) == []  # a killed process says nothing
        assert "exitcode: -9" in run.output
    else:
        assert [(f["cause"], f["error_type"]) for f in own] == [("preemption", "Preempted")]
        assert run.events(0, "end", 0)[-1]["reason"] == "preempted"
    # SIGKILL: the module_collector infers "killed" (the rank went silent); SIGTERM: "preemption".
    # Attempt 0 trains for about a second, so the killed rank may export nothing at all: the
    # attempt is seen through its peer's spans, which that peer flushes as torchrun's SIGTERM
    # arrives (instrument: the signal waits for the flush; test_instrument_sigterm_during_end)
    job = figures(module_collector, run.job_id)
    assert_one_failure_explained(
        module_collector, run, job, "killed" if kind == "sigkill" else "preemption"
    )


def test_hang_is_ended_by_the_watchdog(tmp_path: Path, module_collector: Collector) -> None:
    run = train(
        tmp_path,
        module_collector,
        "--steps",
        "30",
        "--ckpt-every-steps",
        "10",
        "--no-compile",
        "--fail-at-step",
        "15",
        "--fail-rank",
        "1",
        "--fail-kind",
        "hang",
        "--watchdog-s",
        "3",
        max_restarts=1,
    )
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
