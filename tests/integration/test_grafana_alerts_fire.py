"""The Grafana-managed alert rules fire, and mean what the collector's own rules mean.

A simulated fleet with a checkpoint regression planted on one model (the simulator's
``regress=``) is served by a live ``ett serve`` and scraped by a real Prometheus. Each generated
Grafana rule (``grafana/provisioning/alerting/ett-rules.yaml``) is evaluated as Grafana would:
query A (its PromQL) on Prometheus, then its reduce and math expressions in our small evaluator
(``tests/support/grafana_expressions.py``, Grafana's documented semantics). The regression rule's
condition holds for the regressed model's checkpoints and for no other model; and the set of
(rule, model or team, component) that Grafana's conditions name equals the set the collector's
built-in evaluator has firing on the same fleet at the same moment.

The regression rule is a PromQL approximation in Grafana (``docs/alerts.md``, "The regression rule
in PromQL"), and the built-in rule keeps state: its incident fired within a day of the onset and
keeps the baseline it was found against. So "has firing" is the built-in evaluator's state, the
rules replayed over the fleet's history (``replay``, the states ``ett serve`` walks), not one
stateless evaluation now: that one would test against a baseline already holding half a day of
the regression, where the rank test of a handful of recent jobs, corrected for every test of the
evaluation, is no longer sure (seen: p = 0.001 of 36 tests), while PromQL's ratio (3.3x) holds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from ett_collector.alerts import Fleet, Kind, evaluate, load_facts, load_rules, replay
from ett_collector.alerts.prometheus import has_promql
from ett_collector.storage import Store
from ett_grafana._provisioning import render
from ett_simulator import simulate_into_db
from tests.alerts.processes import Process, start_prometheus, start_serve, wait_for
from tests.support.grafana_expressions import Series, evaluate_rule, firing

pytestmark = [pytest.mark.prometheus, pytest.mark.e2e]

DAY = 86400.0
MODEL, COMPONENT = "dlrm-small", "checkpoint"
ONSET_AGO = 1.5 * DAY
RULE = "regression_by_model"
BURN_RULES = Path(__file__).resolve().parents[1] / "alerts" / "promtool" / "burn_rules.yml"
"""A user's rules file that turns the SLO burn rules on (90% objective)."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(database URL, Prometheus URL): the regressed fleet, served and scraped."""
    root = tmp_path_factory.mktemp("grafana-alerts")
    now = time.time()
    onset = datetime.fromtimestamp(now - ONSET_AGO, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    url = f"sqlite:///{root / 'collector.db'}"
    regress = [f"model={MODEL} component={COMPONENT} factor=6 at={onset}"]
    simulate_into_db(url, jobs=120, days=8, seed=5, start=now - 8 * DAY, regress=regress)
    rules = root / "no-rules.yml"
    rules.write_text("groups: []\n")
    procs: list[Process] = []
    try:
        serve, serve_url = start_serve(url, root)
        procs.append(serve)
        prom, prom_url = start_prometheus(
            root, serve_url.removeprefix("http://"), rules, "http://127.0.0.1:9"
        )
        procs.append(prom)
        wait_for(lambda: _query(prom_url, 'ett_fleet_jobs{window="7d"}'), 60, "a first scrape")
        yield url, prom_url
    finally:
        for p in reversed(procs):
            p.stop()


def _query(prom_url: str, expr: str) -> Series:
    r = httpx.get(prom_url + "/api/v1/query", params={"query": expr}, timeout=10)
    body = r.json()
    assert r.status_code == 200 and body["status"] == "success", (expr, r.text)
    return {frozenset(s["metric"].items()): [float(s["value"][1])] for s in body["data"]["result"]}


def _grafana_rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = yaml.safe_load(render()["alerting/ett-rules.yaml"])["groups"][0][
        "rules"
    ]
    return rules


def _named(labels: Mapping[str, str]) -> tuple[str, str, str]:
    key = labels.get("model") or labels.get("team") or ""
    return labels["rule"], key, labels.get("component", "")


def test_grafana_rules_fire_for_the_regressed_model_as_the_collector_does(
    served: tuple[str, str],
) -> None:
    url, prom_url = served
    rules = _grafana_rules()
    # every enabled rule with PromQL (a loop rule by team runs in ett serve only)
    exported = {r.name for r in load_rules().enabled() if has_promql(r)}
    assert {r["title"] for r in rules} == exported

    grafana: set[tuple[str, str, str]] = set()
    for rule in rules:
        condition = evaluate_rule(rule, lambda model: _query(prom_url, model["expr"]))
        assert all(not math.isnan(v) for v in condition.values()), rule["title"]
        for series_labels in firing(condition):
            grafana.add(_named({**rule["labels"], **series_labels}))
    t = time.time()

    store = Store(url)
    try:
        facts = load_facts(store.engine, t - 16 * DAY)
    finally:
        store.close()
    # the built-in evaluator's state at t: what the replay has firing (its state as ett serve
    # keeps it), and the live-only rules (presumed dead) evaluated now
    defaults = load_rules()
    open_now = [f for f in replay(facts, defaults, t - 7 * DAY, t) if f.resolved_at is None]
    live = [r for r in defaults.enabled() if not r.replayable]
    ours = {_named(f.labels) for f in open_now}
    ours |= {_named(f.labels) for r in live for f in evaluate(r, Fleet(facts), t)}

    assert (RULE, MODEL, COMPONENT) in grafana, grafana
    [found] = [f for f in open_now if _named(f.labels) == (RULE, MODEL, COMPONENT)]
    assert t - ONSET_AGO - 60 <= found.fired_at < t - DAY / 2  # after the onset, and long open
    checkpoint = {(rule, key) for rule, key, comp in grafana if comp == COMPONENT}
    assert checkpoint == {(rule, MODEL) for rule, _ in checkpoint}, "another model fired"
    ours = {n for n in ours if n[0] in exported}
    assert grafana == ours  # the same meaning: the same conditions hold, for the same groups


def test_burn_rules_a_user_file_enables_fire_in_grafana_as_the_collector_does(
    served: tuple[str, str],
) -> None:
    url, prom_url = served
    burn = {r.name: r for r in load_rules(BURN_RULES).enabled() if r.kind is Kind.ETT_SLO_BURN}
    provisioned = yaml.safe_load(render(str(BURN_RULES))["alerting/ett-rules.yaml"])
    rules = [r for r in provisioned["groups"][0]["rules"] if r["title"] in burn]
    assert len(rules) == len(burn) == 3

    grafana: set[tuple[str, str, str]] = set()
    for rule in rules:
        condition = evaluate_rule(rule, lambda model: _query(prom_url, model["expr"]))
        for series_labels in firing(condition):
            grafana.add(_named({**rule["labels"], **series_labels}))
    t = time.time()

    store = Store(url)
    try:
        jobs = Fleet(load_facts(store.engine, t - 8 * DAY))
        ours = {_named(f.labels) for r in burn.values() for f in evaluate(r, jobs, t)}
    finally:
        store.close()

    # the regressed model's ETT is below 90% over 7d and over 24h: the slow rule burns (> 1x)
    assert ("ett_slo_burn_slow_by_model", MODEL, "burn") in grafana, grafana
    assert grafana == ours
