"""Planted stragglers: one rank of every job of a model computes ``factor`` times longer per step
from an instant on.

``--straggler "model=M rank=R factor=F at=ISO"``. From ``at`` on, in every job of model ``M`` with
more than ``R`` ranks, rank ``R``'s compute per step (the part of a step outside the gradient
collectives' wait) is ``F`` times its usual; the other ranks wait for it in their collectives, so
every rank's wall step time is the same, ``step * (1 + share * (F - 1))`` (``share``: the profile's
``loop.compute_share``), and the straggler's compute per step over the others' median is ``F``
(give or take ``loop.compute_sigma``). Windows carry the waits as ``ett.window.wait_s``
(:mod:`ett_simulator._pace`). ``factor`` is >= 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from ._flag_words import number, read_words, require_words
from .profile import Profile, ProfileError
from .regression import format_instant, parse_instant

STRAGGLER_RECORD: Final = "straggler"
"""The ``"record"`` value of a planted straggler's line in a truth file."""

_KEYS: Final = ("model", "rank", "factor", "at")
FORMAT: Final = '"model=M rank=R factor=F at=ISO"'


@dataclass(frozen=True, slots=True)
class Straggler:
    """From ``at`` (unix seconds), rank ``rank`` of every job of ``model`` computes ``factor``x."""

    model: str
    rank: int
    factor: float
    at: float

    def applies(self, model: str, world_size: int) -> bool:
        """True when a job of ``model`` with ``world_size`` ranks has this straggler."""
        return model == self.model and self.rank < world_size


def parse_straggler(text: str) -> Straggler:
    """One ``--straggler`` value; :class:`ProfileError` saying how to write it."""
    fields = read_words("--straggler", text, _KEYS, FORMAT)
    require_words("--straggler", text, fields, _KEYS, FORMAT)
    try:
        rank = int(fields["rank"])
    except ValueError:
        rank = -1
    if rank < 0:
        raise ProfileError(
            f"--straggler {text!r}: rank must be an integer >= 0, got {fields['rank']!r}"
        )
    factor = number(fields["factor"])
    if not 1.0 <= factor < float("inf"):
        raise ProfileError(
            f"--straggler {text!r}: factor must be a number >= 1, got {fields['factor']!r}"
        )
    at = parse_instant(fields["at"], f"--straggler {text!r}")
    return Straggler(fields["model"], rank, factor, at)


def check_stragglers(stragglers: Iterable[Straggler], profile: Profile) -> None:
    """Every straggler names a model of the profile; ProfileError otherwise."""
    for s in stragglers:
        if s.model not in profile.models:
            raise ProfileError(
                f"--straggler names model {s.model!r}, which the profile lacks; allowed: "
                + ", ".join(profile.models)
            )


def straggler_record(s: Straggler) -> dict[str, Any]:
    """The truth file's JSON object of one planted straggler (keys in this order)."""
    return {
        "record": STRAGGLER_RECORD,
        "model": s.model,
        "rank": s.rank,
        "factor": float(s.factor),
        "at": float(s.at),
        "at_iso": format_instant(s.at),
    }
