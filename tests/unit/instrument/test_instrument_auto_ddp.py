"""Zero-code timing of DDP's collective waits (issue 26, ``ett._auto_ddp``): the hooks
``ett-instrument`` puts on ``DistributedDataParallel``, on real one-rank gloo DDP models, beside
the program's own communication hooks (DDP takes one hook: the program's must win, never raise).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ett import _auto_ddp, semconv, torch_hooks
from ett._auto_torch import AutoTorch
from tests.unit.instrument.conftest import Recorder

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
ddp_module = pytest.importorskip("torch.nn.parallel.distributed")
DDP = ddp_module.DistributedDataParallel


@pytest.fixture
def group(tmp_path: Path) -> Iterator[None]:
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture
def auto(recorder: Recorder, group: None) -> Iterator[AutoTorch]:
    """A zero-code session's DDP hooks, on the real DDP class (undone afterwards)."""
    saved = DDP.__init__
    hooks = AutoTorch(recorder.start(window_s=60.0))
    hooks._patch_ddp(ddp_module)
    try:
        yield hooks
    finally:
        DDP.__init__ = saved
        _auto_ddp.unpatch(DDP)


def _train(model: Any, steps: int = 3, recorder: Recorder | None = None) -> Any:
    x = torch.randn(8, 4)
    for _ in range(steps):
        model(x).sum().backward()
        if recorder is not None and recorder.session is not None:
            recorder.session.step(samples=8)
    return x


def _wait_s(recorder: Recorder) -> Any:
    assert recorder.session is not None
    recorder.session.end()
    (window,) = recorder.named(semconv.SPAN_TRAIN_WINDOW)
    return (window.attributes or {}).get(semconv.WINDOW_WAIT_S)


def _pair() -> tuple[Any, Any]:
    torch.manual_seed(0)
    plain = torch.nn.Linear(4, 1)
    model = DDP(torch.nn.Linear(4, 1))
    model.module.load_state_dict(plain.state_dict())
    return plain, model


def test_every_ddp_model_reports_its_waits(auto: AutoTorch, recorder: Recorder) -> None:
    plain, model = _pair()
    slot = getattr(model, _auto_ddp.SLOT_ATTR)
    assert model._comm_hooks == []  # to DDP, still no hook of the program's
    x = _train(model, recorder=recorder)
    plain(x).sum().backward()
    assert torch.allclose(model.module.weight.grad, 3 * plain.weight.grad)
    assert slot.timer.steps == 3
    wait = _wait_s(recorder)
    assert isinstance(wait, float) and 0.0 <= wait < 1.0


def test_the_programs_own_hook_wins_and_is_timed(auto: AutoTorch, recorder: Recorder) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    plain, model = _pair()
    calls: list[Any] = []

    def doubled(state: Any, bucket: Any) -> Any:
        calls.append(state)
        return allreduce_hook(None, bucket).then(lambda f: f.value() * 2)

    doubled.__annotations__ = {}  # strings here (DDP checks them): none, as most hooks have
    model.register_comm_hook("mine", doubled)  # no "can only be called once" error
    x = _train(model, recorder=recorder)
    plain(x).sum().backward()
    assert calls == ["mine"] * 3  # its hook, with its state
    # its result: each step doubles the accumulated gradient, 2g, (2g+g)·2, (6g+g)·2
    assert torch.allclose(model.module.weight.grad, 14 * plain.weight.grad)
    assert model._comm_hooks == [(doubled, "mine")]
    assert getattr(model, _auto_ddp.SLOT_ATTR).timer.steps == 3
    with pytest.raises(RuntimeError):  # a second registration fails, as without ETT
        model.register_comm_hook(None, doubled)
    with pytest.raises(ValueError, match="annotation"):  # DDP's own checks still run
        _pair()[1].register_comm_hook(None, _annotated)
    assert isinstance(_wait_s(recorder), float)


def test_a_builtin_hook_and_time_ddp_waits_are_taken_in(
    auto: AutoTorch, recorder: Recorder
) -> None:
    plain, model = _pair()
    model._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS)
    x = _train(model, steps=1)
    plain(x).sum().backward()
    assert torch.allclose(model.module.weight.grad, plain.weight.grad, atol=1e-2)
    # the explicit API on a zero-code model: its hook times itself, the slot stops timing
    _, other = _pair()
    assert torch_hooks.time_ddp_waits(other, session=recorder.session)
    slot = getattr(other, _auto_ddp.SLOT_ATTR)
    assert slot.taken and not slot.timed
    _train(other, steps=2, recorder=recorder)
    assert slot.timer.steps == 0  # counted once, by time_ddp_waits' own timer
    assert isinstance(_wait_s(recorder), float)


def test_models_the_slot_would_change_are_left_alone(auto: AutoTorch) -> None:
    class Sparse(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.EmbeddingBag(10, 4, sparse=True)

        def forward(self, x: Any) -> Any:
            return self.embedding(x)

    model = DDP(Sparse())
    assert not hasattr(model, _auto_ddp.SLOT_ATTR)
    model.register_comm_hook(None, _plain_hook)  # the program's hook, DDP's own way
    assert model._comm_hooks == [(_plain_hook, None)]


def _annotated(state: Any, bucket: Any) -> Any:
    return None


_annotated.__annotations__ = {"bucket": int}  # DDP wants dist.GradBucket or none


def _plain_hook(state: Any, bucket: Any) -> Any:
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    return allreduce_hook(None, bucket)


_plain_hook.__annotations__ = {}


def test_ett_ddp_waits_off_leaves_ddp_untimed(
    recorder: Recorder, group: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ETT_DDP_WAITS", "0")
    saved = DDP.__init__
    hooks = AutoTorch(recorder.start(window_s=60.0))
    hooks._patch_ddp(ddp_module)
    try:
        model = DDP(torch.nn.Linear(4, 2))
        _train(model, recorder=recorder)
        assert _wait_s(recorder) is None  # DDP's own reduction: nothing timed
    finally:
        DDP.__init__ = saved
        _auto_ddp.unpatch(DDP)
