"""Running a simulation: generate the fleet, encode it, hand it to a sink, write the truth.

The small Python API other parts' tests use:

- :func:`simulate_into_db` ``(db_url, jobs=, days=, seed=, start=, regress=[...]) -> list[Truth]``
  writes a fleet into a collector database (SQLite or PostgreSQL) through the collector's ingest
  path and recomputes its figures;
- :func:`simulate_to_endpoint` does the same through a running collector's ``POST /v1/traces``;
- :func:`simulate` is the general form (any :class:`~ett_simulator.sinks.Sink`, ``None`` for a dry
  run, live jobs, a truth file, a progress bar).

The history ends at ``start + days`` (by default: now). A training job that would still be
running then (with its restarts and its publish job) is left out whole, so no span ends later;
the returned truths (and the truth file) hold exactly the jobs that were sent, and
:attr:`SimulationResult.dropped` names those left out. ``--live`` jobs are not history.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypedDict, Unpack

from ett import semconv

from ._jobs import JobSpec, SimJob
from .fleet import FleetSpec, generate, job_specs
from .profile import load_profile
from .regression import Regression, parse_regression
from .sinks import DatabaseSink, EndpointSink, Sink
from .straggler import Straggler, parse_straggler
from .truth import Truth
from .truth_file import job_line, regression_line, straggler_line
from .wire import Encoder, RankSpans

DEFAULT_BATCH_SPANS = 2048
"""Spans per OTLP request."""


@dataclass
class SimulationResult:
    """What a run produced and delivered."""

    truths: list[Truth] = field(default_factory=list)
    """Every job that was sent (history, publish and live jobs), in the truth file's order."""
    dropped: list[str] = field(default_factory=list)
    """The training jobs left out of the history: they would still have been running at its
    end (their publish jobs, drawn or not, are left out with them)."""
    start: float = 0.0
    """The history's start (unix seconds)."""
    end: float = 0.0
    """The history's end (unix seconds): no span of the history ends later."""
    spans: int = 0
    accepted: int = 0
    requests: int = 0
    seconds: float = 0.0


class _Progress:
    def __init__(self, enabled: bool, total: int) -> None:
        self._bar: Any = None
        if enabled and total > 0:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[spans]:,} spans"),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("simulating jobs", total=total, spans=0)

    def update(self, jobs: int, spans: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=jobs, spans=spans)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _write_truth(out: TextIO | None, truth: Truth) -> None:
    if out is not None:
        out.write(job_line(truth))


def simulate(
    fleet: FleetSpec,
    sink: Sink | None,
    truth_path: str | Path | None = None,
    batch_spans: int = DEFAULT_BATCH_SPANS,
    progress: bool = False,
    on_body: Callable[[bytes], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> SimulationResult:
    """Generate ``fleet``; send it to ``sink`` (None: dry run); write the truth to ``truth_path``.

    History goes first, as fast as the sink takes it: the window ``fleet.window(clock())``, the
    jobs that would still be running at its end left out whole (``result.dropped``). Then
    ``fleet.live`` jobs start at the current time and each span is sent when its end time comes.
    The truth file (format: :mod:`ett_simulator.truth_file`) holds the planted regressions, then
    one line per job that was sent. ``on_body`` sees every encoded request body (the determinism
    test hashes them). ValueError for a window outside 1970-2500.
    """
    result = SimulationResult()
    started = time.perf_counter()
    encoder = Encoder()
    out: TextIO | None = None
    bar = _Progress(False, 0)
    try:
        now = clock()
        result.start, result.end = fleet.window(now)
        history = job_specs(dataclasses.replace(fleet, live=0), now=now)
        if truth_path is not None:
            out = open(truth_path, "w", encoding="utf-8")  # noqa: SIM115
            out.writelines(regression_line(r) for r in fleet.regressions)
            out.writelines(straggler_line(s) for s in fleet.stragglers)
        bar = _Progress(progress, len(history))

        def left_out(spec: JobSpec) -> None:
            result.dropped.append(spec.job_id)
            bar.update(1, result.spans)

        def ranks() -> Iterable[RankSpans]:
            for job, truth in generate(fleet, history, on_dropped=left_out):
                result.truths.append(truth)
                _write_truth(out, truth)
                result.spans += job.span_count
                bar.update(0 if job.plan.standalone else 1, result.spans)
                yield from job.ranks

        for body, n in encoder.requests(ranks(), batch_spans):
            _deliver(sink, body, n, result, on_body)
        if fleet.live:
            live = [s for s in job_specs(fleet, now=clock()) if s.live]
            _run_live(fleet, live, sink, encoder, result, out, on_body, clock)
    finally:
        bar.stop()
        if out is not None:
            out.close()
        if sink is not None:
            sink.close()
    result.seconds = time.perf_counter() - started
    return result


def _deliver(
    sink: Sink | None,
    body: bytes,
    n: int,
    result: SimulationResult,
    on_body: Callable[[bytes], None] | None,
) -> None:
    if on_body is not None:
        on_body(body)
    result.requests += 1
    if sink is not None:
        result.accepted += sink.send(body, n)


def _run_live(
    fleet: FleetSpec,
    specs: Sequence[JobSpec],
    sink: Sink | None,
    encoder: Encoder,
    result: SimulationResult,
    out: TextIO | None,
    on_body: Callable[[bytes], None] | None,
    clock: Callable[[], float],
) -> None:
    """Release each live job's spans at their end instants (real time)."""
    jobs: list[SimJob] = []
    for job, truth in generate(fleet, list(specs)):
        jobs.append(job)
        result.truths.append(truth)
        result.spans += job.span_count
    due: list[tuple[int, int, int]] = []  # end_ms, rank index, span index
    all_ranks = [r for job in jobs for r in job.ranks]
    for ri, rank in enumerate(all_ranks):
        due += [(span[2], ri, si) for si, span in enumerate(rank.spans)]
    due.sort()
    sent = [0] * len(all_ranks)
    i = 0
    while i < len(due):
        now_ms = clock() * 1000
        if due[i][0] > now_ms:
            time.sleep(min(1.0, (due[i][0] - now_ms) / 1000))
            continue
        batch: dict[int, RankSpans] = {}
        while i < len(due) and due[i][0] <= now_ms:
            _, ri, si = due[i]
            src = all_ranks[ri]
            part = batch.get(ri)
            if part is None:
                part = batch[ri] = RankSpans(
                    src.job_id,
                    src.attempt,
                    src.rank,
                    src.world_size,
                    src.model,
                    src.team,
                    src.trace_id,
                    src.span_base + sent[ri],
                )
            part.spans.append(src.spans[si])
            sent[ri] += 1
            i += 1
        for body, n in encoder.requests(batch.values(), DEFAULT_BATCH_SPANS):
            _deliver(sink, body, n, result, on_body)
    for truth in result.truths[len(result.truths) - len(jobs) :]:
        _write_truth(out, truth)


class FleetArgs(TypedDict, total=False):
    """The fleet a simulation generates: the keyword arguments of :func:`simulate_into_db` and
    :func:`simulate_to_endpoint`, with their defaults in :func:`fleet_spec`."""

    jobs: int
    """How many jobs (default 20)."""
    days: float
    """Over how many days (default 7): the history ends at ``start + days``, and a job that would
    still be running then is left out."""
    seed: int
    """The random seed; job ids are ``sim{seed}-{i:05d}`` (default 0)."""
    start: float | None
    """Unix seconds of the fleet's start (default: now - days, so that the history ends now)."""
    regress: Iterable[str | Regression]
    """``--regress`` strings or :class:`Regression` values (default none)."""
    stragglers: Iterable[str | Straggler]
    """``--straggler`` strings or :class:`Straggler` values (default none)."""
    profile: str | Path | None
    """A profile TOML (default: the built-in profile)."""
    models: list[str] | None
    """Only these model families (default: the profile's)."""
    teams: list[str] | None
    """Only these teams (default: the profile's)."""
    overrides: dict[str, Any] | None
    """A dict shaped like the profile TOML, merged over it."""
    live: int
    """Then run this many jobs in real time (default 0: none)."""
    live_window_s: float
    """The train window of the live jobs (default ``semconv.DEFAULT_WINDOW_S``)."""


def fleet_spec(**args: Unpack[FleetArgs]) -> FleetSpec:
    """The :class:`FleetSpec` for these arguments, with the defaults filled in."""
    prof = load_profile(
        args.get("profile"), args.get("overrides"), args.get("models"), args.get("teams")
    )
    regs = tuple(
        r if isinstance(r, Regression) else parse_regression(r) for r in args.get("regress", ())
    )
    return FleetSpec(
        prof,
        jobs=args.get("jobs", 20),
        days=args.get("days", 7.0),
        seed=args.get("seed", 0),
        start=args.get("start"),
        regressions=regs,
        live=args.get("live", 0),
        live_window_s=args.get("live_window_s", semconv.DEFAULT_WINDOW_S),
        stragglers=tuple(
            s if isinstance(s, Straggler) else parse_straggler(s)
            for s in args.get("stragglers", ())
        ),
    )


def simulate_into_db(db_url: str, **fleet: Unpack[FleetArgs]) -> list[Truth]:
    """Write a simulated fleet into the collector database at ``db_url`` (migrated first) and
    recompute its figures; returns the truth of each job written (not of those left out: they
    would still be running at the history's end). The fleet's arguments: :class:`FleetArgs`."""
    return simulate(fleet_spec(**fleet), DatabaseSink(db_url)).truths


def simulate_to_endpoint(
    endpoint: str, *, gzip: bool = False, token: str | None = None, **fleet: Unpack[FleetArgs]
) -> list[Truth]:
    """Send a simulated fleet to the collector at ``endpoint`` (``http://host:4318``) over
    OTLP/HTTP, gzipped if asked, with a bearer ``token`` if given; returns the truth of each job
    sent (as :func:`simulate_into_db`)."""
    sink = EndpointSink(endpoint, gzip_level=6 if gzip else None, token=token)
    return simulate(fleet_spec(**fleet), sink).truths
