"""The worked example's figures (docs/metrics.md, "Worked example"), as the read API spells them.

The spans are ``tests.support.worked_example.worked_example``; these are the numbers the spec
derives from them by hand, so every layer (domain, storage, API, CLI) is checked against one copy.
"""

from __future__ import annotations

from typing import Any

WORKED_EXAMPLE: dict[str, Any] = {
    "state": "completed",
    "wall_s": 500.0,
    "productive_s": 300.0,
    "idle_s": 70.0,
    "failure_s": 130.0,
    "ett_pct": 60.0,
    "idle_pct": 14.0,
    "failure_pct": 26.0,
    "tts_s": 50.0,
    "ttr_s": [100.0],
    "failures": 1,
    "failure_causes": {"killed": 1},
    "unsaved_s": 30.0,
    "checkpoint_blocking_s": 20.0,
}
"""Job figures of the worked example (section 4's last lines)."""

WORKED_EXAMPLE_LOST_BY_COMPONENT: dict[str, float] = {
    "scheduler": 60,
    "checkpoint": 40,
    "failure": 30,
    "other": 30,
    "model": 15,
    "compile": 15,
    "comms": 10,
}
"""Idle + failure seconds per component: start-ups, the recovery gap and the unsaved time."""

WORKED_EXAMPLE_STARTUP = (
    {"comms": 10, "model": 15, "compile": 15, "other": 10},
    {"checkpoint": 20, "other": 20},
)
"""Start-up seconds per component of attempt 0 (idle, TTS) and attempt 1 (failure)."""
