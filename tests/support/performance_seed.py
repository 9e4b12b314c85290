"""Spans of jobs with known performance figures (issue 26): for the per-model read, the
``ett_model_*`` gauges and the dashboard pages.

:func:`perf_job`: ``ranks`` ranks, ``windows`` windows of 10 s and 100 steps of 32 samples per
rank (ideal step 0.1 s), of which the last ``slow`` windows make only 50 steps (0.2 s a step:
each loses 10 - 50 x 0.1 = 5 s). With ``straggler``, rank 1 computes 0.08 s a step and the
others 0.04 s (they wait the rest): rank 1 scores 2.0.
"""

from __future__ import annotations

from typing import Any

from ett import semconv as sc
from ett_collector.domain.model import SpanRecord
from tests.support.spans import attempt_end, first_batch, window

SAMPLES_PER_STEP = 32
SLOW_LOSS_S = 5.0
"""Seconds each slow window loses (on every rank)."""


def perf_job(
    job: str,
    model: str,
    t0: float,
    windows: int = 30,
    slow: int = 0,
    ranks: int = 2,
    straggler: bool = True,
) -> list[SpanRecord]:
    """The job's spans (see the module docstring)."""
    ident: dict[str, Any] = {"job": job, sc.MODEL: model, sc.TEAM: "perf"}
    out: list[SpanRecord] = []
    for rank in range(ranks):
        out.append(first_batch(t0, rank=rank, **ident))
        step = 0
        for i in range(windows):
            steps = 50 if i >= windows - slow else 100
            compute = 0.08 if straggler and rank == 1 else 0.04
            attrs = {
                sc.STEP_FIRST: step,
                sc.STEP_LAST: step + steps - 1,
                sc.SAMPLES: SAMPLES_PER_STEP * steps,
                sc.WINDOW_WAIT_S: 10.0 - steps * compute,
            }
            step += steps
            out.append(window(t0 + 10 * i, t0 + 10 * i + 10, rank=rank, **ident, **attrs))
        end = t0 + 10 * windows + 1
        out.append(attempt_end(t0 - 5, end, "completed", rank=rank, **ident))
    return out
