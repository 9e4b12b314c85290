"""How good the firings of a backtest are, against the regressions a simulator planted.

A firing **names** a planted regression when its group label (model or team) and its
``component`` label are the regression's and it fired at or after the regression's onset.
Every regression firing that names none is a false firing. Per planted regression: whether it
was found, the delay from its onset to the first firing that names it, and the share of the
group's lost time its component held in the week before the onset (a component too small to
matter is one the rules are meant not to see).

- precision: firings that a planted regression explains (names it; or, for a planted
  straggler, a throughput regression of its model after its onset) / regression firings;
- recall: planted regressions named at least once / planted regressions (those whose onset
  lies inside the backtest, with at least ``min_after_s`` of history after it);
- false firings per day: false firings / days backtested;
- by rule: each scored rule's firings, true and false (the pooled figures above mix every
  regression-reporting rule of the file: the regression kind, threshold kinds such as
  ``ett_regression``, throughput and straggler rules).

The firings are those a backtest lists: those that fired in the window and those that fired
before it (found by the walk before it) and still fired at its start, each scored alike. A plant
whose onset lies before the window is not scored; its delay, to a firing that names it, is
still measured from its onset.

Inside the loop (issue 26): a slow model (``--regress ... component=step``) is a regression whose
component is ``step``, named by the ``throughput_regression`` kind's alerts (component
``step``); a planted straggler (a line ``{"record": "straggler", ...}``) is planted as component
``straggler`` of its model, named by the ``straggler`` kind's alerts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._backtest import Firing
from ._fleet import JobFacts
from .rules import COMPONENTS

DAY = 86400.0
STRAGGLER = "straggler"
"""The record kind, and the component, of a planted straggler."""
STEP = "step"
"""The component of a slow model (a planted step regression) and of throughput alerts."""


@dataclass(frozen=True)
class Planted:
    """One planted regression (a line ``{"record": "regression", ...}`` of a truth file).

    The fields of the simulator's ``Regression``, kept apart: the collector reads the truth
    file and does not import the simulator (tests/unit/test_import_layers.py)."""

    component: str
    factor: float
    at: float
    model: str | None = None
    team: str | None = None

    @property
    def group(self) -> tuple[str, str]:
        """``(label, value)``: ``("model", M)`` or ``("team", T)``."""
        return ("model", self.model) if self.model is not None else ("team", self.team or "")

    @property
    def regression(self) -> bool:
        """Whether it makes its component slower (``factor`` above 1). A plant of a factor of 1
        or less (the end of an earlier one, or an improvement) is nothing for a regression rule
        to find: scored as one, it read as a miss (a probe's fleet: recall 0.50 for 2 of 2)."""
        return self.factor > 1

    def named_by(self, firing: Firing) -> bool:
        """Whether ``firing`` names this regression."""
        label, value = self.group
        return (
            self.regression
            and firing.labels.get(label) == value
            and firing.labels.get("component") == self.component
            and firing.fired_at >= self.at
        )

    def explains(self, firing: Firing) -> bool:
        """Whether ``firing`` is a true consequence of this plant: it names it, or the plant
        is a straggler and the firing a throughput regression (component ``step``) of its
        model after its onset (the other ranks wait for a straggler: every step is slower)."""
        if self.named_by(firing):
            return True
        label, value = self.group
        return (
            self.component == STRAGGLER
            and firing.labels.get(label) == value
            and firing.labels.get("component") == STEP
            and firing.fired_at >= self.at
        )


def planted_from(records: Iterable[Mapping[str, Any]]) -> list[Planted]:
    """The planted regressions and stragglers among truth-file records (a straggler is planted
    as component ``straggler`` of its model; a job's line, with its ``job_id`` and no
    ``record``, is skipped).

    Raises:
        ValueError: for a record of another kind, a line that is neither a record nor a job,
            and a record whose component, factor, onset or group is missing or wrong (the
            field named).
    """
    out = []
    for r in records:
        kind = r.get("record")
        if kind is None:
            if "job_id" not in r:
                raise ValueError(
                    "neither a planted record (a 'record' field) nor a job (a 'job_id' field)"
                )
            continue
        if kind == STRAGGLER:
            out.append(_straggler(r))
        elif kind == "regression":
            out.append(_regression(r))
        else:
            raise ValueError(f"'record' must be regression or straggler, got {kind!r}")
    return out


PLANTABLE = (*COMPONENTS, STEP)
"""The components a regression record may name: the ETT components and the loop's step."""


def _number(r: Mapping[str, Any], name: str, kind: str) -> float:
    """Field ``name`` of a ``kind`` record as a finite number (``factor`` above 0)."""
    value = r.get(name)
    if value is None:
        raise ValueError(f"a {kind} record needs {name!r}")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        what = "epoch seconds" if name == "at" else "a number"
        raise ValueError(f"field {name!r} of a {kind} record must be {what}, got {value!r}")
    if name == "factor" and value <= 0:
        raise ValueError(f"field 'factor' of a {kind} record must be above 0, got {value!r}")
    return float(value)


def _regression(r: Mapping[str, Any]) -> Planted:
    component = r.get("component")
    if component not in PLANTABLE:
        raise ValueError(
            f"field 'component' of a regression record must be one of {', '.join(PLANTABLE)}; "
            f"got {component!r}"
        )
    model, team = r.get("model"), r.get("team")
    if not isinstance(model, str) and not isinstance(team, str):
        raise ValueError("a regression record needs a 'model' or a 'team' (a string)")
    return Planted(
        component=str(component),
        factor=_number(r, "factor", "regression"),
        at=_number(r, "at", "regression"),
        model=model if isinstance(model, str) else None,
        team=team if isinstance(team, str) else None,
    )


def _straggler(r: Mapping[str, Any]) -> Planted:
    model = r.get("model")
    if not isinstance(model, str):
        raise ValueError(f"a straggler record needs a 'model' (a string), got {model!r}")
    return Planted(
        STRAGGLER, _number(r, "factor", "straggler"), _number(r, "at", "straggler"), model=model
    )


@dataclass(frozen=True)
class Detection:
    """What became of one planted regression."""

    planted: Planted
    found: bool
    delay_s: float | None
    share_pct: float | None
    """The component's share of the group's lost time in the 7 days before the onset."""
    scored: bool
    """False when the onset is outside the backtest (or too close to its end to judge)."""


@dataclass(frozen=True)
class RuleScore:
    """The firings of one rule, and how many a planted regression explains."""

    rule: str
    firings: int
    true_firings: int

    @property
    def false_firings(self) -> int:
        return self.firings - self.true_firings

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "firings": self.firings,
            "true_firings": self.true_firings,
            "false_firings": self.false_firings,
        }


@dataclass(frozen=True)
class Quality:
    """The score of one backtest against its planted regressions."""

    firings: int
    true_firings: int
    false_firings: int
    days: float
    detections: tuple[Detection, ...]
    by_rule: tuple[RuleScore, ...] = ()
    """The same firings counted per rule, by rule name."""

    @property
    def precision(self) -> float | None:
        """True firings / firings (None without firings)."""
        return self.true_firings / self.firings if self.firings else None

    @property
    def recall(self) -> float | None:
        """Planted regressions found / scored ones (None without any)."""
        scored = [d for d in self.detections if d.scored]
        return sum(d.found for d in scored) / len(scored) if scored else None

    @property
    def false_per_day(self) -> float:
        return self.false_firings / self.days if self.days > 0 else 0.0

    def delays_s(self) -> list[float]:
        """Detection delays of the scored regressions that were found."""
        return [d.delay_s for d in self.detections if d.scored and d.delay_s is not None]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``ett alerts backtest --truth FILE --json`` (``quality``)."""
        return {
            "firings": self.firings,
            "true_firings": self.true_firings,
            "false_firings": self.false_firings,
            "days": self.days,
            "precision": self.precision,
            "recall": self.recall,
            "false_firings_per_day": self.false_per_day,
            "planted": [
                {
                    "model": d.planted.model,
                    "team": d.planted.team,
                    "component": d.planted.component,
                    "factor": d.planted.factor,
                    "at": d.planted.at,
                    "found": d.found,
                    "delay_s": d.delay_s,
                    "share_pct": d.share_pct,
                    "scored": d.scored,
                }
                for d in self.detections
            ],
            "by_rule": [r.to_dict() for r in self.by_rule],
        }


def share_before(jobs: Sequence[JobFacts], p: Planted) -> float | None:
    """The planted component's % of its group's lost seconds in the 7 days before the onset
    (None for the loop's plants, ``step`` and ``straggler``: no ETT component holds them)."""
    if p.component in (STEP, STRAGGLER):
        return None
    label, value = p.group
    lost = comp = 0.0
    for j in jobs:
        if (j.model if label == "model" else j.team) != value or not p.at - 7 * DAY < j.end <= p.at:
            continue
        lost += sum(j.lost.values())
        comp += j.lost.get(p.component, 0.0)
    return 100.0 * comp / lost if lost > 0 else None


def score(
    firings: Sequence[Firing],
    planted: Sequence[Planted],
    since: float,
    until: float,
    jobs: Sequence[JobFacts] = (),
    min_after_s: float = DAY,
) -> Quality:
    """Score regression ``firings`` of a backtest over ``[since, until]`` against ``planted``."""
    true = [f for f in firings if any(p.explains(f) for p in planted)]
    by_rule = tuple(
        RuleScore(
            rule=name,
            firings=sum(f.rule == name for f in firings),
            true_firings=sum(f.rule == name for f in true),
        )
        for name in sorted({f.rule for f in firings})
    )
    detections = []
    for p in planted:
        first = min((f.fired_at for f in firings if p.named_by(f)), default=math.nan)
        found = not math.isnan(first)
        detections.append(
            Detection(
                planted=p,
                found=found,
                delay_s=first - p.at if found else None,
                share_pct=share_before(jobs, p) if jobs else None,
                scored=p.regression and since <= p.at <= until - min_after_s,
            )
        )
    return Quality(
        firings=len(firings),
        true_firings=len(true),
        false_firings=len(firings) - len(true),
        days=(until - since) / DAY,
        detections=tuple(detections),
        by_rule=by_rule,
    )
