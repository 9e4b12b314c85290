"""Each step's wait for DDP's gradient all-reduce (issue 26): ``ett.torch_hooks.time_ddp_waits``
on a real one-rank gloo DDP model, and the windows carrying ``ett.window.wait_s``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ett import semconv, torch_hooks
from ett._ddp_waits import WaitTimer
from tests.unit.instrument.conftest import Recorder

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")


class Bucket:
    def __init__(self, last: bool) -> None:
        self.last = last

    def is_last(self) -> bool:
        return self.last

    def buffer(self) -> Any:
        return torch.zeros(4)


def test_only_the_last_bucket_is_timed_from_ready_to_done() -> None:
    waits: list[int] = []
    futures: list[Any] = []

    def hook(state: Any, bucket: Any) -> Any:
        fut = torch.futures.Future()
        futures.append(fut)
        return fut

    timer = WaitTimer(hook, waits.append)
    first = timer(None, Bucket(last=False))
    assert first is futures[0]  # passed through untouched
    last = timer(None, Bucket(last=True))
    done = threading.Event()
    threading.Timer(0.05, lambda: (futures[1].set_result(7), done.set())).start()
    assert last.wait() == 7  # the hook's result, unchanged
    assert done.wait(5)
    futures[0].set_result(1)
    assert timer.steps == 1 and len(waits) == 1
    assert 0.045e9 <= waits[0] < 2e9  # the 50 ms the all-reduce took to complete


def test_an_all_reduce_that_failed_adds_no_wait() -> None:
    """A peer that died left the last bucket's all-reduce hanging until gloo saw the loss; that
    wait was added to the window of the steps before it (a rank whose compute could not be
    below its 0.05 s sleep read 0.03 s a step, and its straggler score 3.3 against 1.96)."""
    waits: list[int] = []
    fut = torch.futures.Future()
    timer = WaitTimer(lambda state, bucket: fut, waits.append)
    chained = timer(None, Bucket(last=True))
    fut.set_exception(RuntimeError("Connection closed by peer"))
    with pytest.raises(RuntimeError, match="Connection closed by peer"):
        chained.wait()  # the failure reaches DDP unchanged
    assert waits == [] and timer.steps == 0


@pytest.fixture
def group(tmp_path: Path) -> Iterator[None]:
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_a_ddp_model_reports_its_waits_on_every_window(recorder: Recorder, group: None) -> None:
    sess = recorder.start(window_s=60.0)
    torch.manual_seed(0)
    plain = torch.nn.Linear(4, 1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    model.module.load_state_dict(plain.state_dict())
    assert torch_hooks.time_ddp_waits(model, session=sess)
    assert not torch_hooks.time_ddp_waits(model, session=sess)  # DDP takes one hook only
    x = torch.randn(8, 4)
    for _ in range(3):
        model(x).sum().backward()
        sess.step(samples=8)
    plain(x).sum().backward()
    assert plain.weight.grad is not None
    # the same gradients as without the hook (3 backward passes accumulate)
    assert torch.allclose(model.module.weight.grad, 3 * plain.weight.grad)
    sess.end()
    (win,) = recorder.named(semconv.SPAN_TRAIN_WINDOW)
    wait = (win.attributes or {})[semconv.WINDOW_WAIT_S]
    assert isinstance(wait, float) and 0.0 <= wait < 1.0


def test_without_timing_windows_carry_no_wait(recorder: Recorder) -> None:
    sess = recorder.start(window_s=60.0)
    sess.step()
    sess.end()
    (win,) = recorder.named(semconv.SPAN_TRAIN_WINDOW)
    assert semconv.WINDOW_WAIT_S not in (win.attributes or {})
