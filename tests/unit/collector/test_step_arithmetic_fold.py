"""The fold of windows contiguous in time does not depend on how the emitter numbers steps: an
exclusive last step or a skip continues a run, a step going back or a missing counter breaks it,
and ``Run.break_reason`` says which."""

from __future__ import annotations

import itertools
import random

import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord, summarize
from ett_collector.schemas import job_json
from ett_collector.storage._runs import Run, fold
from tests.support.spans import first_batch, window

IDENT = {sc.HOST_NAME: "h", sc.MODEL: "m", sc.TEAM: "t", sc.WORLD_SIZE: 1}


def chain(firsts_lasts: list[tuple[int | None, int | None]]) -> list[SpanRecord]:
    out = []
    for i, (first, last) in enumerate(firsts_lasts):
        steps = {} if first is None else {sc.STEP_FIRST: first, sc.STEP_LAST: last, sc.SAMPLES: 8}
        out.append(window(10.0 * i, 10.0 * (i + 1), **IDENT, **steps))
    return out


@pytest.mark.parametrize(
    ("steps", "runs", "reason"),
    [
        ([(0, 9), (10, 19), (20, 29)], 1, None),  # the library: last + 1
        ([(0, 10), (10, 20), (20, 30)], 1, None),  # an exclusive last step
        ([(0, 9), (15, 19), (40, 49)], 1, None),  # skips
        ([(0, 9), (10, 19), (5, 14)], 2, "steps_back"),
        ([(0, 9), (None, None), (20, 29)], 3, "steps_missing"),
    ],
)
def test_contiguous_windows_fold_whatever_their_steps(
    steps: list[tuple[int | None, int | None]], runs: int, reason: str | None
) -> None:
    ws = chain(steps)
    folded, _ = fold([], random.Random(len(steps)).sample(ws, k=len(ws)))
    assert len(folded) == runs
    assert sum(r.count for r in folded) == len(ws)
    pieces = sorted(map(Run.of, ws), key=lambda r: r.start)
    reasons = {a.break_reason(b) for a, b in itertools.pairwise(pieces)}
    assert reason in reasons and reasons <= {None, reason}


def test_a_gap_in_time_is_no_unfolded_window() -> None:
    a, b = (Run.of(w) for w in chain([(0, 9), (10, 19)]))
    b.start += 5.0
    assert not a.continued_by(b) and a.break_reason(b) is None


def test_exclusive_and_library_steps_give_the_same_figures() -> None:
    rng = random.Random(5)
    lengths = [rng.randint(1, 40) for _ in range(200)]
    lib, exc, last = [], [], -1
    for n in lengths:
        lib.append((last + 1, last + n))
        exc.append((last + 1 - 1, last + n))  # first == the previous window's last
        last += n
    start = first_batch(0.0, **IDENT)
    figures = []
    for steps in (lib, exc):
        runs, _ = fold([], chain(steps))
        assert len(runs) == 1
        figures.append(dict(job_json(summarize([start, *runs], 2_100.0))))
    assert figures[0] == figures[1]
