"""Window boundaries from polled step counters (a fake clock: times in nanoseconds)."""

from __future__ import annotations

from ett._windows import WindowClock, poll_interval

S = 1_000_000_000


class Loop:
    """Counters a test advances by hand, and the windows emitted."""

    def __init__(self) -> None:
        self.steps = 0
        self.samples = 0
        self.windows: list[tuple[int, int, int, int, int]] = []

    def counters(self) -> tuple[int, int]:
        return self.steps, self.samples

    def sink(self, *window: int) -> None:
        self.windows.append(window)  # type: ignore[arg-type]

    def run(self, n: int, samples: int = 2) -> None:
        self.steps += n
        self.samples += n * samples


def make(window_s: float = 10.0) -> tuple[Loop, WindowClock]:
    loop = Loop()
    return loop, WindowClock(loop.counters, loop.sink, window_s)


def test_nothing_before_training_starts() -> None:
    loop, clock = make()
    loop.run(5)
    clock.tick(100 * S)
    clock.flush(200 * S)
    assert loop.windows == []


def test_one_window_per_period_ending_at_last_progress() -> None:
    loop, clock = make()
    clock.start(0, resume_step=50)
    loop.run(3)
    clock.tick(1 * S)  # progress seen at 1 s
    clock.tick(2 * S)  # no progress
    clock.tick(10 * S)  # period over: window [0, 1 s]
    assert loop.windows == [(0, 1 * S, 50, 52, 6)]
    loop.run(2)
    clock.tick(11 * S)
    clock.tick(20 * S)
    assert loop.windows[-1] == (1 * S, 11 * S, 53, 54, 4)


def test_no_window_while_stalled() -> None:
    loop, clock = make()
    clock.start(0, resume_step=0)
    loop.run(1)
    clock.tick(1 * S)
    clock.tick(10 * S)
    for t in range(11, 60):
        clock.tick(t * S)  # a hang: no steps, no windows
    assert len(loop.windows) == 1
    clock.flush(70 * S)
    assert len(loop.windows) == 1  # nothing new to report at exit either


def test_flush_reports_unseen_progress_up_to_now() -> None:
    loop, clock = make()
    clock.start(0, resume_step=0)
    loop.run(4)
    clock.flush(3 * S)
    assert loop.windows == [(0, 3 * S, 0, 3, 8)]


def test_start_is_idempotent() -> None:
    _loop, clock = make()
    clock.start(0, resume_step=10)
    clock.start(5 * S, resume_step=99)
    assert clock.resume_step == 10


def test_poll_interval_bounds() -> None:
    assert poll_interval(10.0) == 1.0
    assert poll_interval(60.0) == 1.0
    assert poll_interval(1.0) == 0.1
    assert poll_interval(0.01) == 0.01
