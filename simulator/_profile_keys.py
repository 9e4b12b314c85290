"""The profile's words and its checkers: :class:`ProfileError`, the records a profile's values
become (:class:`Dist`, :class:`Phase`), and one checker per key (:data:`SCHEMA`, by table), each
returning the checked value or raising :class:`ProfileError` naming the key and what is allowed.
``ett_simulator.profile`` reads a profile with them (and re-exports these names)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

CAUSES: Final = ("exception", "oom", "nccl_timeout", "hardware", "preemption", "killed", "hang")
"""Failure kinds the simulator plants (``hang`` ends by the watchdog with cause ``unknown``;
``killed`` sends nothing more, so the collector infers the cause)."""

BARRIER_PHASES: Final = frozenset({"rendezvous", "pg_init"})
"""Start-up phases no rank leaves before every rank has entered (docs/metrics.md, "Words")."""

COMPILE_PHASE: Final = "compile"
LOAD_PHASE: Final = "checkpoint_load"


class ProfileError(ValueError):
    """A profile key that is unknown or out of range (the message names it)."""


@dataclass(frozen=True, slots=True)
class Dist:
    """A log-normal duration (or factor): ``median * exp(sigma * N(0, 1))``."""

    median: float
    sigma: float

    @property
    def mean(self) -> float:
        """The mean, ``median * exp(sigma^2 / 2)``."""
        return self.median * math.exp(self.sigma**2 / 2)

    def sample(self, rng: random.Random) -> float:
        """One draw."""
        if self.sigma == 0:
            return self.median
        return self.median * math.exp(self.sigma * rng.gauss(0.0, 1.0))


@dataclass(frozen=True, slots=True)
class Phase:
    """One start-up phase; ``dist`` is None for ``compile`` (timed by the compile table)."""

    name: str
    dist: Dist | None

    @property
    def barrier(self) -> bool:
        """True for a barrier phase."""
        return self.name in BARRIER_PHASES


# --- checkers: each returns the checked value or raises ProfileError naming the key ------------

Checker = Callable[[str, Any], Any]


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ProfileError(f"profile key {key}: must be a number, got {value!r}")
    return float(value)


def _non_negative(key: str, value: Any) -> float:
    v = _number(key, value)
    if v < 0:
        raise ProfileError(f"profile key {key}: must be >= 0, got {value!r}")
    return v


def _positive(key: str, value: Any) -> float:
    v = _number(key, value)
    if v <= 0:
        raise ProfileError(f"profile key {key}: must be > 0, got {value!r}")
    return v


def _probability(key: str, value: Any) -> float:
    v = _number(key, value)
    if not 0 <= v <= 1:
        raise ProfileError(f"profile key {key}: must be a probability in [0, 1], got {value!r}")
    return v


def _count(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProfileError(f"profile key {key}: must be a whole number >= 0, got {value!r}")
    return value


def _flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ProfileError(f"profile key {key}: must be true or false, got {value!r}")
    return value


def check_names(key: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of distinct names without commas, as a tuple."""
    if not isinstance(value, list) or not value:
        raise ProfileError(f"profile key {key}: must be a non-empty list of names, got {value!r}")
    for v in value:
        if not isinstance(v, str) or not v.strip() or "," in v:
            raise ProfileError(f"profile key {key}: names must be non-empty, without commas")
    if len(set(value)) != len(value):
        raise ProfileError(f"profile key {key}: names must be distinct, got {value!r}")
    return tuple(value)


def _weights(key: str, value: Any) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise ProfileError(f"profile key {key}: must be a non-empty list of weights >= 0")
    out = tuple(_non_negative(f"{key}[{i}]", v) for i, v in enumerate(value))
    if sum(out) <= 0:
        raise ProfileError(f"profile key {key}: at least one weight must be > 0")
    return out


def _world_sizes(key: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ProfileError(f"profile key {key}: must be a non-empty list of world sizes >= 1")
    out = tuple(_count(f"{key}[{i}]", v) for i, v in enumerate(value))
    if min(out) < 1:
        raise ProfileError(f"profile key {key}: world sizes must be >= 1, got {value!r}")
    return out


def check_table(key: str, value: Any, allowed: Mapping[str, Checker]) -> dict[str, Any]:
    """Table ``key`` with exactly the keys of ``allowed``, each value checked by its checker."""
    if not isinstance(value, dict):
        raise ProfileError(f"profile key {key}: must be a table, got {value!r}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ProfileError(
            f"unknown profile key {key}.{unknown[0]}: allowed keys of [{key}] are "
            + ", ".join(sorted(allowed))
        )
    missing = sorted(set(allowed) - set(value))
    if missing:
        raise ProfileError(f"profile key {key}.{missing[0]} is missing")
    return {k: allowed[k](f"{key}.{k}", v) for k, v in value.items()}


def _dist(key: str, value: Any) -> Dist:
    checked = check_table(key, value, {"median_s": _positive, "sigma": _non_negative})
    return Dist(checked["median_s"], checked["sigma"])


def _causes(key: str, value: Any) -> dict[str, float]:
    checked = check_table(
        key,
        {c: 0 for c in CAUSES} | dict(value) if isinstance(value, dict) else value,
        {c: _non_negative for c in CAUSES},
    )
    if sum(checked.values()) <= 0:
        raise ProfileError(f"profile key {key}: at least one cause weight must be > 0")
    return checked


def _phases(key: str, value: Any) -> tuple[Phase, ...]:
    if not isinstance(value, list) or not value:
        raise ProfileError(f"profile key {key}: must be a non-empty list of phase tables")
    out: list[Phase] = []
    for i, item in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ProfileError(f"profile key {where}: needs a name, got {item!r}")
        name = item["name"]
        if name == COMPILE_PHASE:
            check_table(where, item, {"name": _names_one})
            out.append(Phase(name, None))
            continue
        checked = check_table(
            where, item, {"name": _names_one, "median_s": _positive, "sigma": _non_negative}
        )
        out.append(Phase(name, Dist(checked["median_s"], checked["sigma"])))
    names = [p.name for p in out]
    if len(set(names)) != len(names):
        raise ProfileError(f"profile key {key}: phase names must be distinct, got {names}")
    return tuple(out)


def _names_one(key: str, value: Any) -> str:
    return check_names(key, [value])[0]


MODEL_KEYS: Final[dict[str, Checker]] = {  # the keys of a [models.NAME] table
    "step_s": _positive,
    "batch_size": _count,
    "train_hours": _dist,
}

SCHEMA: Final[dict[str, dict[str, Checker]]] = {  # each table's keys and their checkers
    "fleet": {
        "teams": check_names,
        "ranks": _world_sizes,
        "rank_weights": _weights,
        "max_restarts": _count,
        "window_s": _positive,
        "rank_jitter_sigma": _non_negative,
    },
    "startup": {
        "phases": _phases,
        "first_step": _dist,
        "straggler_probability": _probability,
        "straggler_factor": _dist,
        "straggler_phases": check_names,
    },
    "compile": {
        "miss": _dist,
        "hit": _dist,
        "hit_probability_first": _probability,
        "hit_probability_restart": _probability,
        "recompile_per_hour": _non_negative,
        "recompile": _dist,
    },
    "checkpoint": {
        "interval_s": _positive,
        "async_probability": _probability,
        "sync_blocking": _dist,
        "async_blocking": _dist,
        "persist": _dist,
        "final_save": _flag,
        "bytes": _count,
    },
    "eval": {"interval_s": _non_negative, "duration": _dist},
    "failures": {
        "rate_per_hour": _non_negative,
        "startup_probability": _probability,
        "causes": _causes,
        "exit": _dist,
        "nccl_timeout_s": _positive,
        "watchdog_s": _positive,
        "restart_delay": _dist,
        "requeue_delay": _dist,
    },
    "publish": {
        "probability": _probability,
        "delay": _dist,
        "imports": _dist,
        "load": _dist,
        "duration": _dist,
    },
    "live": {
        "train_s": _positive,
        "checkpoint_interval_s": _positive,
        "eval_interval_s": _non_negative,
        "startup_scale": _positive,
    },
    "loop": {
        "compute_share": _probability,
        "compute_sigma": _non_negative,
        "step_sigma": _non_negative,
        "timed": _flag,
    },
    "model_defaults": MODEL_KEYS,
}
