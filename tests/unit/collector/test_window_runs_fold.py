"""Heartbeat windows folded into runs give the figures of the raw windows, whatever the order.

Random jobs (hypothesis): ranks whose windows chain, break in time, break in steps or change an
attribute; start-up phases, saves, failures and restarts. The figures from the raw spans are
compared with the figures from the runs that storage keeps, folded in one go and in random
chunks (as compaction does, batch after batch), with windows shuffled and replayed.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from ett import semconv as sc
from ett_collector.domain import SpanRecord, summarize
from ett_collector.schemas import job_json
from ett_collector.storage._runs import WINDOW, fold, run_rows, runs_from_rows, with_runs
from tests.support.spans import attempt_end, first_batch, persist, phase, save, window

REASONS = [None, "completed", "failed", "preempted"]


def _order(spans: list[SpanRecord]) -> list[SpanRecord]:
    return sorted(spans, key=lambda s: (s.start, s.trace_id, s.span_id))


@st.composite
def rank_windows(draw, attempt: int, rank: int, t0: float, step0: int) -> list[SpanRecord]:
    """A rank's windows from ``t0``: mostly a chain, with gaps, step jumps and a changed
    attribute now and then."""
    out = []
    t, step = t0, step0
    host = "h0"
    for _ in range(draw(st.integers(0, 25))):
        brk = draw(st.sampled_from(["none"] * 8 + ["gap", "steps", "attr", "nosteps"]))
        if brk == "gap":
            t += draw(st.floats(0.01, 40))
        elif brk == "steps":
            step += draw(st.integers(1, 5))
        elif brk == "attr":
            host = draw(st.sampled_from(["h0", "h1"]))
        length = draw(st.floats(0.5, 12))
        n = draw(st.integers(1, 50))
        attrs = {sc.HOST_NAME: host, sc.MODEL: "m", sc.TEAM: "t", sc.WORLD_SIZE: 3}
        if brk != "nosteps":
            attrs |= {sc.STEP_FIRST: step, sc.STEP_LAST: step + n - 1, sc.SAMPLES: 8 * n}
        out.append(window(t, t + length, attempt=attempt, rank=rank, **attrs))
        t += length
        step += n
    return out


@st.composite
def jobs(draw) -> list[SpanRecord]:
    spans: list[SpanRecord] = []
    t0 = 1_000_000.0
    for attempt in range(draw(st.integers(1, 3))):
        ranks = draw(st.integers(1, 3))
        t_first = t0 + draw(st.floats(1, 30))
        ends = []
        for rank in range(ranks):
            ident = {sc.MODEL: "m", sc.TEAM: "t", sc.WORLD_SIZE: 3}
            spans.append(
                phase(
                    "pg_init", t0, t0 + draw(st.floats(0, 5)), attempt=attempt, rank=rank, **ident
                )
            )
            trained = draw(st.booleans()) or rank == 0
            if trained:
                spans.append(first_batch(t_first, attempt=attempt, rank=rank, **ident))
            ws = draw(rank_windows(attempt, rank, t_first, 100 * attempt)) if trained else []
            spans += ws
            end = max([t_first, *(w.end for w in ws)])
            if draw(st.booleans()):
                a = t_first + draw(st.floats(0, end - t_first + 1))
                spans.append(save(7, a, a + 1, attempt=attempt, rank=rank, **ident))
                spans.append(persist(7, a + 1, a + 3, attempt=attempt, rank=rank, **ident))
            reason = draw(st.sampled_from(REASONS))
            if reason is not None:
                spans.append(attempt_end(t0, end + 1, reason, attempt=attempt, rank=rank, **ident))
            ends.append(end)
        t0 = max(ends) + draw(st.floats(5, 60))
    return spans


def _figures(spans: list[SpanRecord], now: float) -> dict[str, object]:
    return dict(job_json(summarize(spans, now)))


@settings(max_examples=150, deadline=None)
@given(job=jobs(), seed=st.integers(0, 2**32 - 1), now_after=st.floats(0, 100))
def test_runs_give_the_figures_of_raw_windows(
    job: list[SpanRecord], seed: int, now_after: float
) -> None:
    rng = random.Random(seed)
    now = max(s.end for s in job) + now_after
    raw = _order(job)
    want = _figures(raw, now)

    windows = [s for s in job if s.name == WINDOW]
    others = [s for s in raw if s.name != WINDOW]
    at_once = with_runs(raw, [])
    assert _figures(at_once, now) == want

    # compaction batch after batch over the older windows, shuffled, with replays, through the
    # stored row format; the rest still raw (with replays of folded ones)
    rng.shuffle(windows)
    cut = rng.randint(0, len(windows))
    folded, pending = windows[:cut], windows[cut:]
    arriving = folded + rng.sample(folded, k=len(folded) // 3)
    rng.shuffle(arriving)
    stored: list[SpanRecord] = []
    i = 0
    while i < len(arriving):
        n = rng.randint(1, 10)
        chunk = {(w.trace_id, w.span_id): w for w in arriving[i : i + n]}  # raw rows dedupe ids
        runs, _ = fold(stored, chunk.values())
        stored = runs_from_rows([(*row,) for row in run_rows(runs)])
        i += n
    pending += rng.sample(folded, k=len(folded) // 4)
    loaded = with_runs(_order(others + pending), stored)
    assert _figures(loaded, now) == want
    everything = with_runs(_order(others), runs_from_rows(run_rows(fold(stored, pending)[0])))
    assert _figures(everything, now) == want

    # the same runs whatever the order: as folding everything at once
    assert sorted(
        (r.attempt, r.rank, r.start, r.end, r.count) for r in everything if r.name == WINDOW
    ) == sorted((r.attempt, r.rank, r.start, r.end, r.count) for r in at_once if r.name == WINDOW)
    assert sum(r.count for r in everything if r.name == WINDOW) == len(windows)


def test_a_chain_becomes_one_run_and_breaks_start_new_ones() -> None:
    ident = {sc.STEP_FIRST: 0, sc.STEP_LAST: 9, sc.SAMPLES: 80, sc.HOST_NAME: "h"}
    w = [window(0, 10, **ident)]
    for k in range(1, 5):
        w.append(
            window(
                10 * k, 10 * k + 10, **{**ident, sc.STEP_FIRST: 10 * k, sc.STEP_LAST: 10 * k + 9}
            )
        )
    gap = window(51, 60, **{**ident, sc.STEP_FIRST: 50, sc.STEP_LAST: 59})  # 1 s late: a gap
    jump = window(60, 70, **{**ident, sc.STEP_FIRST: 61, sc.STEP_LAST: 69})  # a skip: folded
    back = window(70, 80, **{**ident, sc.STEP_FIRST: 65, sc.STEP_LAST: 74})  # back: a new run
    other_rank = window(10, 20, rank=1, **{**ident, sc.STEP_FIRST: 10, sc.STEP_LAST: 19})
    runs, dropped = fold([], [*reversed(w), gap, jump, back, other_rank])
    assert dropped == 0
    got = sorted(
        (
            r.rank,
            r.start,
            r.end,
            r.count,
            r.attr(sc.STEP_FIRST),
            r.attr(sc.STEP_LAST),
            r.attr(sc.SAMPLES),
        )
        for r in runs
    )
    assert got == [
        (0, 0.0, 50.0, 5, 0, 49, 400),
        (0, 51.0, 70.0, 2, 50, 69, 160),
        (0, 70.0, 80.0, 1, 65, 74, 80),
        (1, 10.0, 20.0, 1, 10, 19, 80),
    ]
    # replays of folded windows are dropped; a window continuing the run extends it
    nxt = window(80, 90, **{**ident, sc.STEP_FIRST: 75, sc.STEP_LAST: 84})
    again, dropped = fold(runs, [w[2], w[0], nxt])
    assert dropped == 2
    assert sorted((r.rank, r.start, r.end, r.count) for r in again) == [
        (0, 0.0, 50.0, 5),
        (0, 51.0, 70.0, 2),
        (0, 70.0, 90.0, 2),
        (1, 10.0, 20.0, 1),
    ]
