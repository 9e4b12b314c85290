"""The ``--truth`` file: JSON lines, one object per planted regression and one per job.

A planted regression's line (keys in this order; ``model`` or ``team`` is null, as a
regression names one of them; ``at`` in unix seconds, ``at_iso`` the same instant in UTC)::

    {"record": "regression", "model": "dlrm-small", "team": null, "component": "checkpoint",
     "factor": 6.0, "at": 1796061600.0, "at_iso": "2026-11-30T18:00:00Z"}

A planted straggler's line (``--straggler``; :mod:`ett_simulator.straggler`), after the
regressions, one per ``--straggler`` in the order given::

    {"record": "straggler", "model": "dlrm-large", "rank": 3, "factor": 1.5,
     "at": 1796061600.0, "at_iso": "2026-11-30T18:00:00Z"}

A slow model (``--regress ... component=step``) is a regression line with component ``step``.

A job's line is :meth:`~ett_simulator.truth.Truth.to_json` (the read API's field names, keys
sorted) and has no ``"record"`` key, as before regressions were written. The regression lines
come first, one per ``--regress`` in the order given, those whose ``at`` lies after the history's
end included (they are what was planted); then one line per job that was sent, in the order they
were generated: the history, then the ``--live`` jobs. A job left out of the history (it would
still have been running at its end) has no line. A reader that wants the jobs alone skips every
line that has a ``"record"`` key; :func:`read_truth` reads jobs and regressions (and checks,
then skips, stragglers), :func:`read_stragglers` the stragglers.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any, Final, NamedTuple

from .regression import COMPONENTS, Regression, format_instant
from .straggler import STRAGGLER_RECORD, Straggler, straggler_record
from .truth import Truth

REGRESSION_RECORD: Final = "regression"
"""The ``"record"`` value of a planted regression's line."""

_REGRESSION_KEYS: Final = ("record", "model", "team", "component", "factor", "at", "at_iso")
_TRUTH_KEYS: Final = frozenset(f.name for f in fields(Truth)) - {"phase_s"}


class TruthFileError(ValueError):
    """A truth file that :func:`read_truth` cannot read; the message names the file and line."""


class TruthFile(NamedTuple):
    """What a truth file holds: the jobs that were sent and the regressions that were planted."""

    jobs: list[Truth]
    regressions: list[Regression]


def regression_record(regression: Regression) -> dict[str, Any]:
    """The JSON object of one planted regression (see the module docstring)."""
    return {
        "record": REGRESSION_RECORD,
        "model": regression.model,
        "team": regression.team,
        "component": regression.component,
        "factor": float(regression.factor),
        "at": float(regression.at),
        "at_iso": format_instant(regression.at),
    }


def regression_line(regression: Regression) -> str:
    """One line of the truth file for ``regression``, with its newline."""
    return json.dumps(regression_record(regression)) + "\n"


def straggler_line(straggler: Straggler) -> str:
    """One line of the truth file for a planted straggler, with its newline."""
    return json.dumps(straggler_record(straggler)) + "\n"


def job_line(truth: Truth) -> str:
    """One line of the truth file for a job, with its newline."""
    return json.dumps(truth.to_json(), sort_keys=True) + "\n"


def read_truth(path: str | Path) -> TruthFile:
    """The jobs and the planted regressions of the truth file at ``path`` (blank lines are
    skipped). Raises :class:`TruthFileError`, naming the line, for a line that is not JSON, a
    record of another kind, or an object that is neither a job nor a regression of this
    format; ``OSError`` when the file cannot be read."""
    jobs: list[Truth] = []
    regressions: list[Regression] = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise TruthFileError(f"{where}: not a JSON object ({exc})") from None
            if not isinstance(obj, dict):
                raise TruthFileError(f"{where}: not a JSON object")
            if "record" not in obj:
                jobs.append(_job(obj, where))
            elif obj["record"] == REGRESSION_RECORD:
                regressions.append(_regression(obj, where))
            elif obj["record"] == STRAGGLER_RECORD:
                _straggler(obj, where)
            else:
                raise TruthFileError(
                    f"{where}: unknown record {obj['record']!r}; this reader knows "
                    f"{REGRESSION_RECORD!r}, {STRAGGLER_RECORD!r} and job lines (no 'record' key)"
                )
    return TruthFile(jobs, regressions)


def read_stragglers(path: str | Path) -> list[Straggler]:
    """The planted stragglers of the truth file at ``path`` (:func:`read_truth` checks the
    file's other lines)."""
    read_truth(path)
    out: list[Straggler] = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if '"record"' in line and STRAGGLER_RECORD in line:
                obj = json.loads(line)
                if obj.get("record") == STRAGGLER_RECORD:
                    out.append(_straggler(obj, f"{path}:{number}"))
    return out


def _straggler(obj: dict[str, Any], where: str) -> Straggler:
    keys = set(straggler_record(Straggler("m", 0, 1.0, 0.0)))
    if set(obj) != keys:
        raise TruthFileError(
            f"{where}: a straggler record has the keys {', '.join(sorted(keys))}"
            f"; got {', '.join(sorted(obj))}"
        )
    model, rank, factor, at = obj["model"], obj["rank"], obj["factor"], obj["at"]
    if not isinstance(model, str) or type(rank) is not int or rank < 0:
        raise TruthFileError(f"{where}: a straggler names a model and a rank >= 0")
    if not _number(factor) or not factor >= 1:
        raise TruthFileError(f"{where}: factor must be a number >= 1, got {factor!r}")
    if not _number(at):
        raise TruthFileError(f"{where}: at must be unix seconds, got {at!r}")
    return Straggler(model, rank, float(factor), float(at))


def _job(obj: dict[str, Any], where: str) -> Truth:
    missing = sorted(_TRUTH_KEYS - obj.keys())
    unknown = sorted(obj.keys() - _TRUTH_KEYS)
    if missing or unknown:
        raise TruthFileError(
            f"{where}: not a job's truth"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown keys {', '.join(unknown)}" if unknown else "")
        )
    return Truth(**obj, phase_s={})


def _regression(obj: dict[str, Any], where: str) -> Regression:
    keys = set(obj)
    if keys != set(_REGRESSION_KEYS):
        raise TruthFileError(
            f"{where}: a regression record has the keys {', '.join(_REGRESSION_KEYS)}; "
            f"got {', '.join(sorted(keys))}"
        )
    model, team, component = obj["model"], obj["team"], obj["component"]
    if not (isinstance(model, str) and team is None) and not (
        model is None and isinstance(team, str)
    ):
        raise TruthFileError(f"{where}: a regression names a model or a team (the other null)")
    if component not in COMPONENTS:
        raise TruthFileError(
            f"{where}: unknown component {component!r}; allowed: {', '.join(COMPONENTS)}"
        )
    factor, at = obj["factor"], obj["at"]
    if not _number(factor) or not factor > 0:
        raise TruthFileError(f"{where}: factor must be a number > 0, got {factor!r}")
    if not _number(at):
        raise TruthFileError(f"{where}: at must be unix seconds, got {at!r}")
    return Regression(component, float(factor), float(at), model, team)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
