"""``--slow-rank`` / ``--slow-s``: the planted straggler of the device runs (issue 29)."""

from __future__ import annotations

import time

import pytest

from trainer import model
from trainer.config import ModelConfig, parse_args
from trainer.data import SyntheticClicks


def test_slow_rank_options_parse_and_default_to_none() -> None:
    assert (parse_args([]).slow_rank, parse_args([]).slow_s) == (-1, 0.0)
    cfg = parse_args(["--slow-rank", "3", "--slow-s", "0.02"])
    assert (cfg.slow_rank, cfg.slow_s) == (3, 0.02)


def test_negative_slow_s_exits_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--slow-s", "-1"])
    assert "--slow-s must be a number >= 0" in capsys.readouterr().err


def test_slowed_step_sleeps_and_times_its_backward() -> None:
    """One rank without a process group: the sleep lands in the step, the backward is timed."""
    mc = ModelConfig()
    tm = model.build_ddp(mc, model.resolve_device("cpu"), 0.05)
    batch = SyntheticClicks(mc, 64, seed=0, rank=0).batch(0)
    tm.train_step(batch)  # warm-up: the first step builds the optimizers' state
    assert tm.backward_s == 0.0  # not timed unless asked
    tm.slow_s, tm.timed_backward = 0.05, True
    t0 = time.perf_counter()
    tm.train_step(batch)
    assert time.perf_counter() - t0 >= 0.05
    assert 0.0 < tm.backward_s < time.perf_counter() - t0 - 0.05 + 1e-3
