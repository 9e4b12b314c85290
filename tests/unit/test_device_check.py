"""scripts/device_check.py: the step logs' account that the device runs check against."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device_check.py"
spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
assert spec is not None and spec.loader is not None
device_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(device_check)


def _row(event: str, rank: int, step: int, time: float, **fields: Any) -> dict[str, Any]:
    return {"event": event, "rank": rank, "step": step, "time": time, "attempt": 0, **fields}


def test_blocking_is_the_union_over_ranks_cut_at_the_last_step() -> None:
    rows = [_row("step", 0, 9, 10.0), _row("step", 1, 9, 10.5)]
    # step 5: rank 0 saves [4, 5], rank 1 [4.5, 6]: the ranks' interval is [4, 6]
    rows += [
        _row("ckpt_save", 0, 5, 5.0, blocking_s=1.0),
        _row("ckpt_save", 1, 5, 6.0, blocking_s=1.5),
    ]
    # the final save: rank 0 starts at 10.2 while rank 1 still steps (to 10.5): 0.3 s counts
    rows.append(_row("ckpt_save", 0, 10, 11.0, blocking_s=0.8))
    rows.append(_row("ckpt_save", 1, 10, 11.2, blocking_s=0.6))
    assert device_check.blocking_from_log(rows) == pytest.approx(2.0 + 0.3)


def test_straggler_checks_read_the_planted_factor_from_the_step_logs() -> None:
    rows = []
    for step in range(40):  # every step 0.3 s; rank 0 waits 0.1 s of it: factor 1.5
        t = 0.3 * step
        rows += [
            _row("step", 0, step, t, backward_s=0.12),
            _row("step", 1, step, t, backward_s=0.02),
        ]
    perf = {"straggler": {"rank": 1, "score": 1.9}, "ideal_step_s": 0.3}
    out = device_check.straggler_checks(perf, rows, slow=1)
    assert out["log_planted_factor"] == pytest.approx(0.3 / 0.2, rel=1e-3)
    assert out["straggler_rank_ok"] and out["step_times_equal"]
    assert out["straggler_score_within_10pct"] is (abs(1.9 / (0.3 / 0.2) - 1) <= 0.10)
    assert (
        device_check.straggler_checks({"straggler": None}, rows, slow=1)["straggler_rank_ok"]
        is False
    )
