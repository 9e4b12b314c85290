"""The bounds of the per-process read cache (``collector/read/answers.py``)."""

from __future__ import annotations

from ett_collector.read.answers import JobAnswers
from ett_collector.storage._store import FiguresStamp


def _stamp(seq: int, computed_at: float = 1.0) -> FiguresStamp:
    return (False, None, seq, computed_at, 10, 2.0)


def test_an_answer_comes_back_only_at_the_stamp_it_was_kept_at() -> None:
    answers = JobAnswers(10)
    answers.put("a", _stamp(1), b"one")
    assert answers.get("a", _stamp(1)) == b"one"
    assert answers.get("a", _stamp(2)) is None  # saved again since: a newer sequence
    assert answers.get("a", _stamp(1, computed_at=1.5)) is None  # a clock-only refresh
    assert answers.get("a", (True, None, 1, 1.0, 10, 2.0)) is None  # dirty since
    assert answers.get("a", (False, "boom", 1, 1.0, 10, 2.0)) is None  # failed since
    assert answers.get("b", _stamp(1)) is None
    answers.put("a", _stamp(2), b"two")  # replaces
    assert answers.get("a", _stamp(2)) == b"two" and len(answers) == 1
    assert answers.held_bytes == 3
    assert (answers.hits, answers.misses) == (2, 5)


def test_the_least_recently_read_jobs_go_first_past_the_job_bound() -> None:
    answers = JobAnswers(3)
    for job in "abc":
        answers.put(job, _stamp(1), job.encode())
    assert answers.get("a", _stamp(1)) == b"a"  # a read: "b" is now the oldest
    answers.put("d", _stamp(1), b"d")
    assert len(answers) == 3
    assert answers.get("b", _stamp(1)) is None
    assert [answers.get(j, _stamp(1)) for j in "acd"] == [b"a", b"c", b"d"]


def test_answers_past_the_byte_bound_are_dropped_or_never_kept() -> None:
    answers = JobAnswers(1000, max_bytes=100)
    for i in range(10):
        answers.put(f"j{i}", _stamp(1), bytes(30))
    assert answers.held_bytes <= 100 and len(answers) == 3  # the three newest
    assert answers.get("j9", _stamp(1)) is not None and answers.get("j6", _stamp(1)) is None
    answers.put("big", _stamp(1), bytes(101))  # larger than the whole bound: not kept
    assert answers.get("big", _stamp(1)) is None and answers.held_bytes == 90
    assert JobAnswers(0).get("x", _stamp(1)) is None


def test_a_checked_stamp_is_trusted_for_the_interval_until_marked_unchecked() -> None:
    now = [100.0]
    answers = JobAnswers(10, clock=lambda: now[0])
    token = answers.token()
    answers.put("a", _stamp(1), b"one", checked=100.0, token=token)
    assert answers.trusted("a", 0.25) == (_stamp(1), b"one")
    now[0] = 100.25
    assert answers.trusted("a", 0.25) is None  # the interval passed: look it up again
    assert answers.get("a", _stamp(1), checked=100.25, token=answers.token()) == b"one"
    assert answers.trusted("a", 0.25) is not None  # checked anew
    answers.mark_unchecked(["a"])
    assert answers.trusted("a", 0.25) is None
    assert answers.trusted("a", 0.0) is None  # 0: never trusted


def test_a_mark_during_a_lookup_is_not_lost() -> None:
    """A read that took its token before a change was marked does not count as a check."""
    answers = JobAnswers(10, clock=lambda: 100.0)
    token = answers.token()
    answers.mark_unchecked(["a"])  # the change commits during the read's lookup
    answers.put("a", _stamp(1), b"one", checked=100.0, token=token)
    assert answers.trusted("a", 1.0) is None
    assert answers.get("a", _stamp(1), checked=100.0, token=token) == b"one"
    assert answers.trusted("a", 1.0) is None
    assert answers.get("a", _stamp(1), checked=100.0, token=answers.token()) == b"one"
    assert answers.trusted("a", 1.0) == (_stamp(1), b"one")
