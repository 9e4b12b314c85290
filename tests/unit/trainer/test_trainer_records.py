"""The trainer's records on disk: the step log and the commit markers of checkpoints."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from trainer.steplog import StepLog, read_run, read_steplog

if importlib.util.find_spec("torchrec") is None:  # pragma: no cover - depends on the install
    if os.environ.get("CI") == "true":
        pytest.fail("torchrec is not installed: `make test` installs it", pytrace=False)
    checkpoint = None
else:
    from trainer import checkpoint

needs_torch = pytest.mark.skipif(checkpoint is None, reason="`make test` installs torchrec")


def test_steplog_lines_carry_identity_and_follow_progress(tmp_path: Path) -> None:
    log = StepLog(tmp_path, rank=1, attempt=2)
    log.event("start")
    log.event("step", step=4, loss=0.5)
    log.event("ckpt_save", step=5, blocking_s=0.1)
    log.event("failure", cause="exception")
    log.close()
    events = read_steplog(tmp_path / "rank1.jsonl")
    assert [e["event"] for e in events] == ["start", "step", "ckpt_save", "failure"]
    assert all(e["attempt"] == 2 and e["rank"] == 1 and "time" in e for e in events)
    assert [e["step"] for e in events] == [-1, 4, 5, 4]  # events without a step: the last step


def test_attempts_append_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    for attempt in (0, 1):
        log = StepLog(tmp_path, rank=0, attempt=attempt)
        log.event("start")
        log.close()
    with (tmp_path / "rank0.jsonl").open("a") as f:
        f.write('{"attempt": 1, "ev')  # a process killed mid-write
    assert [e["attempt"] for e in read_steplog(tmp_path / "rank0.jsonl")] == [0, 1]
    StepLog(tmp_path, rank=1, attempt=0).event("start")
    assert len(list(read_run(tmp_path))) == 3


def _fake_checkpoint(root: Path, step: int, committed: bool) -> Path:
    d = root / f"step_{step:08d}"
    d.mkdir(parents=True)
    (d / "__0_0.distcp").write_bytes(b"x")
    if committed:
        (d / "COMMITTED").write_text(json.dumps({"step": step}))
    return d


@needs_torch
def test_only_committed_checkpoints_count(tmp_path: Path) -> None:
    assert checkpoint is not None
    _fake_checkpoint(tmp_path, 10, True)
    newest = _fake_checkpoint(tmp_path, 20, True)
    _fake_checkpoint(tmp_path, 30, False)  # interrupted: a save that never committed
    (tmp_path / "step_garbage").mkdir()
    assert checkpoint.committed_steps(tmp_path) == [10, 20]
    assert checkpoint.resolve_checkpoint(tmp_path) == newest
    assert checkpoint.resolve_checkpoint(newest) == newest
    with pytest.raises(FileNotFoundError):
        checkpoint.resolve_checkpoint(tmp_path / "step_00000030")
    assert checkpoint.step_dir_name(20) == newest.name


@needs_torch
def test_checkpoint_bytes_are_the_librarys_local_tensor_bytes(tmp_path: Path) -> None:
    import torch

    assert checkpoint is not None
    state = {"a": torch.zeros(10, 4), "b": [torch.zeros(3, dtype=torch.int64)], "c": 5}
    assert checkpoint.torch_hooks.state_dict_nbytes(state) == 10 * 4 * 4 + 3 * 8
    assert not hasattr(checkpoint, "state_bytes")  # one copy: ett.torch_hooks


@needs_torch
def test_checkpoint_bytes_count_torchrec_local_shards() -> None:
    """A sharded DMP's DTensors hold TorchRec's LocalShardsWrapper, whose shards are tensors."""
    import torch
    from torchrec.distributed.shards_wrapper import LocalShardsWrapper

    assert checkpoint is not None
    shards = [torch.zeros(2, 4), torch.zeros(3, 4)]
    wrapper = LocalShardsWrapper(shards, [(0, 0), (2, 0)])
    assert checkpoint.torch_hooks.state_dict_nbytes({"table": wrapper}) == 5 * 4 * 4
