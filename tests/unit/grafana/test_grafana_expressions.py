"""Our small evaluator of Grafana's server-side expressions (used to make the generated alert
rules fire in tests) follows Grafana's documented semantics for the cases the rules meet."""

from __future__ import annotations

import math

import pytest
import yaml

from ett_grafana._provisioning import render
from tests.support.grafana_expressions import evaluate_rule, firing, math_expression, reduce

A = frozenset({("model", "a")})
B = frozenset({("model", "b")})
NAN = math.nan


def test_reduce_modes() -> None:
    series = {A: [1.0, 2.0, NAN], B: [None, 5.0]}
    assert reduce(series, "last", {"mode": "dropNN"}) == {A: 2.0, B: 5.0}
    strict = reduce(series, "last", {"mode": "strict"})
    assert math.isnan(strict[A]) and math.isnan(strict[B])
    assert reduce(series, "max", {"mode": "replaceNN", "replaceWithValue": 9}) == {A: 9.0, B: 9.0}
    assert math.isnan(reduce({A: [NAN]}, "last", {"mode": "dropNN"})[A])  # empty after dropping
    with pytest.raises(ValueError):
        reduce(series, "median", {"mode": "dropNN"})


def test_math_comparisons_are_zero_or_one_and_nan_compares_false() -> None:
    refs = {"B": {A: 3.0, B: NAN}, "C": {A: 1.0, B: 1.0}}
    assert math_expression("$B == $B", refs) == {A: 1.0, B: 0.0}
    assert math_expression("$B > 2 && ${C} == 1", refs) == {A: 1.0, B: 0.0}
    assert math_expression("$B * 2 + $C", refs)[A] == 7.0
    assert firing({A: 1.0, B: 0.0}) == [{"model": "a"}]
    assert firing({A: NAN}) == []


def test_every_generated_rule_is_within_the_evaluator() -> None:
    rules = yaml.safe_load(render()["alerting/ett-rules.yaml"])["groups"][0]["rules"]
    assert rules
    for rule in rules:  # a series that holds fires; no series, no alert
        assert firing(evaluate_rule(rule, lambda _: {A: [0.5]})) == [{"model": "a"}]
        assert firing(evaluate_rule(rule, lambda _: {})) == []
