"""``ett train``: an instrumented TorchRec DLRM trainer, launched by torchrun.

Read top to bottom: start-up (each phase in its span), then the loop (fault injection, one step,
progress, evaluation, checkpoints), then the end of the attempt (a failed one's in
:mod:`trainer.ending`). ``python -m trainer.train``
runs it too, so torchrun can launch it::

    torchrun --nproc-per-node 2 --max-restarts 1 -m trainer.train --steps 200 --no-compile
"""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass

import torch

import ett
from ett import torch_hooks
from ett.semconv import EndReasonValues, FailureCauseValues, ShutdownStepValues
from trainer import faults, model
from trainer.checkpoint import Checkpointer
from trainer.compile_cache import CompileCache, compile_model, use_fresh_local_cache
from trainer.config import TrainConfig, parse_args
from trainer.data import SyntheticClicks
from trainer.distributed import (
    Groups,
    Identity,
    broadcast_value,
    init_groups,
    reduce_in_flight,
    wait_in_barrier,
)
from trainer.ending import end_failed, log_failure, teardown
from trainer.progress import Progress
from trainer.steplog import StepLog
from trainer.telemetry import open_session, timed_phase


@dataclass
class Job:
    """Everything the training loop needs, built by :func:`start_up`."""

    cfg: TrainConfig
    ident: Identity
    sess: ett.Session
    log: StepLog
    groups: Groups
    model: model.TrainModel
    ckpt: Checkpointer
    data: SyntheticClicks
    start_step: int
    device: torch.device


def start_up(cfg: TrainConfig, ident: Identity, sess: ett.Session, log: StepLog) -> Job:
    """Every start-up phase, in order, each in its ``ett.startup.<phase>`` span."""
    device = model.resolve_device(cfg.device)
    sharding = model.resolve_sharding(cfg.sharding, device)
    if device.type == "cuda":  # the first CUDA context is its own phase (CPU: nothing)
        torch_hooks.init_cuda(torch.device("cuda", ident.local_rank), session=sess)
    with timed_phase(sess, log, "pg_init", device=device.type):
        groups = init_groups(ident, device)
    torch.manual_seed(cfg.seed)  # the same dense weights on every rank
    with timed_phase(sess, log, "model_init", sharding=sharding):
        if sharding == "dmp":
            dlrm = model.build_dmp_unsharded(cfg.model, device, cfg.lr)
        else:
            tm = model.build_ddp(cfg.model, device, cfg.lr)
    if sharding == "dmp":
        with timed_phase(sess, log, "sharding_plan"):
            plan, sharders = model.plan_sharding(dlrm, device, groups.default)
            tm = model.shard_dmp(dlrm, device, groups.default, plan, sharders, cfg.lr)
    time_the_loop(tm, cfg, ident, sess)
    ckpt = Checkpointer(
        cfg.checkpoint_dir,
        mode=cfg.ckpt_mode,
        group=groups.checkpoint,
        rank=ident.rank,
        sess=sess,
        log=log,
        keep=cfg.ckpt_keep,
        device=device,
        job_id=cfg.job_id,
    )
    ckpt.write_model_config(cfg.model.to_json())
    start = ckpt.latest_committed() if cfg.resume else None
    if start is not None:
        t0 = time.perf_counter()
        with sess.checkpoint_load(start):
            ckpt.restore(start, tm)
        log.event("phase", phase="checkpoint_load", duration_s=round(time.perf_counter() - t0, 6))
        log.event("resume", step=start)
    if cfg.compile:
        with timed_phase(sess, log, "compile"):
            result = compile_model(
                tm, cfg.model, cfg.batch_size, CompileCache(cfg.compile_cache, ident.rank), sess
            )
        log.event(
            "compile",
            cache=result.cache,
            load_s=round(result.load_s, 6),
            duration_s=round(result.compile_s, 6),
            frames=result.frames,
            loaded=result.loaded,
        )
    with timed_phase(sess, log, "dataloader_init"):
        data = SyntheticClicks(cfg.model, cfg.batch_size, seed=cfg.seed, rank=ident.rank)
        data.batch(0)  # the first batch's cost belongs here, not to the first step
    return Job(cfg, ident, sess, log, groups, tm, ckpt, data, start or 0, device)


def time_the_loop(
    tm: model.TrainModel, cfg: TrainConfig, ident: Identity, sess: ett.Session
) -> None:
    """Time each step's wait for the gradient all-reduce (``ett.window.wait_s``: the straggler
    figures) on the ``ddp`` path, and plant the slowdown of ``--slow-rank``, whose run also
    times each backward for the step log (``backward_s``: its own account of the wait)."""
    wrapped = isinstance(tm.wrapped, torch.nn.parallel.DistributedDataParallel)
    if wrapped and torch_hooks.ddp_waits_enabled():  # ETT_DDP_WAITS=0: DDP's own reduction, untimed
        torch_hooks.time_ddp_waits(tm.wrapped, session=sess)
    if cfg.slow_rank >= 0:
        tm.timed_backward = True
        tm.slow_s = cfg.slow_s if ident.rank == cfg.slow_rank else 0.0


def checkpoint_due(job: Job, step: int, last_time: float) -> bool:
    """Is a checkpoint due after ``step`` steps? Rank 0 decides for time-based intervals."""
    cfg = job.cfg
    if cfg.ckpt_every_steps and step % cfg.ckpt_every_steps == 0:
        return True
    if cfg.ckpt_every_s <= 0:
        return False
    due = time.monotonic() - last_time >= cfg.ckpt_every_s
    return bool(broadcast_value(due, job.groups.checkpoint))


def evaluate(job: Job, step: int) -> None:
    """Mean loss on held-out batches, inside an ``ett.eval`` span (every rank takes part)."""
    held_out = SyntheticClicks(job.cfg.model, job.cfg.batch_size, job.cfg.seed, job.ident.rank, 1)
    t0 = time.perf_counter()
    with job.sess.eval():
        losses = [
            float(job.model.eval_loss(held_out.batch(i).to(job.device)))
            for i in range(job.cfg.eval_batches)
        ]
    job.log.event(
        "eval",
        step=step,
        loss=sum(losses) / len(losses),
        duration_s=round(time.perf_counter() - t0, 6),
    )


def train_loop(job: Job, watchdog: faults.Watchdog) -> None:
    """Train from ``job.start_step`` to ``cfg.steps``, checkpointing on the way."""
    cfg, ident, sess, log = job.cfg, job.ident, job.sess, job.log
    bar = Progress(
        enabled=cfg.progress and ident.rank == 0,
        total=cfg.steps,
        initial=job.start_step,
        samples_per_step=cfg.batch_size * ident.world_size,
    )
    last_ckpt_time = time.monotonic()
    try:
        for step in range(job.start_step, cfg.steps):
            if cfg.fault is not None and cfg.fault.fires(step, ident.rank, ident.attempt):
                log.event("fault", step=step, kind=cfg.fault.kind)
                in_flight = functools.partial(reduce_in_flight, job.groups.default, job.device)
                faults.inject(cfg.fault, step=step, in_flight=in_flight)
            elif cfg.fault is not None and cfg.fault.holds(step, ident.rank, ident.attempt):
                log.event("fault_hold", step=step, kind=cfg.fault.kind)
                wait_in_barrier(job.groups.checkpoint)  # the faulting rank never comes
            waited = time.time()
            with sess.data_wait():  # a data stall: cut out of training, charged to data
                if cfg.data_stall_every and step % cfg.data_stall_every == 0:
                    time.sleep(cfg.data_stall_s)  # a planted slow fetch (--data-stall-every)
                batch = job.data.batch(step).to(job.device, non_blocking=True)
            waited = time.time() - waited
            if waited >= ett.DATA_WAIT_MIN_S:  # the waits the library reports, in the step log
                log.event("data_wait", step=step, duration_s=round(waited, 6))
            if step == job.start_step:
                before = time.time()  # the span's instant lies between this and the event's
                sess.first_batch(step=step)
                log.event("first_batch", step=step, before=before)
            loss = float(job.model.train_step(batch))
            if cfg.step_delay_s:
                time.sleep(cfg.step_delay_s)
            sess.step(samples=cfg.batch_size)
            timed = {"backward_s": round(job.model.backward_s, 6)} if cfg.slow_rank >= 0 else {}
            log.event("step", step=step, loss=round(loss, 6), **timed)
            watchdog.beat()
            done = step + 1  # steps trained so far: the step number of a checkpoint taken now
            if cfg.eval_every and done % cfg.eval_every == 0:
                evaluate(job, done)
            if done < cfg.steps and checkpoint_due(job, done, last_ckpt_time):
                job.ckpt.save(done, job.model)
                last_ckpt_time = time.monotonic()
                watchdog.beat()
            bar.update(step, loss=loss, checkpoint=job.ckpt.last_committed)
        if cfg.final_ckpt and job.ckpt.last_saved != cfg.steps:
            job.ckpt.save(cfg.steps, job.model)
        with sess.shutdown(ShutdownStepValues.PERSIST_WAIT):
            job.ckpt.close()  # the attempt completes once its last checkpoint is committed
    finally:
        bar.close()


def run(cfg: TrainConfig) -> int:
    """One attempt on this rank: start up, train, end; returns the exit status."""
    model.quiet_library_warnings()
    if cfg.fresh_local_cache:
        use_fresh_local_cache()
    # on SIGTERM the library records the preemption, then raises ett.Preempted here
    sess = open_session(cfg)
    ident = Identity.of(sess.identity)
    cfg = cfg.with_job_id(sess.identity.job_id)
    log = StepLog(cfg.steplog_dir, rank=ident.rank, attempt=ident.attempt)
    log.event("start", pid=os.getpid(), world_size=ident.world_size, job_id=cfg.job_id)

    def on_hang(idle_s: float) -> None:
        cause = FailureCauseValues.UNKNOWN.value
        reason = EndReasonValues.FAILED.value
        log_failure(sess, log, cause, faults.WatchdogTimeout.__name__, reason)
        sess.failure(cause, error_type=faults.WatchdogTimeout.__name__)
        sess.end(reason=reason, cause=cause)

    watchdog = faults.Watchdog(cfg.watchdog_s, on_hang)
    job: Job | None = None
    try:
        job = start_up(cfg, ident, sess, log)
        train_loop(job, watchdog.start())
    except BaseException as exc:
        watchdog.stop()
        end_failed(exc, cfg, sess, log, job.groups if job is not None else None)
    watchdog.stop()
    with sess.shutdown(ShutdownStepValues.PG_TEARDOWN):
        teardown(sess, log, job.groups, False, cfg.failure_teardown)
    sess.end(reason=EndReasonValues.COMPLETED.value)
    log.event("end", step=cfg.steps, reason=EndReasonValues.COMPLETED.value)
    log.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ett train`` and ``python -m trainer.train``."""
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
