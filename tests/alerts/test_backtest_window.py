"""A backtest's window and the walk before it: the replay starts the rules' reach before
``since`` (``_backtest.replay_from``, where the live evaluator's catch-up and its replay of late
history start too), lists what fired in the window, and what fired before it and still fired
at its start with its own firing time, and leaves out what fired and resolved before it.

The fleet is ``test_resolution``'s: its incident fires 20 h after the onset and resolves
2 h after the change ends."""

from __future__ import annotations

from test_resolution import DAY, HOUR, ONSET, STOP, UNTIL, fleet, rules

from ett_collector.alerts import replay
from ett_collector.alerts._backtest import replay_from
from ett_collector.alerts.rules import WINDOWS


def _spans(since: float) -> list[tuple[float, float | None, bool]]:
    out = replay(fleet(1), rules(), since, UNTIL, warm_from=replay_from(since))
    return [
        (f.fired_at - ONSET, f.resolved_at and f.resolved_at - ONSET, f.before_window) for f in out
    ]


def test_the_walk_before_the_window_lists_what_still_fired_at_its_start() -> None:
    assert replay_from(ONSET) == ONSET - max(WINDOWS.values())
    whole = _spans(ONSET - DAY)
    assert whole == [(20 * HOUR, STOP + 2 * HOUR - ONSET, False)]
    # begun mid-incident: the same firing, marked; without the walk it fired at the window's
    # start (or later, against a baseline that held the change)
    assert _spans(ONSET + 40 * HOUR) == [(20 * HOUR, STOP + 2 * HOUR - ONSET, True)]
    # begun after it resolved: nothing to list
    assert _spans(STOP + 3 * HOUR) == []
