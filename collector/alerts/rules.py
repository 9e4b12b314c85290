"""The alert rules: one Python model that the evaluator, the backtest, the Prometheus export and
the Grafana alert builder all read.

A rules file is YAML (``default_rules.yml`` beside this module is the shipped default and its
documentation)::

    include_defaults: true        # keep the shipped rules not named below (default true)
    rules:
      - name: ett_regression_by_model
        kind: ett_regression      # see Kind
        by: model                 # model | team: the group an alert names
        window: 24h               # the recent window (one of WINDOWS)
        baseline: 7d              # trailing baseline window; the recent window is taken out of it
        drop_points: 10           # fire when the recent ETT is this many points below baseline
        for: 0s                   # how long the condition holds before the alert fires

A user file's rule with a default's name replaces it; ``enabled: false`` turns one off.
:func:`load_rules` validates strictly: an unknown field, a bad duration or threshold raises
:class:`RulesError` naming the rule and the field, and nothing is loaded.

Windows are those of the fleet metrics (``ett_fleet_*{window=...}``), so that the built-in
evaluator and Prometheus evaluate the very same figures: a job belongs to a window ``W`` at
instant ``t`` when it ended (or, live, last reported) in ``(t - W, t]``. A baseline is the jobs of
the baseline window minus those of the recent window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

from ett.semconv import ComponentValues

WINDOWS: dict[str, float] = {"1h": 3600.0, "24h": 86400.0, "7d": 7 * 86400.0}
"""The rolling windows of the fleet metrics and of the rules, in seconds."""

COMPONENTS: tuple[str, ...] = tuple(c.value for c in ComponentValues)
"""The components a lost second is charged to (docs/metrics.md, "Words")."""

_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$", re.ASCII)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file, the rule and the field."""


class Kind(StrEnum):
    """What a rule watches."""

    REGRESSION = "regression"
    """Every watched component's lost seconds per job-hour (and the failure rate) of the recent
    jobs against the baseline's, by a test that knows its noise (a rank test; an exact Poisson
    test for failures), Benjamini-Hochberg over all groups and components at ``fdr``, and an
    effect floor ``min_gpu_hours_per_day``; one alert per (group, component), with the ETT,
    time to start and checkpoint blocking of its jobs as annotations (``_detect.py``,
    ``docs/alerts.md``)."""
    ETT_REGRESSION = "ett_regression"
    """A group's ETT over the recent window at least ``drop_points`` below its baseline, or below
    ``slo_pct``. The alert's component is the one whose lost seconds per job-hour grew most."""
    COMPONENT_REGRESSION = "component_regression"
    """One component's lost seconds per job-hour up more than ``increase_pct`` on its baseline
    (and by at least ``min_increase``, in seconds per job-hour). One alert per component."""
    TTS_REGRESSION = "tts_regression"
    """Mean time to start of the recent jobs up more than ``increase_pct`` on the baseline mean
    (and by at least ``min_increase`` seconds)."""
    CHECKPOINT_BLOCKING_REGRESSION = "checkpoint_blocking_regression"
    """Checkpoint blocking seconds per job-hour up more than ``increase_pct`` (and by at least
    ``min_increase`` seconds per job-hour)."""
    PRESUMED_DEAD = "presumed_dead"
    """At least ``min_jobs`` jobs of the group presumed dead now (a live condition: the backtest
    cannot replay it)."""
    RESTART_STORM = "restart_storm"
    """One job of the group restarted more than ``max_restarts`` times within ``window``."""
    ETT_SLO_BURN = "ett_slo_burn"
    """The group's ETT burns the error budget of ``objective_pct`` faster than ``burn_rate`` over
    both ``long_window`` and ``short_window`` (multi-window burn rate; ``_burn.py``). Component
    ``burn``."""
    THROUGHPUT_REGRESSION = "throughput_regression"
    """Samples per second per rank of the group's recent jobs down on its baseline, with the
    statistics of ``regression``: a one-sided rank test over the jobs (scanned over the newest
    ones), Benjamini-Hochberg over the groups at ``fdr``, the effect floor
    ``min_gpu_hours_per_day`` (the extra GPU-hours a day the slower steps cost), a frozen
    baseline and ``resolve_p``. Component ``step`` (``_perf.py``)."""
    STRAGGLER = "straggler"
    """A persistent straggler: one rank of a job of the group (that ended, or last reported, in
    ``window``; a running job's facts are at most 5 minutes old) whose
    compute per step was at least ``min_score`` times the other ranks' (at the same time) in at
    least ``min_windows`` windows of one attempt. One alert per group, naming its jobs and
    ranks. Component ``straggler`` (``_perf.py``)."""


BASELINE_KINDS: frozenset[Kind] = frozenset(
    {
        Kind.REGRESSION,
        Kind.ETT_REGRESSION,
        Kind.COMPONENT_REGRESSION,
        Kind.TTS_REGRESSION,
        Kind.CHECKPOINT_BLOCKING_REGRESSION,
        Kind.THROUGHPUT_REGRESSION,
    }
)
"""The kinds that compare the recent ``window`` with a longer ``baseline`` window."""

REGRESSION_KINDS: frozenset[Kind] = BASELINE_KINDS | {Kind.STRAGGLER}
"""The kinds that report regressions (what a truth file's planted regressions score; not
presumed dead, restart storms or SLO burn)."""


class GroupKey(StrEnum):
    """The label an alert is grouped by."""

    MODEL = "model"
    TEAM = "team"


_COMMON = {"name", "kind", "by", "for", "severity", "enabled", "summary"}
_REGRESSION = {"window", "baseline", "min_jobs", "min_baseline_jobs"}
_FIELDS: dict[Kind, set[str]] = {
    Kind.ETT_REGRESSION: _COMMON | _REGRESSION | {"drop_points", "slo_pct"},
    Kind.COMPONENT_REGRESSION: _COMMON
    | _REGRESSION
    | {"increase_pct", "min_increase", "components"},
    Kind.TTS_REGRESSION: _COMMON | _REGRESSION | {"increase_pct", "min_increase"},
    Kind.CHECKPOINT_BLOCKING_REGRESSION: _COMMON | _REGRESSION | {"increase_pct", "min_increase"},
    Kind.PRESUMED_DEAD: _COMMON | {"min_jobs"},
    Kind.RESTART_STORM: _COMMON | {"window", "max_restarts"},
    Kind.REGRESSION: _COMMON
    | _REGRESSION
    | {"components", "fdr", "min_gpu_hours_per_day", "resolve_p", "test", "startup_test"},
    Kind.ETT_SLO_BURN: _COMMON
    | {"objective_pct", "long_window", "short_window", "burn_rate", "min_jobs"},
    Kind.THROUGHPUT_REGRESSION: _COMMON
    | _REGRESSION
    | {"fdr", "min_gpu_hours_per_day", "resolve_p"},
    Kind.STRAGGLER: _COMMON | {"window", "min_score", "min_windows"},
}
"""The fields each kind accepts (any other field is an error)."""


@dataclass(frozen=True)
class Rule:
    """One alert rule. Fields a kind does not use keep their defaults."""

    name: str
    """Unique; the ``rule`` label (and Prometheus ``alertname``) of its alerts."""
    kind: Kind
    by: GroupKey = GroupKey.MODEL
    for_s: float = 0.0
    """The ``for:`` duration: the condition must hold this long before the alert fires."""
    severity: str = "warning"
    enabled: bool = True
    summary: str = ""
    """Free text added to the alerts' annotations."""
    window: str = "24h"
    """The recent window (regressions) or the storm's time span (restart storm)."""
    baseline: str = "7d"
    min_jobs: int = 3
    """Jobs needed in the recent window (presumed dead: dead jobs needed)."""
    min_baseline_jobs: int = 5
    drop_points: float | None = None
    slo_pct: float | None = None
    increase_pct: float = 50.0
    min_increase: float = 0.0
    components: tuple[str, ...] = COMPONENTS
    max_restarts: int = 3
    fdr: float = 0.002
    """The false-discovery rate of the regression kind's Benjamini-Hochberg step."""
    min_gpu_hours_per_day: float = 0.25
    """The regression kind's effect floor: a change costing fewer extra GPU-hours a day than
    this stays quiet, however significant."""
    resolve_p: float = 0.1
    """An open regression incident resolves when its uncorrected p-value against the baseline
    it was found against rises above this (hysteresis)."""
    test: str = "rank"
    """The regression kind's per-job test of a component: ``rank`` (Mann-Whitney) or
    ``lognormal`` (a predictive t-test of the log values, the rank test where a value is 0)."""
    startup_test: str = "rank"
    """The same choice for the start-up view (the seconds of each first start-up): ``rank``
    or ``lognormal`` (stratified where the component is: :class:`StratifiedLogBaseline`)."""
    objective_pct: float | None = None
    """The ETT objective (SLO burn); its error budget is ``100 - objective_pct`` points."""
    long_window: str = "24h"
    short_window: str = "1h"
    burn_rate: float | None = None
    """Fire when the budget burns faster than this over both windows (SLO burn)."""
    min_score: float = 1.3
    """A straggler's compute per step over the other ranks' (straggler kind; above 1)."""
    min_windows: int = 20
    """Windows of one attempt a straggler must hold ``min_score`` in (straggler kind)."""

    @property
    def windows(self) -> tuple[str, ...]:
        """The windows the condition reads (the backtest steps at their edges)."""
        if self.kind is Kind.ETT_SLO_BURN:
            return (self.long_window, self.short_window)
        if self.kind is Kind.STRAGGLER:
            return (self.window,)
        return (self.window, self.baseline)

    @property
    def window_s(self) -> float:
        """The recent window in seconds."""
        return WINDOWS[self.window]

    @property
    def baseline_s(self) -> float:
        """The baseline window in seconds."""
        return WINDOWS[self.baseline]

    @property
    def component(self) -> str | None:
        """The fixed component label of kinds that name one (None: computed per alert)."""
        return _FIXED_COMPONENT.get(self.kind)

    @property
    def replayable(self) -> bool:
        """Whether the backtest can replay the rule over stored history."""
        return self.kind is not Kind.PRESUMED_DEAD


_FIXED_COMPONENT = {
    Kind.CHECKPOINT_BLOCKING_REGRESSION: ComponentValues.CHECKPOINT.value,
    Kind.PRESUMED_DEAD: ComponentValues.FAILURE.value,
    Kind.RESTART_STORM: ComponentValues.FAILURE.value,
    Kind.ETT_SLO_BURN: "burn",
    Kind.THROUGHPUT_REGRESSION: "step",
    Kind.STRAGGLER: "straggler",
}


@dataclass(frozen=True)
class RuleSet:
    """The rules in force, in file order, with where they came from."""

    rules: tuple[Rule, ...]
    source: str = "defaults"
    defaults_only: bool = False
    """True when a user's file gave no rule and kept the defaults (an empty or truncated file,
    or one of comments): the defaults are in force as if there were no file (:func:`merge`)."""

    def enabled(self) -> tuple[Rule, ...]:
        """The rules that are on."""
        return tuple(r for r in self.rules if r.enabled)

    def get(self, name: str) -> Rule | None:
        """The rule called ``name``, or None."""
        return next((r for r in self.rules if r.name == name), None)


def parse_duration(text: Any) -> float:
    """Seconds of a Prometheus-style duration (``30s``, ``5m``, ``1h``, ``7d``, ``0s``).

    Raises:
        ValueError: for anything else.
    """
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError(f"must be a duration such as 30s, 5m, 1h, 7d (a string), got {text!r}")
    m = _DURATION.match(text.strip())
    if m is None:
        raise ValueError(f"must be a duration such as 30s, 5m, 1h, 7d, got {text!r}")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def format_duration(seconds: float) -> str:
    """A duration that Prometheus reads back (``0s``, ``90s``, ``5m``, ``2h``)."""
    if seconds == 0:
        return "0s"
    for unit in ("d", "h", "m", "s"):
        n = seconds / _UNIT_S[unit]
        if n >= 1 and n == int(n):
            return f"{int(n)}{unit}"
    return f"{round(seconds * 1000)}ms"


def default_rules_text() -> str:
    """The shipped default rules file (YAML, documented)."""
    return resources.files("ett_collector.alerts").joinpath("default_rules.yml").read_text("utf-8")


def load_rules(path: str | Path | None = None) -> RuleSet:
    """The defaults, overridden by the file at ``path`` when given.

    Raises:
        RulesError: naming the file, the rule and the field, for anything wrong in either file.
    """
    defaults = parse_rules(default_rules_text(), "default_rules.yml")
    if path is None:
        return defaults
    p = Path(path)
    try:
        text = utf8_text(p.read_bytes(), "a rules file is YAML")
    except OSError as exc:
        raise RulesError(f"{p}: cannot read the rules file: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise RulesError(f"{p}: {exc}") from None
    return merge(defaults, parse_rules(text, str(p)), str(p))


def utf8_text(data: bytes, what: str) -> str:
    """``data`` decoded as UTF-8.

    Raises:
        ValueError: ``not UTF-8 text (byte 0xff on line 3); <what> in UTF-8``.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); {what} in UTF-8"
        ) from None


def merge(defaults: RuleSet, user: RuleSet, source: str) -> RuleSet:
    """``user``'s rules replace defaults of the same name; the others are kept unless the user
    file says ``include_defaults: false`` (``user.source`` then ends with ``!``)."""
    keep_defaults = not user.source.endswith("!")
    names = {r.name for r in user.rules}
    kept = [r for r in defaults.rules if r.name not in names] if keep_defaults else []
    return RuleSet(tuple(kept) + user.rules, source, not user.rules and keep_defaults)


def _strict_loader() -> type:
    """YAML's safe loader, refusing a key given twice in one mapping: PyYAML keeps the last
    silently, so a second ``rules:`` dropped every rule above it and a second ``fdr:`` won."""
    import yaml

    class StrictLoader(yaml.SafeLoader):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"{key!r} is given twice (first on line {seen[key].line + 1})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _yaml_problem(exc: Exception) -> str:
    """A YAML error as ``line L, column C: what`` (PyYAML's own text names a
    ``"<unicode string>"`` where the file's name is meant)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return str(problem)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def parse_rules(text: str, source: str = "<rules>") -> RuleSet:
    """Parse and validate a rules document.

    Raises:
        RulesError: for bad YAML or any bad rule (the first problem found, named).
    """
    import yaml

    try:
        doc = yaml.load(text, Loader=_strict_loader())  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise RulesError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise RulesError(f"{source}: the top level must be a mapping with a 'rules' list")
    unknown = set(doc) - {"rules", "include_defaults"}
    if unknown:
        raise RulesError(
            f"{source}: unknown top-level field {sorted(unknown)[0]!r} "
            "(allowed: rules, include_defaults)"
        )
    include = doc.get("include_defaults", True)
    if not isinstance(include, bool):
        raise RulesError(f"{source}: include_defaults must be true or false, got {include!r}")
    raw_rules = doc.get("rules", [])
    if not isinstance(raw_rules, list):
        # `rules: {}`, `rules: ""` and a bare `rules:` (null) too: none of them is a list, and
        # an empty list is said `rules: []`
        got = "null" if raw_rules is None else repr(raw_rules)
        raise RulesError(
            f"{source}: 'rules' must be a list of rules (`rules: []` for none), got {got}"
        )
    rules: list[Rule] = []
    for i, raw in enumerate(raw_rules):
        rule = _parse_rule(raw, f"{source}: rules[{i}]")
        if any(r.name == rule.name for r in rules):
            raise RulesError(f"{source}: rule {rule.name!r}: the name is used twice")
        rules.append(rule)
    return RuleSet(tuple(rules), source if include else source + "!")


def _parse_rule(raw: Any, where: str) -> Rule:
    if not isinstance(raw, dict):
        raise RulesError(f"{where}: a rule must be a mapping, got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise RulesError(
            f"{where}: field 'name': must match [a-zA-Z_][a-zA-Z0-9_]* (it becomes a "
            f"Prometheus alert name), got {name!r}"
        )
    where = f"{where.split(': rules[')[0]}: rule {name!r}"
    kind_raw = raw.get("kind")
    try:
        kind = Kind(str(kind_raw))
    except ValueError:
        raise RulesError(
            f"{where}: field 'kind': must be one of {', '.join(k.value for k in Kind)}, "
            f"got {kind_raw!r}"
        ) from None
    allowed = _FIELDS[kind]
    for key in raw:
        if key not in allowed:
            raise RulesError(
                f"{where}: unknown field {key!r} for kind {kind.value} "
                f"(allowed: {', '.join(sorted(allowed))})"
            )
    values: dict[str, Any] = {"name": name, "kind": kind}
    for key, value in raw.items():
        if key in ("name", "kind"):
            continue
        try:
            attr, parsed = _parse_field(key, value)
        except ValueError as exc:
            raise RulesError(f"{where}: field {key!r}: {exc}") from None
        values[attr] = parsed
    rule = Rule(**values)
    try:
        _check_rule(rule)
    except _FieldError as exc:
        raise RulesError(f"{where}: field {exc.field!r}: {exc.message}") from None
    return rule


class _FieldError(Exception):
    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message


def _number(
    value: Any,
    lo: float | None = None,
    hi: float | None = None,
    *,
    open_lo: bool = False,
    open_hi: bool = False,
    what: str = "",
) -> float:
    """``value`` as a finite float within the bounds given (``open_lo``, ``open_hi``: the bound
    itself is out); the message names only the bounds that exist, e.g. ``must be >= 0`` or
    ``must be a p-value in (0, 1]``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"must be a finite number, got {value!r}")
    below = lo is not None and (v <= lo if open_lo else v < lo)
    above = hi is not None and (v >= hi if open_hi else v > hi)
    if below or above:
        words = f"{what} " if what else ""
        raise ValueError(f"must be {words}{_range(lo, hi, open_lo, open_hi)}, got {value!r}")
    return v


def _range(lo: float | None, hi: float | None, open_lo: bool, open_hi: bool) -> str:
    """The bounds that exist, open or closed: ``in [0, 100]``, ``in (0, 0.5]``, ``strictly
    between 0 and 100``, ``>= 0``, ``above 1``, ``<= 5``, ``below 5``."""
    if lo is not None and hi is not None:
        if open_lo and open_hi:
            return f"strictly between {lo:g} and {hi:g}"
        return f"in {'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
    if lo is not None:
        return f"above {lo:g}" if open_lo else f">= {lo:g}"
    if hi is not None:
        return f"below {hi:g}" if open_hi else f"<= {hi:g}"
    return "a number"  # pragma: no cover - a call without bounds never gets here


def _integer(value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"must be an integer of at least {lo}, got {value!r}")
    return value


def _window(value: Any) -> str:
    if not isinstance(value, str) or value not in WINDOWS:
        known = ", ".join(WINDOWS)
        raise ValueError(f"must be one of the fleet metric windows {known}, got {value!r}")
    return value


def _parse_field(key: str, value: Any) -> tuple[str, Any]:
    """The dataclass attribute and parsed value of one YAML field."""
    if key == "by":
        try:
            return "by", GroupKey(value)
        except ValueError:
            raise ValueError(f"must be model or team, got {value!r}") from None
    if key == "for":
        return "for_s", parse_duration(value)
    if key in ("severity", "summary"):
        if not isinstance(value, str):
            raise ValueError(f"must be a string, got {value!r}")
        return key, value
    if key == "enabled":
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return key, value
    if key in ("window", "baseline"):
        return key, _window(value)
    if key in ("min_jobs", "min_baseline_jobs"):
        return key, _integer(value, 1)
    if key == "max_restarts":
        return key, _integer(value, 0)
    if key in ("drop_points", "slo_pct"):
        return key, _number(value, 0.0, 100.0)
    if key == "increase_pct":
        return key, _number(value, 0.0)
    if key == "min_increase":
        return key, _number(value, 0.0)
    if key == "components":
        if not isinstance(value, list) or not value:
            raise ValueError("must be a non-empty list of components")
        for c in value:
            if c not in COMPONENTS:
                raise ValueError(f"unknown component {c!r} (known: {', '.join(COMPONENTS)})")
        return key, tuple(value)
    if key in ("long_window", "short_window"):
        return key, _window(value)
    if key == "objective_pct":
        return key, _number(value, 0.0, 100.0, open_lo=True, open_hi=True, what="a percentage")
    if key == "burn_rate":
        return key, _number(value, 0.0, open_lo=True, what="a number")
    if key == "fdr":
        return key, _number(value, 0.0, 0.5, open_lo=True, what="a false-discovery rate")
    if key == "resolve_p":
        return key, _number(value, 0.0, 1.0, open_lo=True, what="a p-value")
    if key == "min_gpu_hours_per_day":
        return key, _number(value, 0.0)
    if key in ("test", "startup_test"):
        if value not in ("rank", "lognormal"):
            raise ValueError(f"must be rank or lognormal, got {value!r}")
        return key, value
    if key == "min_score":
        return key, _number(value, 1.0, open_lo=True, what="a ratio")
    if key == "min_windows":
        return key, _integer(value, 1)
    raise ValueError("unknown field")  # pragma: no cover - _FIELDS screens first


def _check_rule(rule: Rule) -> None:
    """Checks across fields."""
    if rule.kind in BASELINE_KINDS and rule.baseline_s <= rule.window_s:
        raise _FieldError(
            "baseline", f"must be longer than window ({rule.window}), got {rule.baseline}"
        )
    if rule.kind is Kind.ETT_REGRESSION and rule.drop_points is None and rule.slo_pct is None:
        raise _FieldError("drop_points", "an ett_regression needs drop_points, slo_pct or both")
    if rule.kind is Kind.ETT_SLO_BURN:
        _check_burn(rule)


def _check_burn(rule: Rule) -> None:
    for needed in ("objective_pct", "burn_rate"):
        if getattr(rule, needed) is None:
            raise _FieldError(needed, "an ett_slo_burn needs objective_pct and burn_rate")
    if WINDOWS[rule.short_window] >= WINDOWS[rule.long_window]:
        raise _FieldError(
            "short_window",
            f"must be shorter than long_window ({rule.long_window}), got {rule.short_window}",
        )
    most = 100.0 / (100.0 - (rule.objective_pct or 0.0))
    if (rule.burn_rate or 0.0) >= most:
        raise _FieldError(
            "burn_rate",
            f"must be below {most:g}, the burn rate of an ETT of 0% against a "
            f"{rule.objective_pct:g}% objective (at or above it the rule can never fire), "
            f"got {rule.burn_rate:g}",
        )


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    """The rule as the YAML fields its kind accepts (for ``--json`` output and the Grafana
    builder)."""
    out: dict[str, Any] = {}
    allowed = _FIELDS[rule.kind]
    for f in fields(rule):
        key = "for" if f.name == "for_s" else f.name
        if key not in allowed and key not in ("name", "kind"):
            continue
        value = getattr(rule, f.name)
        if key == "for":
            value = format_duration(value)
        elif isinstance(value, StrEnum):
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


def with_changes(rule: Rule, **changes: Any) -> Rule:
    """A copy of ``rule`` with fields changed (tests and tuning scripts)."""
    return replace(rule, **changes)


def rules_from_mappings(items: Sequence[Mapping[str, Any]], source: str = "<rules>") -> RuleSet:
    """Validate rules given as Python mappings (the same fields as the YAML)."""
    import yaml

    return parse_rules(yaml.safe_dump({"rules": [dict(i) for i in items]}), source)


__all__ = [
    "COMPONENTS",
    "WINDOWS",
    "GroupKey",
    "Kind",
    "Rule",
    "RuleSet",
    "RulesError",
    "default_rules_text",
    "format_duration",
    "load_rules",
    "parse_duration",
    "parse_rules",
    "rule_to_dict",
    "utf8_text",
]
