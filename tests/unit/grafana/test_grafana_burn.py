"""The SLO burn rules in Grafana: off by default, they are not in the committed alerting file; a
user's rules file that enables them puts them, with the collector's own PromQL, in the files of
`ett grafana build --rules FILE` and in the rule group of `ett grafana push --rules FILE`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_stub import GrafanaStub

from ett_cli import main
from ett_collector.alerts.prometheus import expression
from ett_collector.alerts.rules import Kind, load_rules
from ett_grafana._provisioning import ROOT, render, stale

USER_RULES = Path(__file__).resolve().parents[2] / "alerts" / "promtool" / "burn_rules.yml"
ALERTING = "alerting/ett-rules.yaml"


def _rules(text: str) -> dict[str, dict[str, Any]]:
    return {r["title"]: r for r in yaml.safe_load(text)["groups"][0]["rules"]}


def _burn() -> dict[str, Any]:
    return {r.name: r for r in load_rules(USER_RULES).enabled() if r.kind is Kind.ETT_SLO_BURN}


@pytest.fixture
def stub() -> Iterator[GrafanaStub]:
    s = GrafanaStub()
    s.url = s.start()  # type: ignore[attr-defined]
    yield s
    s.stop()


def test_the_committed_alerting_file_has_no_burn_rule() -> None:
    committed = _rules((ROOT / ALERTING).read_text())
    assert committed  # the other defaults are there
    assert not {t for t in committed if "slo_burn" in t}
    assert not {r.kind for r in load_rules().enabled()} & {Kind.ETT_SLO_BURN}


def test_build_with_a_user_rules_file_writes_the_burn_rules(tmp_path: Path, capsys) -> None:
    out = tmp_path / "provisioning"
    assert main(["grafana", "build", "--rules", str(USER_RULES), "--out", str(out)]) == 0
    rules = _rules((out / ALERTING).read_text())
    burn = _burn()
    assert len(burn) == 3 and burn.keys() <= rules.keys()
    for name, rule in burn.items():
        sent = rules[name]
        assert sent["data"][0]["model"]["expr"] == expression(rule)  # the export's PromQL
        assert sent["labels"] == {"rule": name, "severity": rule.severity, "component": "burn"}
        assert "$values.B.Value" in sent["annotations"]["description"]
        assert "$value " not in sent["annotations"]["description"]
    # only the alerting file differs from the committed (default) files
    assert stale(out, str(USER_RULES)) == []
    assert stale(out) == [f"differs: {ALERTING}"]
    for rel, text in render().items():
        if rel != ALERTING:
            assert (out / rel).read_text() == text
    capsys.readouterr()
    assert main(["grafana", "build", "--check", "--rules", str(USER_RULES), "--out", str(out)]) == 0
    assert main(["grafana", "build", "--check", "--out", str(out)]) == 1
    assert f"differs: {ALERTING}" in capsys.readouterr().out


def test_build_refuses_a_bad_rules_file(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "rules.yml"
    bad.write_text("rules:\n  - {name: b, kind: ett_slo_burn, objective_pct: 90, burn_rate: 10}\n")
    out = tmp_path / "provisioning"
    assert main(["grafana", "build", "--rules", str(bad), "--out", str(out)]) == 2
    assert "rule 'b': field 'burn_rate'" in capsys.readouterr().err
    assert not out.exists()


def test_push_with_a_user_rules_file_sends_the_burn_rules(stub: GrafanaStub) -> None:
    args = ["grafana", "push", "--url", stub.url, "--token", stub.token]  # type: ignore[attr-defined]
    assert main([*args, "--rules", str(USER_RULES)]) == 0
    ((_, group),) = stub.rule_groups.items()
    sent = {r["title"]: r for r in group["rules"]}
    for name, rule in _burn().items():
        assert sent[name]["data"][0]["model"]["expr"] == expression(rule)
        assert sent[name]["labels"]["severity"] == rule.severity
