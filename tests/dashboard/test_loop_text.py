"""What the Job page's "Inside the loop" section says (pure, no server): the ideal step's
basis, the straggler when ranks count different steps, and a caption for no slow window."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the dashboard extra: pip install -e '.[dashboard]'")
from streamlit.testing.v1 import AppTest

from ett_dashboard import _loop

NOTE = "attempt 0: rank 1 counts 2.00x the steps per second of rank 0, whose steps ..."


def test_the_ideal_steps_help_says_its_basis() -> None:
    """It said "windows under a ... data wait left out" whatever the basis; with no steady
    window they are the windows after warm-up, their stalls taken out."""
    perf = {"ideal_basis": "after_warmup", "ideal_points": 3}
    text = _loop.ideal_help(perf)
    assert "3 windows after warm-up" in text and "none was steady" in text
    assert "taken out" in text and "left out" not in text
    steady = _loop.ideal_help({"ideal_basis": "steady", "ideal_points": 12})
    assert "12 steady windows" in steady and "left out" in steady
    assert "warm-up included" in _loop.ideal_help({"ideal_basis": "all", "ideal_points": 1})
    differ = {"ideal_basis": "steady", "ideal_points": 2, "step_counts_differ": [{}]}
    assert "the rank counting fewest" in _loop.ideal_help(differ)


def test_ranks_counting_different_steps_are_not_compared() -> None:
    perf = {"straggler": None, "stragglers": [], "straggler_threshold": 1.2, "straggler_note": NOTE}
    value, sentence = _loop.straggler_text(perf)
    assert value == "not named"
    assert sentence == f"No straggler named: {NOTE}."
    plain = {"straggler": None, "stragglers": [], "straggler_threshold": 1.2}
    assert _loop.straggler_text(plain)[0] == "not measured"


def _no_slow_window() -> None:
    from ett_dashboard import _loop

    _loop._slow_windows({"slow_windows": [], "ideal_step_s": 0.05})


def _no_ideal() -> None:
    from ett_dashboard import _loop

    _loop._slow_windows({"slow_windows": [], "ideal_step_s": None})


def test_no_slow_window_speaks_of_windows_not_steps() -> None:
    """It said "every step ran within 1.25× the ideal step": a point is a window's mean step,
    and 30 steps at 3× inside windows went unseen (operator probe r1)."""
    at = AppTest.from_function(_no_slow_window).run()
    (caption,) = [c.value for c in at.caption]
    assert "every window's mean step ran within 1.25×" in caption
    assert "every step" not in caption and "averages its steps" in caption


def test_without_an_ideal_no_window_is_said_to_be_within_it() -> None:
    """A job with no ideal step (a pruned job's kept figures without steps, say) read "every
    window's mean step ran within 1.25× the ideal step" under an ideal shown as a dash."""
    at = AppTest.from_function(_no_ideal).run()
    (caption,) = [c.value for c in at.caption]
    assert caption == "No ideal step time, so no window is judged slow."
