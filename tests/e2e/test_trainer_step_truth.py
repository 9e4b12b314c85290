"""Inside the loop, the truth of the ideal step time (issue 26) for the reference trainer.

One run, 2 CPU ranks under real torchrun, 1 s windows (``--window-s 1``, and the collector's
``ETT_WINDOW_S=1`` to match), about 20 s of training: some 40 windows over the two ranks. Nothing
planted interrupts the loop (no checkpoint before the last step, no eval, no data stall).

The truth is the trainer's own step log: a step's time is the interval between its ``step`` event
and the previous one's, less the step's own wait for its batch (its ``data_wait`` event: the
trainer logs the waits the library reports, ``ett.DATA_WAIT_MIN_S`` or more), and the truth is
the **median of these busy steps after warm-up**: every step but those of each rank's first
window (the steps that began within ``--window-s`` of the first batch), as ``docs/metrics.md``
("Inside the loop") leaves out each rank's first window. The collector's ideal step time (``GET
/api/v1/jobs/{id}/performance``: the median, over its steady windows, of each window's busy
seconds per step, its ``ett.data.wait`` seconds taken out) must be within 5 % of it, from at
least 5 steady windows (most of them on a quiet machine, 9 to 14 of 46 in loaded CI runs). With
nothing planted the waits are the trainer's own fetches of a millisecond or two; on a loaded
machine they were 7 % of the step log's median step (2026-12-06: the ideal 44.2 ms, the step
log's median 47.5 ms with its waits in).

The steps are ~40 ms (``--step-delay-s 0.03`` over the tiny model's ~10 ms), some 25 a window.
On a loaded machine a third to a half of the trainer's fetches wait 1 ms or more; when any such
wait made a window interrupted, 2 of 40 to 51 windows were steady and the ideal came out 7 % to
51 % above the step log's median. A window is now interrupted only when stall spans cover more
than 5 % of it (``collector/domain/_points.py``, ``INTERRUPTED_SHARE``).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_trainer_e2e import LAUNCH_S, SMALL, require_training_stack

from ett.semconv import DEFAULT_WINDOW_S
from tests.support.collector_process import Collector, start_collector
from trainer.testing import Run, launch

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(LAUNCH_S + 120)]

WINDOW_S = 1.0
STEP_DELAY_S = 0.03
STEPS = 500
"""With the tiny model's ~10 ms of work a step lasts ~40 ms: 500 steps train for ~20 s."""


@pytest.fixture(scope="module", autouse=True)
def _training_stack() -> None:
    require_training_stack()


@pytest.fixture(scope="module")
def one_second_collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A real collector on SQLite whose train window matches the trainer's ``--window-s``."""
    home = tmp_path_factory.mktemp("collector") / "ett-home"
    c = start_collector(home, env={"ETT_WINDOW_S": f"{WINDOW_S:g}"})
    yield c
    c.stop()


def _steps_after_warmup(run: Run, rank: int) -> list[float]:
    """The busy times of ``rank``'s steps after its first window, from its step log: each step's
    interval less its logged wait for its batch."""
    first_batch = run.events(rank, "first_batch")[0]["time"]
    waited = {e["step"]: e["duration_s"] for e in run.events(rank, "data_wait")}
    steps = run.events(rank, "step")
    return [
        (b["time"] - a["time"]) - waited.get(b["step"], 0.0)
        for a, b in itertools.pairwise(steps)
        if a["time"] >= first_batch + WINDOW_S
    ]


def test_ideal_step_is_the_step_logs_median_step(
    tmp_path: Path, one_second_collector: Collector
) -> None:
    args = [
        *SMALL,
        *("--steps", str(STEPS), "--no-compile", "--ckpt-every-steps", "0", "--no-final-ckpt"),
        *("--window-s", f"{WINDOW_S:g}", "--step-delay-s", f"{STEP_DELAY_S:g}"),
    ]
    run = launch(tmp_path, one_second_collector.url, *args, timeout_s=LAUNCH_S)
    assert run.returncode == 0, run.output[-6000:]
    steps = [*_steps_after_warmup(run, 0), *_steps_after_warmup(run, 1)]
    assert len(steps) >= STEPS, len(steps)  # both ranks, the first window of each left out
    train_s = run.events(0, "step")[-1]["time"] - run.events(0, "first_batch")[0]["time"]

    one_second_collector.wait_ended(run.job_id)
    r = one_second_collector.get(f"/api/v1/jobs/{run.job_id}/performance", buckets="20")
    assert r.status_code == 200, r.text
    perf = r.json()
    assert perf["steps"] == STEPS
    # the trainer's --window-s reached the library: windows of about a second on each rank, far
    # from the 10 s default. Not one a second exactly: a loaded machine starves the poll thread
    # (a clean-clone CI on 2026-12-03 had 52 windows in 2 x 45 s, 1.7 s each)
    mean_window_s = 2 * train_s / perf["windows"]
    assert mean_window_s <= 3 * WINDOW_S < DEFAULT_WINDOW_S, (perf["windows"], train_s)
    assert perf["ideal_basis"] == "steady", perf["ideal_basis"]
    # from several steady windows, not the 2 of old; how many is the machine's load: clean-clone
    # CI runs on 2026-12-03 had 14 and 9 of 46 steady (their fetches waited more than 5 % of a
    # window), quiet runs most of them
    assert perf["ideal_points"] >= 5, (perf["ideal_points"], perf["points"])
    truth = statistics.median(steps)
    basis = (perf["ideal_basis"], perf["ideal_points"], truth)
    assert perf["ideal_step_s"] == pytest.approx(truth, rel=0.05), basis
