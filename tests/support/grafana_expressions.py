"""A small evaluator of Grafana-managed alert rules' server-side expressions, for the expression
types our generated rules use, following Grafana's documented semantics (Alerting → queries and
conditions → expressions):

- a data query's answer is a set of series, each with labels and values (an instant query: one
  value per series);
- ``reduce`` turns each series into one number with a reducer (``last``, ``mean``, ``min``,
  ``max``, ``sum``, ``count``) and a mode: ``strict`` (any non-numeric value makes NaN),
  ``dropNN`` (NaN, ±Inf and null dropped first), ``replaceNN`` (replaced by ``replaceWithValue``);
  an empty series reduces to NaN (``count``: 0);
- ``math`` computes, per label set, an expression over ``$REF`` numbers: ``+ - * /``,
  comparisons and ``&& ||`` give 1 or 0, and any comparison with NaN is 0; references join on
  equal label sets;
- the rule's ``condition`` names one expression; an alert instance fires for each label set
  whose condition value is non-zero (and not NaN). No data: no instance.

Only what the rules in ``grafana/provisioning/alerting`` need; an unknown type or reducer raises.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

Labels = frozenset[tuple[str, str]]
Numbers = dict[Labels, float]
Series = dict[Labels, list[float | None]]

_REDUCERS: dict[str, Callable[[list[float]], float]] = {
    "last": lambda v: v[-1] if v else math.nan,
    "mean": lambda v: sum(v) / len(v) if v else math.nan,
    "min": lambda v: min(v) if v else math.nan,
    "max": lambda v: max(v) if v else math.nan,
    "sum": lambda v: float(sum(v)) if v else math.nan,
    "count": lambda v: float(len(v)),
}


def _numeric(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def reduce(series: Series, reducer: str, settings: Mapping[str, Any] | None = None) -> Numbers:
    """The ``reduce`` expression: one number per series."""
    if reducer not in _REDUCERS:
        raise ValueError(f"reducer {reducer!r} is not implemented here")
    mode = (settings or {}).get("mode", "strict")
    out: Numbers = {}
    for labels, values in series.items():
        if mode == "dropNN":
            kept = [float(v) for v in values if _numeric(v)]  # type: ignore[arg-type]
        elif mode == "replaceNN":
            fill = float((settings or {})["replaceWithValue"])
            kept = [float(v) if _numeric(v) else fill for v in values]  # type: ignore[arg-type]
        elif mode == "strict":
            if not all(_numeric(v) for v in values):
                out[labels] = math.nan
                continue
            kept = [float(v) for v in values]  # type: ignore[arg-type]
        else:
            raise ValueError(f"reduce mode {mode!r} is not implemented here")
        out[labels] = _REDUCERS[reducer](kept)
    return out


_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def _compare(op: ast.cmpop, a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return 0.0
    ops: dict[type, Callable[[float, float], bool]] = {
        ast.Eq: lambda x, y: x == y,
        ast.NotEq: lambda x, y: x != y,
        ast.Gt: lambda x, y: x > y,
        ast.GtE: lambda x, y: x >= y,
        ast.Lt: lambda x, y: x < y,
        ast.LtE: lambda x, y: x <= y,
    }
    return 1.0 if ops[type(op)](a, b) else 0.0


def _eval(node: ast.AST, env: Mapping[str, float]) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.Div):
            return a / b if b != 0 else (math.nan if a == 0 else math.copysign(math.inf, a))
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _compare(node.ops[0], _eval(node.left, env), _eval(node.comparators[0], env))
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env) for v in node.values]
        truth = [not math.isnan(v) and v != 0 for v in values]
        return 1.0 if (all(truth) if isinstance(node.op, ast.And) else any(truth)) else 0.0
    raise ValueError(f"math expression part {ast.dump(node)} is not implemented here")


def math_expression(expression: str, refs: Mapping[str, Numbers]) -> Numbers:
    """The ``math`` expression, per label set of its references (joined on equal labels)."""
    names = sorted(set(_REF.findall(expression)))
    python = _REF.sub(lambda m: m.group(1), expression).replace("&&", " and ").replace("||", " or ")
    tree = ast.parse(python, mode="eval")
    if not names:
        return {frozenset(): _eval(tree, {})}
    keys = set.intersection(*(set(refs[n]) for n in names))
    return {k: _eval(tree, {n: refs[n][k] for n in names}) for k in keys}


def evaluate_rule(rule: Mapping[str, Any], query: Callable[[Mapping[str, Any]], Series]) -> Numbers:
    """Run a provisioned rule's ``data`` in order (``query`` answers each data-source query)
    and return its condition's numbers per label set."""
    results: dict[str, Any] = {}
    for item in rule["data"]:
        model = item["model"]
        ref = item["refId"]
        if item["datasourceUid"] != "__expr__":
            results[ref] = query(model)
        elif model["type"] == "reduce":
            results[ref] = reduce(
                results[model["expression"]], model["reducer"], model.get("settings")
            )
        elif model["type"] == "math":
            results[ref] = math_expression(model["expression"], results)
        else:
            raise ValueError(f"expression type {model['type']!r} is not implemented here")
    condition: Numbers = results[rule["condition"]]
    return condition


def firing(condition: Numbers) -> list[dict[str, str]]:
    """The label sets for which an alert instance fires (non-zero, not NaN)."""
    return [dict(k) for k, v in condition.items() if not math.isnan(v) and v != 0]
