"""The torch integrations, on CPU: dynamo compile callbacks, the compile cache, DCP save /
async_save / load on a one-rank gloo group, and init_process_group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ett import semconv, torch_hooks
from ett.torch_hooks import cache_status
from tests.support.ports import free_port
from tests.support.waits import wait_until

if TYPE_CHECKING:
    from conftest import Recorder

torch = pytest.importorskip("torch")


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.fixture
def gloo(recorder: Recorder) -> Iterator[Any]:
    """A one-rank gloo process group, initialised through the hook (start-up phase pg_init)."""
    import torch.distributed as dist

    sess = recorder.start()
    torch_hooks.init_process_group(
        backend="gloo",
        init_method=f"tcp://127.0.0.1:{free_port()}",
        rank=0,
        world_size=1,
        session=sess,
    )
    yield sess
    dist.destroy_process_group()


def test_cache_status() -> None:
    assert cache_status(2, 0) == "hit"
    assert cache_status(0, 3) == "miss"
    assert cache_status(1, 1) == "partial"
    assert cache_status(0, 0) == "off"


def test_compile_hooks_time_each_compilation(recorder: Recorder) -> None:
    sess = recorder.start()
    torch._dynamo.reset()  # (reset() also clears dynamo's callbacks: install after it)
    assert torch_hooks.install_compile_hooks(sess)
    try:

        def f(x: Any) -> Any:
            return torch.relu(x) * 2 + 1

        compiled = torch.compile(f, backend="eager")
        compiled(torch.randn(4))
        compiled(torch.randn(4, 3))  # another rank: a recompile
        wait_until(  # each span ends by its timer, once dynamo recorded the frame's metrics
            lambda: len(recorder.named(semconv.SPAN_COMPILE)) == 2, 60, "both compile spans"
        )
    finally:
        torch_hooks.uninstall_compile_hooks()
    sess.end()
    spans = sorted(recorder.named(semconv.SPAN_COMPILE), key=lambda s: s.start_time)
    assert len(spans) == 2
    for span in spans:
        assert attrs(span)[semconv.COMPILE_TRIGGER] == "dynamo"
        assert attrs(span)[semconv.COMPILE_FRAMES] == 1
        assert attrs(span)[semconv.COMPILE_CACHE] == "off"  # the eager backend has no cache
        assert span.end_time > span.start_time


def test_compile_span_ended_by_the_session_end(recorder: Recorder) -> None:
    sess = recorder.start()
    torch._dynamo.reset()
    torch_hooks.install_compile_hooks(sess)
    try:
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
        sess.end()  # before the finalize timer fires
    finally:
        torch_hooks.uninstall_compile_hooks()
    assert len(recorder.named(semconv.SPAN_COMPILE)) == 1


def test_load_compile_cache_of_a_missing_file_is_a_miss(recorder: Recorder, tmp_path: Path) -> None:
    sess = recorder.start()
    assert torch_hooks.load_compile_cache(tmp_path / "absent.bin", session=sess) is None
    assert torch_hooks.load_compile_cache(None, session=sess) is None
    sess.end()
    spans = recorder.named(semconv.SPAN_COMPILE)
    assert [attrs(s)[semconv.COMPILE_CACHE] for s in spans] == ["miss", "miss"]
    assert {attrs(s)[semconv.COMPILE_TRIGGER] for s in spans} == {"cache_load"}


def test_init_process_group_is_the_pg_init_phase(gloo: Any, recorder: Recorder) -> None:
    gloo.end()
    span = recorder.one(semconv.startup_span_name("pg_init"))
    assert attrs(span)[semconv.COMPONENT] == "comms"


def test_dcp_save_load_and_async_save(gloo: Any, recorder: Recorder, tmp_path: Path) -> None:
    sess = gloo
    state = {"w": torch.ones(256, 4), "nested": {"b": torch.zeros(10, dtype=torch.float64)}}
    nbytes = 256 * 4 * 4 + 10 * 8
    assert torch_hooks.state_dict_nbytes(state) == nbytes
    torch_hooks.dcp_save(state, step=100, checkpoint_id=str(tmp_path / "s100"), session=sess)
    response = torch_hooks.dcp_async_save(
        state, step=200, checkpoint_id=str(tmp_path / "s200"), session=sess
    )
    future = getattr(response, "upload_completion", response)
    future.result(timeout=60)
    target = {"w": torch.empty(256, 4), "nested": {"b": torch.empty(10, dtype=torch.float64)}}
    torch_hooks.dcp_load(target, step=200, checkpoint_id=str(tmp_path / "s200"), session=sess)
    assert torch.equal(target["w"], state["w"])
    wait_until(  # it ends in the future's done-callback, which may run after result() returned
        lambda: recorder.named(semconv.SPAN_CHECKPOINT_PERSIST), 60, "the persist span"
    )
    sess.end()
    saves = {
        attrs(s)[semconv.CHECKPOINT_STEP]: s for s in recorder.named(semconv.SPAN_CHECKPOINT_SAVE)
    }
    assert attrs(saves[100])[semconv.CHECKPOINT_MODE] == "sync"
    assert attrs(saves[200])[semconv.CHECKPOINT_MODE] == "async"
    assert attrs(saves[100])[semconv.CHECKPOINT_BYTES] == nbytes
    persist = recorder.one(semconv.SPAN_CHECKPOINT_PERSIST)
    assert attrs(persist)[semconv.CHECKPOINT_STEP] == 200
    assert persist.start_time == saves[200].start_time
    assert persist.end_time >= saves[200].end_time
    load = recorder.one(semconv.startup_span_name("checkpoint_load"))
    assert attrs(load)[semconv.CHECKPOINT_STEP] == 200
    assert attrs(load)[semconv.COMPONENT] == "checkpoint"


def test_dcp_async_save_with_a_stager_waits_for_staging(
    gloo: Any, recorder: Recorder, tmp_path: Path
) -> None:
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

    stager = DefaultStager(StagingOptions(False, False, True, False))
    state = {"w": torch.ones(64, 64)}
    response = torch_hooks.dcp_async_save(
        state,
        step=300,
        checkpoint_id=str(tmp_path / "s300"),
        async_stager=stager,
        wait_staging=True,
        session=gloo,
    )
    assert response.staging_completion.done()
    response.upload_completion.result(timeout=60)
    wait_until(lambda: recorder.named(semconv.SPAN_CHECKPOINT_PERSIST), 60, "the persist span")
    gloo.end()
    stager.close()
    assert attrs(recorder.one(semconv.SPAN_CHECKPOINT_PERSIST))[semconv.CHECKPOINT_STEP] == 300


def test_user_errors_propagate_unchanged(recorder: Recorder, tmp_path: Path) -> None:
    sess = recorder.start()
    with pytest.raises(BaseException) as caught:  # DCP's CheckpointException is a BaseException
        torch_hooks.dcp_load(
            {"w": torch.empty(2)}, step=1, checkpoint_id=str(tmp_path / "nope"), session=sess
        )
    sess.end()
    span = recorder.one(semconv.startup_span_name("checkpoint_load"))
    assert span.status.status_code.name == "ERROR"
    assert type(caught.value).__name__ == "CheckpointException"


def test_inductor_compile_cache_round_trip(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer's workflow, with a real (cold) inductor cache: compile (miss), save the cache
    artifacts, forget everything, load them (a timed hit), compile again (hit). ~15 s on CPU."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    sess = recorder.start()
    artifacts = tmp_path / "artifacts.bin"

    def f(x: Any) -> Any:
        return torch.sin(x) + x * 5

    try:
        torch._dynamo.reset()
        torch_hooks.install_compile_hooks(sess)
        torch.compile(f, backend="inductor")(torch.ones(16))
        assert torch_hooks.save_compile_cache(artifacts)
        torch._dynamo.reset()  # forget the compiled code (and dynamo's callbacks)
        torch_hooks.install_compile_hooks(sess)
        assert torch_hooks.load_compile_cache(artifacts, session=sess) is not None
        torch.compile(f, backend="inductor")(torch.ones(16))
    finally:
        torch_hooks.uninstall_compile_hooks()
    sess.end()
    spans = sorted(recorder.named(semconv.SPAN_COMPILE), key=lambda s: s.start_time)
    got = [(attrs(s)[semconv.COMPILE_TRIGGER], attrs(s)[semconv.COMPILE_CACHE]) for s in spans]
    assert got == [("dynamo", "miss"), ("cache_load", "hit"), ("dynamo", "hit")]
    assert attrs(spans[0])[semconv.COMPILE_FRAMES] == 1
