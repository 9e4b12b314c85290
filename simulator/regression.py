"""Planted regressions: one component of one model (or team) costs K times more from an instant.

``--regress "model=M component=C factor=K at=ISO"`` (or ``team=T`` instead of ``model=M``).
From ``at`` on, every duration charged to ``C`` that *starts* at or after ``at``, in a job of that
model (or team), is drawn as usual and multiplied by ``K``:

- ``scheduler``: the ``scheduling`` start-up phase and the delay before a restart's allocation;
- ``comms``, ``model``, ``sharding``, ``data``, ``other``...: the start-up phases that
  ``instrument/semconv.py`` charges to that component (``pg_init``, ``model_init``, ...);
  ``other`` also stretches the exit after a failure and the first step;
- ``checkpoint``: save blocking, persist and ``checkpoint_load``;
- ``compile``: start-up compiles and recompiles; ``eval``: evals; ``publish``: the publish job;
- ``failure``: the failure rate (failures per training hour times K);
- ``step``: the step time of every rank (a slow model: K times fewer steps, and samples, per
  second of training; a job's steps take K times longer, so it trains longer); not a component
  of docs/metrics.md, and it stretches no span (``_pace.py``).

Several regressions multiply. ``factor`` is > 0 (below 1 is an improvement).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ett import semconv as sc

from ._flag_words import number, read_words, require_words
from .profile import Profile, ProfileError

COMPONENTS = (*(c.value for c in sc.ComponentValues), "step")
"""Components a regression may name: docs/metrics.md's, and ``step``, the step time itself."""

_KEYS = ("model", "team", "component", "factor", "at")
FORMAT = '"model=M component=C factor=K at=ISO" (or team=T instead of model=M)'


@dataclass(frozen=True, slots=True)
class Regression:
    """From ``at`` (unix seconds), ``component`` of ``model`` (or ``team``) costs ``factor``×."""

    component: str
    factor: float
    at: float
    model: str | None = None
    team: str | None = None

    def applies(self, model: str, team: str, component: str, instant: float) -> bool:
        """True when a duration of ``component`` starting at ``instant`` in a job of
        ``model``/``team`` is stretched by this regression."""
        if component != self.component or instant < self.at:
            return False
        return self.model == model if self.model is not None else self.team == team


def parse_instant(text: str, what: str) -> float:
    """ISO 8601 (``Z`` or an offset; naive means UTC) to unix seconds."""
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ProfileError(
            f"{what}: cannot read time {text!r}; write ISO 8601 such as 2026-11-01T08:00:00Z"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def format_instant(at: float) -> str:
    """Unix seconds as ISO 8601 in UTC with ``Z`` (``2026-11-30T18:00:00Z``; fractions of a
    second only when there are some): the inverse of :func:`parse_instant`."""
    dt = datetime.fromtimestamp(at, UTC)
    spec = "seconds" if dt.microsecond == 0 else "microseconds"
    return dt.isoformat(timespec=spec).replace("+00:00", "Z")


def parse_regression(text: str) -> Regression:
    """One ``--regress`` value, e.g. ``model=dlrm-large component=checkpoint factor=3
    at=2026-11-20T00:00:00Z``. Raises :class:`ProfileError` saying how to write it."""
    fields = read_words("--regress", text, _KEYS, FORMAT)
    if ("model" in fields) == ("team" in fields):
        raise ProfileError(f"--regress {text!r}: give exactly one of model= or team=; {FORMAT}")
    require_words("--regress", text, fields, ("component", "factor", "at"), FORMAT)
    component = fields["component"]
    if component not in COMPONENTS:
        raise ProfileError(
            f"--regress {text!r}: unknown component {component!r}; allowed: {', '.join(COMPONENTS)}"
        )
    factor = number(fields["factor"])
    if not factor > 0 or factor == float("inf"):
        raise ProfileError(
            f"--regress {text!r}: factor must be a number > 0, got {fields['factor']!r}"
        )
    return Regression(
        component=component,
        factor=factor,
        at=parse_instant(fields["at"], f"--regress {text!r}"),
        model=fields.get("model"),
        team=fields.get("team"),
    )


def check_regressions(regressions: Iterable[Regression], profile: Profile) -> None:
    """Every regression names a model (or team) of the profile; ProfileError otherwise."""
    for r in regressions:
        if r.model is not None and r.model not in profile.models:
            raise ProfileError(
                f"--regress names model {r.model!r}, which the profile lacks; allowed: "
                + ", ".join(profile.models)
            )
        if r.team is not None and r.team not in profile.teams:
            raise ProfileError(
                f"--regress names team {r.team!r}, which the profile lacks; allowed: "
                + ", ".join(profile.teams)
            )


def stretch(
    regressions: Iterable[Regression], model: str, team: str, component: str, instant: float
) -> float:
    """The product of the factors of the regressions that apply (1.0 when none does)."""
    factor = 1.0
    for r in regressions:
        if r.applies(model, team, component, instant):
            factor *= r.factor
    return factor
