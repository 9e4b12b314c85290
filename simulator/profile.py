"""The fleet profile: what the simulator draws from, read from TOML and checked key by key (the
checkers are in :mod:`ett_simulator._profile_keys`).

``default_profile.toml`` beside this module documents every key. A user's profile is merged over
it (tables merge, other values replace), so it needs only the keys it changes. Any unknown key
or value out of range raises :class:`ProfileError` naming the key and what is allowed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._profile_keys import (
    BARRIER_PHASES,
    CAUSES,
    COMPILE_PHASE,
    LOAD_PHASE,
    MODEL_KEYS,
    SCHEMA,
    Dist,
    Phase,
    ProfileError,
    check_names,
    check_table,
)

__all__ = [
    "BARRIER_PHASES",
    "CAUSES",
    "COMPILE_PHASE",
    "DEFAULT_PROFILE",
    "LOAD_PHASE",
    "Dist",
    "ModelParams",
    "Phase",
    "Profile",
    "ProfileError",
    "load_profile",
]

DEFAULT_PROFILE: Final = Path(__file__).with_name("default_profile.toml")
"""The documented default profile."""


@dataclass(frozen=True, slots=True)
class ModelParams:
    """Per-model parameters."""

    step_s: float
    batch_size: int
    train_hours: Dist


@dataclass(frozen=True, slots=True)
class Profile:
    """A checked profile. ``section(name)`` gives a table's checked values by key."""

    data: Mapping[str, Mapping[str, Any]]
    phases: tuple[Phase, ...]
    models: Mapping[str, ModelParams]
    teams: tuple[str, ...]

    def section(self, name: str) -> Mapping[str, Any]:
        """The checked values of table ``name``."""
        return self.data[name]

    def __getitem__(self, dotted: str) -> Any:
        """``profile["checkpoint.interval_s"]``."""
        table, _, key = dotted.partition(".")
        return self.data[table][key]


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``: tables merge key by key, other values replace."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "causes":
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ProfileError(f"cannot read profile {str(path)!r}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {str(path)!r} is not valid TOML: {exc}") from None


def load_profile(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    models: list[str] | None = None,
    teams: list[str] | None = None,
) -> Profile:
    """The default profile, with the file at ``path`` and then ``overrides`` (a dict shaped like
    the TOML) merged over it, and the model and team lists replaced when given.

    Raises :class:`ProfileError` naming the first bad key.
    """
    raw = _read(DEFAULT_PROFILE)
    if path is not None:
        raw = _merge(raw, _read(Path(path)))
    if overrides:
        raw = _merge(raw, overrides)
    unknown = sorted(set(raw) - set(SCHEMA) - {"models"})
    if unknown:
        raise ProfileError(
            f"unknown profile table [{unknown[0]}]: allowed tables are "
            + ", ".join(sorted([*SCHEMA, "models"]))
        )
    data = {name: check_table(name, raw.get(name, {}), schema) for name, schema in SCHEMA.items()}
    fleet = data["fleet"]
    if len(fleet["ranks"]) != len(fleet["rank_weights"]):
        raise ProfileError(
            "profile keys fleet.ranks and fleet.rank_weights must have the same length"
        )
    phase_names = {p.name for p in data["startup"]["phases"]}
    for name in data["startup"]["straggler_phases"]:
        if name not in phase_names or name == COMPILE_PHASE:
            raise ProfileError(
                f"profile key startup.straggler_phases: {name!r} is not a timed phase; allowed: "
                + ", ".join(sorted(phase_names - {COMPILE_PHASE}))
            )
    if data["checkpoint"]["interval_s"] < 1:
        raise ProfileError("profile key checkpoint.interval_s: must be at least 1 second")
    tables = raw.get("models", {})
    if not isinstance(tables, dict):
        raise ProfileError("profile key models: must be a table of [models.NAME] tables")
    names = list(models) if models else list(tables)
    if not names:
        raise ProfileError("the profile has no [models.NAME] table and no --models were given")
    check_names("--models", names)
    defaults = raw["model_defaults"]
    params: dict[str, ModelParams] = {}
    for name in names:
        checked = check_table(f"models.{name}", _merge(defaults, tables.get(name, {})), MODEL_KEYS)
        if checked["batch_size"] < 1:
            raise ProfileError(f"profile key models.{name}.batch_size: must be >= 1")
        params[name] = ModelParams(**checked)
    team_list = tuple(check_names("--teams", list(teams))) if teams else fleet["teams"]
    return Profile(data, data["startup"]["phases"], params, team_list)
