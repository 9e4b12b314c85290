"""`make demo`'s account of the trainer run: torchrun's output as it was written in a demo run
(two ranks, an injected exception at step 200, a restart), told in plain words."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the shape of .ett-demo/trainer.log (a real run's lines, the tracebacks shortened)
LOG = (
    "*****************************************\n"
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default\n"
    "train:   0%|          | 0/240 [00:00<?, ?step/s]"
    "\rtrain:   2%|▏         | 4/240 [00:00<00:33,  7.07step/s, loss=0.5645, ckpt=-]"
    "\rtrain:  83%|████████▎ | 200/240 [00:20<00:04,  9.52step/s, loss=0.4774, ckpt=160]\n"
    "Traceback (most recent call last):\n"
    '  File "trainer/faults.py", line 93, in inject\n'
    '    raise InjectedFault(f"injected fault at step {step}")\n'
    "trainer.faults.InjectedFault: injected fault at step 200 on rank 1\n"
    "W1201 04:37:15.318000 30832 .venv/lib/python3.11/site-packages/torch/distributed/elastic/"
    "multiprocessing/api.py:1028] Sending process 31118 closing signal SIGTERM\n"
    "E1201 04:37:20.899000 30832 .venv/lib/python3.11/site-packages/torch/distributed/elastic/"
    "multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 31119) of binary: "
    "/tmp/ett/.venv/bin/python\n"
    "train:  67%|██████▋   | 160/240 [00:00<?, ?step/s]"
    "\rtrain: 100%|██████████| 240/240 [00:07<00:00, 11.40step/s, loss=0.4269, ckpt=160]\n"
)


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ett_demo", ROOT / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_trainer_run_is_told_in_order_without_torch_log_noise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _demo()._summarize_trainer_log(LOG)
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        "attempt 0: train:  83%|████████▎ | 200/240 [00:20<00:04,  9.52step/s, loss=0.4774, "
        "ckpt=160]",
        "the injected failure: injected fault at step 200 on rank 1",
        "torchrun: sends SIGTERM to the other rank (pid 31118)",
        "torchrun: rank 1 exited with 1; restarting the job",
        "attempt 1: train: 100%|██████████| 240/240 [00:07<00:00, 11.40step/s, loss=0.4269, "
        "ckpt=160]",
    ]


def test_a_run_without_a_failure_is_one_attempt(capsys: pytest.CaptureFixture[str]) -> None:
    bars = "train:  50%|█ | 1/2 [00:00<00:00]\rtrain: 100%|██| 2/2 [00:01<00:00]\n"
    _demo()._summarize_trainer_log(bars)
    assert capsys.readouterr().out.strip() == "attempt 0: train: 100%|██| 2/2 [00:01<00:00]"


def test_a_rank_that_failed_for_its_peer_is_told_so(capsys: pytest.CaptureFixture[str]) -> None:
    """torchrun names the first rank it saw exit: the demo said 'rank 0 exited with 1' when
    the fault was injected on rank 1 and rank 0 died of the lost peer."""
    log = LOG.replace("local_rank: 1 (pid: 31119)", "local_rank: 0 (pid: 31118)")
    _demo()._summarize_trainer_log(log)
    out = capsys.readouterr().out
    assert "torchrun: rank 0 exited with 1 (its peer, rank 1, had failed" in out
