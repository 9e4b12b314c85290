"""Checkpoints with ``torch.distributed.checkpoint`` (DCP), counted only once committed.

Layout under the checkpoint root::

    model_config.json        the model's shape (for ``ett publish``)
    step_00000100/           one DCP checkpoint (every rank writes its shards)
    step_00000100/COMMITTED  written by rank 0 once the save is durable on every rank
    latest                   name of the newest committed step directory

A step directory without ``COMMITTED`` is an interrupted save: never resumed from, and deleted
once a newer checkpoint commits. Modes:

- ``sync``: ``dcp.save``; the loop waits for the whole write.
- ``async``: ``dcp.async_save`` copies the state in the call, then writes on a thread.
- ``async-staged``: ``dcp.async_save`` with a ``DefaultStager`` that copies on its own thread
  (pinned memory and non-blocking copies on CUDA) and, on torch >= 2.13, keeps its staging
  buffers for the next save; the loop waits for the copy to finish (``staging_completion``)
  before the parameters can change, and the write goes on in the back.

One save is in flight at a time: a new save first waits for the previous one (that wait blocks
the loop, and is counted in the new save's blocking span).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import async_save as dcp_async_save
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

import ett
from ett import torch_hooks
from ett.semconv import CheckpointModeValues
from trainer.distributed import broadcast_value
from trainer.model import TrainModel
from trainer.steplog import StepLog

COMMITTED = "COMMITTED"
LATEST = "latest"
MODEL_CONFIG = "model_config.json"


def step_dir_name(step: int) -> str:
    """``step_00000100``."""
    return f"step_{step:08d}"


def committed_steps(root: Path) -> list[int]:
    """Steps with a committed checkpoint under ``root``, ascending."""
    steps = []
    for d in Path(root).glob("step_*"):
        if (d / COMMITTED).is_file():
            try:
                steps.append(int(d.name.removeprefix("step_")))
            except ValueError:
                continue
    return sorted(steps)


def resolve_checkpoint(path: Path) -> Path:
    """A committed step directory: ``path`` itself, or the newest committed one under it."""
    path = Path(path)
    if (path / COMMITTED).is_file():
        return path
    steps = committed_steps(path)
    if not steps:
        raise FileNotFoundError(f"no committed checkpoint in {path}")
    return path / step_dir_name(steps[-1])


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _stager_reusable() -> bool:
    """Whether one ``DefaultStager`` serves many saves (reusing its staging buffers). torch 2.11's
    closes its state-dict stager at the end of every ``stage()``, so a second save fails with
    ``KeyError(<class 'type'>)``; torch 2.13's can be reused (checked here)."""
    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    return (major, minor) >= (2, 13)


class Checkpointer:
    """Saves, commits, finds and restores checkpoints for one rank."""

    def __init__(
        self,
        root: Path,
        *,
        mode: str,
        group: dist.ProcessGroup,
        rank: int,
        sess: ett.Session,
        log: StepLog,
        keep: int = 3,
        device: torch.device | None = None,
        job_id: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.mode = mode
        self.group = group
        self.rank = rank
        self.sess = sess
        self.log = log
        self.keep = max(1, keep)
        self.job_id = job_id
        self.last_saved: int | None = None
        self.last_committed: int | None = None
        self._pending: Future[Any] | None = None
        self._cuda = device is not None and device.type == "cuda"
        self._stager: Any = None  # kept between saves where torch allows (_stager_reusable)
        if rank == 0:
            self.root.mkdir(parents=True, exist_ok=True)

    # --- restore ---------------------------------------------------------------------------

    def latest_committed(self) -> int | None:
        """The newest committed step, as rank 0 sees it (collective over the checkpoint group)."""
        local = committed_steps(self.root) if self.rank == 0 else None
        steps = broadcast_value(local, self.group)
        assert steps is None or isinstance(steps, list)
        return steps[-1] if steps else None

    def restore(self, step: int, model: TrainModel) -> None:
        """Load the checkpoint of ``step`` into ``model`` in place (collective)."""
        state = model.state_dict()
        dcp_load(
            state, checkpoint_id=str(self.root / step_dir_name(step)), process_group=self.group
        )
        model.load_state_dict(state)
        self.last_saved = self.last_committed = step

    # --- save ------------------------------------------------------------------------------

    def save(self, step: int, model: TrainModel) -> None:
        """Checkpoint ``model`` at ``step``; returns when the training loop may go on."""
        path = self.root / step_dir_name(step)
        span_mode = CheckpointModeValues.SYNC if self.mode == "sync" else CheckpointModeValues.ASYNC
        t0 = time.perf_counter()
        state = model.state_dict()
        nbytes = torch_hooks.state_dict_nbytes(state)
        with self.sess.checkpoint_save(step, mode=span_mode.value, nbytes=nbytes) as ck:
            self.wait()
            if self.rank == 0:
                (path / COMMITTED).unlink(missing_ok=True)  # an older run's marker is not ours
            if self.mode == "sync":
                dcp_save(state, checkpoint_id=str(path), process_group=self.group)
                self._commit(step)
            else:
                persisted = self._start_async(state, path)
                done: Future[None] = Future()
                persisted.add_done_callback(lambda f: self._finish_async(f, step, t0, done))
                self._pending = done
                ck.persist(done)
        blocking = time.perf_counter() - t0
        self.log.event(
            "ckpt_save", step=step, mode=self.mode, blocking_s=round(blocking, 6), bytes=nbytes
        )
        self.last_saved = step

    def _start_async(self, state: dict[str, Any], path: Path) -> Future[Any]:
        kwargs: dict[str, Any] = {"checkpoint_id": str(path), "process_group": self.group}
        if self.mode == "async-staged":
            kwargs["async_stager"] = self._staging()
        response = dcp_async_save(state, **kwargs)
        if isinstance(response, Future):
            return response
        response.staging_completion.result()  # the copy must finish before the weights change
        return response.upload_completion

    def _staging(self) -> Any:
        """The ``DefaultStager`` of this save: pinned memory and non-blocking copies on CUDA."""
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

        if self._stager is not None and not _stager_reusable():
            self._stager.close()
            self._stager = None
        if self._stager is None:
            cuda = self._cuda
            self._stager = DefaultStager(StagingOptions(cuda, cuda, True, cuda))
        return self._stager

    def _finish_async(self, upload: Future[Any], step: int, t0: float, done: Future[None]) -> None:
        """Runs on the upload thread: commit a finished save, then complete ``done``."""
        error = upload.exception()
        if error is None:
            try:
                self._commit(step)
                self.log.event(
                    "ckpt_persist", step=step, persist_s=round(time.perf_counter() - t0, 6)
                )
            except Exception as exc:
                error = exc
        if error is None:
            done.set_result(None)
        else:
            self.log.event("ckpt_failed", step=step, error=repr(error))
            done.set_exception(error)

    def _commit(self, step: int) -> None:
        """Mark ``step`` committed (rank 0) once DCP returned: every rank's shards are written."""
        self.last_committed = step
        if self.rank != 0:
            return
        path = self.root / step_dir_name(step)
        marker = {
            "step": step,
            "time": time.time(),
            "mode": self.mode,
            "attempt": self.log.attempt,
            "job_id": self.job_id,
        }
        _atomic_write(path / COMMITTED, json.dumps(marker) + "\n")
        _atomic_write(self.root / LATEST, path.name + "\n")
        self.log.event("ckpt_commit", step=step)
        self._prune(step)

    def _prune(self, newest: int) -> None:
        """Keep the newest ``keep`` committed checkpoints; drop interrupted saves before them."""
        keep = set(committed_steps(self.root)[-self.keep :])
        for d in self.root.glob("step_*"):
            try:
                step = int(d.name.removeprefix("step_"))
            except ValueError:
                continue
            if step < newest and step not in keep:
                shutil.rmtree(d, ignore_errors=True)

    def wait(self) -> BaseException | None:
        """Wait for the save in flight, if any; returns its error (logged, never committed)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        error = pending.exception()
        if error is not None:
            warnings.warn(f"checkpoint did not persist: {error!r}", RuntimeWarning, stacklevel=2)
        return error

    def close(self) -> None:
        """Wait for the save in flight and release the stager. Raises when that save failed:
        an attempt whose last checkpoint did not persist has not completed."""
        error = self.wait()
        if self._stager is not None:
            self._stager.close()
            self._stager = None
        if error is not None:
            raise RuntimeError(f"the last checkpoint did not persist: {error!r}") from error

    def write_model_config(self, text: str) -> None:
        """Rank 0 writes ``model_config.json`` beside the checkpoints."""
        if self.rank == 0:
            _atomic_write(self.root / MODEL_CONFIG, text)
