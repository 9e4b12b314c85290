"""One simulated job: its attempts (start-up, training, failure, restart) and its publish job."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ett import semconv as sc

from ._loop_spans import Loop
from ._pace import pace_of
from ._plan import AttemptPlan, Checkpoint, Draw, JobPlan
from ._startup import run_startup
from ._training import run_training
from .profile import Profile
from .regression import Regression
from .straggler import Straggler
from .wire import RankSpans

_REQUEUE_CAUSES = frozenset({"preemption", "hardware", "killed"})


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the fleet decided about a job before it runs."""

    job_id: str
    model: str
    team: str
    world_size: int
    arrival_ms: int
    seed: str
    live: bool = False
    window_s: float | None = None
    until_ms: int | None = None
    """The end of the history (unix ms): a job still running then is left out (None: a live
    job, which runs on in real time)."""


@dataclass(slots=True)
class SimJob:
    """A generated job: its spans (one :class:`RankSpans` per rank and attempt) and its plan."""

    plan: JobPlan
    ranks: list[RankSpans]

    @property
    def span_count(self) -> int:
        """How many spans the job sends."""
        return sum(len(r.spans) for r in self.ranks)


def _ranks(
    rng: random.Random, spec: JobSpec, job_id: str, attempt: int, world: int
) -> list[RankSpans]:
    trace_id = rng.getrandbits(128).to_bytes(16, "big")
    if trace_id == bytes(16):
        trace_id = b"\x01" * 16
    return [
        RankSpans(job_id, attempt, r, world, spec.model, spec.team, trace_id, rng.getrandbits(64))
        for r in range(world)
    ]


@dataclass(frozen=True, slots=True)
class _JobRun:
    """What every attempt of one job shares: its random draws, its pace and its schedule (how
    long it trains, how often it saves and evaluates, how its start-up is scaled)."""

    spec: JobSpec
    profile: Profile
    regressions: tuple[Regression, ...]
    stragglers: tuple[Straggler, ...]
    draw: Draw
    step_ms: int
    target_step: int
    ckpt_s: float
    eval_s: float
    startup_scale: float
    is_async: bool

    @property
    def max_restarts(self) -> int:
        """Restarts after which a failed job stays failed."""
        return int(self.profile["fleet.max_restarts"])

    def loop(self, number: int, start_step: int) -> Loop:
        """The loop of attempt ``number``, from ``start_step`` (the restored step) on."""
        spec, profile, step_ms = self.spec, self.profile, self.step_ms
        window_s = spec.window_s or profile["fleet.window_s"]
        return Loop(
            step_ms=step_ms,
            batch=profile.models[spec.model].batch_size,
            start_step=start_step,
            target_step=self.target_step,
            ckpt_ms=max(step_ms, round(self.ckpt_s * 1000)),
            eval_ms=round(self.eval_s * 1000),
            window_ms=max(1, round(window_s * 1000)),
            is_async=self.is_async,
            may_die_silently=number < self.max_restarts,
            pace=pace_of(
                step_ms,
                spec.model,
                spec.team,
                spec.world_size,
                self.regressions,
                self.stragglers,
                dict(profile.section("loop")),
                f"{spec.seed}/loop/{number}",
            ),
        )

    def attempt(
        self,
        plan: JobPlan,
        attempt: AttemptPlan,
        ranks: list[RankSpans],
        restored: Checkpoint | None,
    ) -> Checkpoint | None:
        """Plant ``attempt``'s start-up and, when it reaches its first batch, its training on
        ``ranks``, restoring ``restored``; the checkpoint the next attempt restores."""
        restored_step = restored.step if restored is not None else None
        if not run_startup(self.draw, ranks, attempt, restored_step, self.startup_scale):
            return restored
        newest = run_training(
            self.draw, ranks, attempt, self.loop(attempt.number, restored_step or 0)
        )
        if attempt.first is not None and attempt.progress is not None:
            plan.train_ms += _clean(attempt)
        if newest is None:
            return restored
        if attempt.failed:
            attempt.restored_snapshot = newest.snapshot
        return newest

    def next_alloc(self, failed: AttemptPlan) -> int:
        """When the restart after ``failed`` is allocated: its death plus the requeue delay (for
        a cause the scheduler requeues) or the restart delay, charged to the scheduler."""
        key = "requeue_delay" if failed.cause in _REQUEUE_CAUSES else "restart_delay"
        died = failed.end
        return died + self.draw.ms(
            self.profile[f"failures.{key}"], sc.ComponentValues.SCHEDULER.value, died
        )


def _job_run(
    spec: JobSpec,
    profile: Profile,
    regressions: tuple[Regression, ...],
    stragglers: tuple[Straggler, ...],
) -> _JobRun:
    """Draw what the attempts of ``spec``'s job share (a live job trains and saves as the
    profile's ``[live]`` table says; a history job trains for a drawn number of hours)."""
    rng = random.Random(spec.seed)
    draw = Draw(
        rng, profile, spec.model, spec.team, regressions, profile["fleet.rank_jitter_sigma"]
    )
    params = profile.models[spec.model]
    live = profile.section("live")
    step_ms = max(1, round(params.step_s * 1000))
    if spec.live:
        train_s = live["train_s"]
        ckpt_s, eval_s, scale = (
            live["checkpoint_interval_s"],
            live["eval_interval_s"],
            live["startup_scale"],
        )
    else:
        train_s = params.train_hours.sample(rng) * 3600
        ckpt_s, eval_s, scale = profile["checkpoint.interval_s"], profile["eval.interval_s"], 1.0
    target = max(1, round(train_s * 1000 / step_ms))
    is_async = rng.random() < profile["checkpoint.async_probability"]
    return _JobRun(
        spec,
        profile,
        regressions,
        stragglers,
        draw,
        step_ms,
        target,
        ckpt_s,
        eval_s,
        scale,
        is_async,
    )


def generate_job(
    spec: JobSpec,
    profile: Profile,
    regressions: tuple[Regression, ...],
    stragglers: tuple[Straggler, ...] = (),
) -> list[SimJob]:
    """The job of ``spec`` and, when it completed and the dice say so, its publish job (the
    ``stragglers`` and ``step`` regressions set the pace of its loop: ``_pace.py``). Attempts
    follow each other until one does not fail or ``fleet.max_restarts`` restarts failed too."""
    run = _job_run(spec, profile, regressions, stragglers)
    plan = JobPlan(spec.job_id, spec.model, spec.team, spec.world_size)
    ranks: list[RankSpans] = []
    restored: Checkpoint | None = None
    alloc = spec.arrival_ms
    for number in range(run.max_restarts + 1):
        attempt = AttemptPlan(number=number, alloc=alloc)
        plan.attempts.append(attempt)
        arank = _ranks(run.draw.rng, spec, spec.job_id, number, spec.world_size)
        ranks += arank
        restored = run.attempt(plan, attempt, arank, restored)
        if not attempt.failed or number == run.max_restarts:
            break
        alloc = run.next_alloc(attempt)
    jobs = [SimJob(plan, ranks)]
    done = plan.attempts[-1]
    if not done.failed and not spec.live and run.draw.rng.random() < profile["publish.probability"]:
        jobs.append(_publish(run.draw, spec, done, restored))
    return jobs


def _clean(attempt: AttemptPlan) -> int:
    assert attempt.first is not None and attempt.progress is not None
    cut = sum(
        max(0, min(e, attempt.progress) - max(s, attempt.first)) for s, e, _ in attempt.cutouts
    )
    return attempt.progress - attempt.first - cut


def _publish(draw: Draw, spec: JobSpec, done: AttemptPlan, ckpt: Checkpoint | None) -> SimJob:
    """A standalone publish job (one rank): imports, checkpoint load, publish; completed."""
    prof = draw.profile
    job_id = f"{spec.job_id}-publish"
    start = done.end + draw.ms(prof["publish.delay"], sc.ComponentValues.SCHEDULER.value, done.end)
    rank = _ranks(draw.rng, spec, job_id, 0, 1)[0]
    plan = JobPlan(job_id, spec.model, spec.team, 1, standalone=True)
    attempt = AttemptPlan(number=0, alloc=start, critical_rank=0)
    imports_phase = "imports"
    imp = start + draw.ms(prof["publish.imports"], sc.default_component(imports_phase), start)
    load = imp + draw.ms(prof["publish.load"], sc.ComponentValues.CHECKPOINT.value, imp)
    pub = load + draw.ms(prof["publish.duration"], sc.ComponentValues.PUBLISH.value, load)
    end = pub + draw.ms(prof["failures.exit"], sc.ComponentValues.OTHER.value, pub)
    step = ckpt.step if ckpt is not None else 0
    rank.add(sc.startup_span_name(imports_phase), start, imp)
    rank.add(sc.startup_span_name("checkpoint_load"), imp, load, ((sc.CHECKPOINT_STEP, step),))
    rank.add(sc.SPAN_PUBLISH, load, pub, ((sc.PUBLISH_STANDALONE, True),))
    rank.add(
        sc.SPAN_ATTEMPT, start, end, ((sc.ATTEMPT_END_REASON, sc.EndReasonValues.COMPLETED.value),)
    )
    attempt.startup = [
        (start, imp, sc.default_component(imports_phase)),
        (imp, load, sc.ComponentValues.CHECKPOINT.value),
        (load, pub, sc.ComponentValues.PUBLISH.value),
        (pub, end, sc.ComponentValues.OTHER.value),
    ]
    attempt.end = end
    attempt.end_reason = sc.EndReasonValues.COMPLETED.value
    plan.attempts.append(attempt)
    return SimJob(plan, [rank])
