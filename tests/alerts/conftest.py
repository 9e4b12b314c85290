"""Fixtures of the alert tests: the fleet builder on the import path, and rules files."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DATA_RULES = """\
include_defaults: {defaults}
rules:
  - name: data_regression
    kind: component_regression
    by: model
    window: 1h
    baseline: 24h
    increase_pct: 100
    min_increase: 120
    min_jobs: 1
    min_baseline_jobs: 5
    for: {for_}
"""
"""A component rule tuned to this fleet (one job per model every half hour): the first regressed job
to end is enough to fire it."""


def data_rules(defaults: bool = False, for_: str = "0s") -> str:
    """The text of :data:`DATA_RULES`."""
    return DATA_RULES.format(defaults="true" if defaults else "false", for_=for_)
