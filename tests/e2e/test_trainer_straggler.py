"""The reference trainer's planted straggler (issue 29): real torchrun, 2 CPU ranks (gloo), a real
collector, checked as ``scripts/device_run.sh`` checks the device runs.

Every rank works ``--step-delay-s`` a step and rank 1 sleeps ``--slow-s`` more at the end of each
forward (``--slow-rank 1``). Against the ranks' own step logs (``scripts/device_check.py``,
``straggler_checks``): the collector names rank 1 with a score within 10 % of the planted factor
(the slowed rank's compute time per step over the other's: each step less its wait for the batch
and its ``backward_s`` beyond the shortest of that step), and both ranks' step times are equal
within 5 %. 90 steps of about 0.1 s with 1 s windows: about 30 s on a loaded 2-core machine.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_trainer_e2e import LAUNCH_S, SMALL, require_training_stack

from tests.support.collector_process import Collector, start_collector
from trainer.testing import launch

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(LAUNCH_S + 120)]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device_check.py"


def _device_check() -> Any:
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def compacting_collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A collector with 1 s windows that folds raw windows into runs at once."""
    env = {"ETT_RAW_WINDOW_RETENTION_S": "0", "ETT_WINDOW_S": "1"}
    c = start_collector(tmp_path_factory.mktemp("collector") / "ett-home", env=env)
    yield c
    c.stop()


def test_slowed_rank_is_named_with_the_step_logs_factor(
    tmp_path: Path, compacting_collector: Collector
) -> None:
    require_training_stack()
    run = launch(
        tmp_path,
        compacting_collector.url,
        *SMALL,
        "--sharding",
        "ddp",
        "--steps",
        "90",
        "--no-compile",
        "--ckpt-every-steps",
        "0",
        "--no-final-ckpt",
        "--window-s",
        "1",
        "--step-delay-s",
        "0.04",
        "--slow-rank",
        "1",
        "--slow-s",
        "0.04",
        timeout_s=LAUNCH_S,
    )
    assert run.returncode == 0, run.output[-6000:]
    compacting_collector.wait_ended(run.job_id)
    r = compacting_collector.get(f"/api/v1/jobs/{run.job_id}/performance", buckets="20")
    assert r.status_code == 200, r.text
    check = _device_check()
    out = check.straggler_checks(r.json(), check.events(run.run_dir / "steplog"), slow=1)
    assert 1.4 < out["log_planted_factor"] < 2.2, out  # the trainer did slow rank 1 down
    assert out["straggler_rank_ok"], out
    assert out["straggler_score_within_10pct"], out
    assert out["step_times_equal"], out
