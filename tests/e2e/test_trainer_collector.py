"""The trainer's spans through a real ``ett serve``: its figures against the trainer's own account.

One run, 2 ranks: rank 1 is SIGKILLed at step 50, after checkpoints at 20 and 40 committed;
torchrun restarts the job, which resumes at 40 and completes. The collector's attempts, start-up,
checkpoint blocking and unsaved time must agree with what the step logs say happened.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from test_trainer_e2e import LAUNCH_S, SMALL, assert_resumed, figures, require_training_stack

from tests.support.collector_process import Collector
from trainer.testing import Run, launch

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(LAUNCH_S + 120)]

TOL_S = 0.1  # the step log writes an event within milliseconds of the span it mirrors
EPS = 0.002  # seconds: a figure against instants the step log read around what it bounds


@pytest.fixture(scope="module", autouse=True)
def _training_stack() -> None:
    require_training_stack()


@pytest.fixture(scope="module")
def killed_run(
    tmp_path_factory: pytest.TempPathFactory, module_collector: Collector
) -> tuple[Run, dict[str, Any]]:
    """The run (once for the module), and the figures a real collector computed for it."""
    tmp_path = tmp_path_factory.mktemp("killed-run")
    args = (
        "--steps",
        "60",
        "--ckpt-every-steps",
        "20",
        "--no-compile",
        "--fail-at-step",
        "50",
        "--fail-rank",
        "1",
        "--fail-kind",
        "sigkill",
        "--window-s",
        "1",
        "--step-delay-s",
        "0.02",
        "--data-stall-every",
        "7",
    )
    run = launch(tmp_path, module_collector.url, *SMALL, *args, max_restarts=1, timeout_s=LAUNCH_S)
    assert run.returncode == 0, run.output[-6000:]
    return run, figures(module_collector, run.job_id)


def _last(run: Run, event: str, attempt: int) -> float:
    return max(e["time"] for r in (0, 1) for e in run.events(r, event, attempt))


def test_collector_figures_match_the_step_log(killed_run: tuple[Run, dict[str, Any]]) -> None:
    run, job = killed_run
    assert_resumed(run, failed_at=50, resumed_at=40, steps=60)
    assert job["state"] == "completed" and job["failures"] == 1
    a0, a1 = job["attempts"]
    assert (a0["end_reason"], a1["end_reason"]) == ("failed", "completed")
    # first batch: the latest rank's, in both attempts, between the instants the step log read
    # before and after sess.first_batch()
    for a, attempt in ((a0, 0), (a1, 1)):
        called = max(e["before"] for r in (0, 1) for e in run.events(r, "first_batch", attempt))
        assert called - EPS <= a["first_batch"] <= _last(run, "first_batch", attempt) + EPS
    # start-up began before the step log could (Python imports) and ended at the first batch
    starts = min(e["time"] for r in (0, 1) for e in run.events(r, "start", 0))
    assert a0["alloc"] <= starts and job["tts_s"] == pytest.approx(a0["first_batch"] - a0["alloc"])
    # checkpoint blocking: per step, the earliest start to the latest end over ranks, of the
    # saves in training; the final save, after the last step, is the completed shutdown's
    saves: dict[int, list[tuple[float, float]]] = {}
    for rank in (0, 1):
        for e in run.events(rank, "ckpt_save"):
            saves.setdefault(e["step"], []).append((e["time"] - e["blocking_s"], e["time"]))
    final = saves.pop(60)
    assert min(a for a, _ in final) >= _last(run, "step", 1) - TOL_S
    blocking = sum(max(b for _, b in v) - min(a for a, _ in v) for v in saves.values())
    assert job["checkpoint_blocking_s"] == pytest.approx(blocking, abs=TOL_S)
    # per save: every save, the final one included
    per_save = [max(b for _, b in v) - min(a for a, _ in v) for v in [*saves.values(), final]]
    stats = job["checkpoint_blocking_stats"]
    assert stats["count"] == len(per_save)
    assert stats["max_s"] == pytest.approx(max(per_save), abs=TOL_S)
    assert stats["min_s"] == pytest.approx(min(per_save), abs=TOL_S)
    # unsaved: from the snapshot of step 40 to attempt 0's last progress, less its blocking and
    # the data stalls in it
    snapshot = min(a for a, _ in saves[40])
    blocking_40 = max(b for _, b in saves[40]) - snapshot
    last_step = _last(run, "step", 0)
    stalls = _union(_data_waits(run, 0), snapshot, last_step, [(snapshot, snapshot + blocking_40)])
    unsaved = last_step - snapshot - blocking_40 - stalls
    assert job["unsaved_s"] == pytest.approx(unsaved, abs=0.3)  # a window ends within one poll


def _data_waits(run: Run, attempt: int) -> list[tuple[float, float]]:
    """The waits for a batch that the step logs of ``attempt`` report (those the library emits)."""
    return [
        (e["time"] - e["duration_s"], e["time"])
        for r in (0, 1)
        for e in run.events(r, "data_wait", attempt)
    ]


def _union(
    intervals: list[tuple[float, float]],
    lo: float,
    hi: float,
    minus: Sequence[tuple[float, float]] = (),
) -> float:
    """Seconds of ``[lo, hi]`` inside some interval, less those inside one of ``minus``."""
    cuts = sorted({lo, hi, *(t for iv in [*intervals, *minus] for t in iv if lo < t < hi)})
    total = 0.0
    for a, b in itertools.pairwise(cuts):
        mid = (a + b) / 2
        inside = any(x <= mid <= y for x, y in intervals)
        if inside and not any(x <= mid <= y for x, y in minus):
            total += b - a
    return total


def test_data_stalls_match_the_step_log(
    killed_run: tuple[Run, dict[str, Any]], module_collector: Collector
) -> None:
    """Each wait for a batch of 1 ms or more is cut out of training as idle ``data``: the
    collector's data cut-out is the union, over ranks, of the waits the step logs report, less
    the instants a checkpoint save blocks then (a stall yields to another cut-out)."""
    run, job = killed_run
    segments = module_collector.get(f"/api/v1/jobs/{run.job_id}/segments").json()
    assert run.events(0, "data_wait", 0), "the trainer logs no data stall at all"
    for a in job["attempts"]:
        lo, hi = a["first_batch"], a["progress"]
        expected = _union(_data_waits(run, a["attempt"]), lo, hi, _saves(run, a["attempt"]))
        got = sum(
            seg["duration_s"] / len(seg["components"])
            for seg in segments
            if seg["attempt"] == a["attempt"]
            and seg["kind"] == "cutout"
            and "data" in seg["components"]
        )
        assert got == pytest.approx(expected, abs=TOL_S), a["attempt"]


def _saves(run: Run, attempt: int) -> list[tuple[float, float]]:
    """Each checkpoint's blocking over ranks: its earliest start to its latest end."""
    by_step: dict[int, list[tuple[float, float]]] = {}
    for r in (0, 1):
        for e in run.events(r, "ckpt_save", attempt):
            by_step.setdefault(e["step"], []).append((e["time"] - e["blocking_s"], e["time"]))
    return [(min(a for a, _ in v), max(b for _, b in v)) for v in by_step.values()]
