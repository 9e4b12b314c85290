"""The alerts with real Prometheus, promtool and Alertmanager (marked ``prometheus``): the export
passes ``promtool check rules`` and the committed ``promtool test rules`` unit tests; /metrics
passes ``promtool check metrics`` with a series count that does not grow with jobs; a real
Prometheus scraping a live ``ett serve`` and the built-in evaluator both reach a real
Alertmanager, whose webhook receives the alert naming the model and the component; alerts made
while Alertmanager is down are delivered once it is up."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import data_rules
from fleet_builder import Regress, fleet, load
from processes import (
    WAIT_S,
    Webhook,
    free_port,
    need,
    start_alertmanager,
    start_prometheus,
    start_serve,
    wait_for,
)

from ett_collector.alerts import SERIES_PER_PAIR, AlertService, AlertState, FleetMetrics, load_rules
from ett_collector.alerts._delivery import DeliveryError
from ett_collector.read.metrics import CollectorMetrics
from ett_collector.storage import Store

pytestmark = pytest.mark.prometheus
HERE = Path(__file__).resolve().parent
HOUR = 3600.0


def _ett(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ett_cli", *args], capture_output=True, text=True, timeout=120
    )


def test_export_passes_promtool_check_rules() -> None:
    promtool = need("promtool")
    out = subprocess.run(
        f"{sys.executable} -m ett_cli alerts export-prometheus | {promtool} check rules /dev/stdin",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 3 rules found" in out.stdout  # regression, presumed dead, restart storm


def test_a_summary_with_template_braces_exports_a_loadable_file(tmp_path: Path) -> None:
    """summary: "{{ .Bad" was exported as written ('wrote 4 rule(s)', exit 0), and promtool
    (and so Prometheus) refused the whole file: "unclosed action"."""
    promtool = need("promtool")
    rules = tmp_path / "rules.yml"
    rules.write_text(
        "rules:\n  - name: my_storm\n    kind: restart_storm\n"
        "    summary: '{{ .Bad and {{ $labels.model }}'\n"
    )
    out = tmp_path / "out.yml"
    done = _ett("alerts", "export-prometheus", "--rules", str(rules), "-o", str(out))
    assert done.returncode == 0, done.stderr
    check = subprocess.run(
        [promtool, "check", "rules", str(out)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "'{{ .Bad" not in out.read_text()  # printed as written, not run as a template


def test_promtool_unit_tests_fire_stay_quiet_and_resolve(tmp_path: Path) -> None:
    promtool = need("promtool")
    shutil.copy(HERE / "promtool" / "rules_test.yml", tmp_path / "rules_test.yml")
    assert (
        _ett("alerts", "export-prometheus", "-o", str(tmp_path / "ett-rules.yml")).returncode == 0
    )
    run = subprocess.run(
        [promtool, "test", "rules", "rules_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr

    # the same tests fail when the effect floor moves past the planted data regression (+1.33
    # job-hours a day): they can fail
    strict = tmp_path / "strict.yml"
    strict.write_text(
        "rules:\n  - name: regression_by_model\n    kind: regression\n    by: model\n"
        "    window: 24h\n    baseline: 7d\n    min_jobs: 3\n    min_baseline_jobs: 10\n"
        "    min_gpu_hours_per_day: 2\n"
    )
    export = _ett(
        "alerts", "export-prometheus", "--rules", str(strict), "-o", str(tmp_path / "ett-rules.yml")
    )
    assert export.returncode == 0, export.stderr
    run = subprocess.run(
        [promtool, "test", "rules", "rules_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "alertname: regression_by_model, time: 15m" in run.stdout + run.stderr


def _fleet_series(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("ett_fleet_")]


def test_metrics_pass_promtool_and_series_do_not_grow_with_jobs(tmp_path: Path) -> None:
    promtool = need("promtool")
    now = time.time()
    counts = []
    for hours in (6, 48):
        store = Store(f"sqlite:///{tmp_path / f'{hours}.db'}")
        store.upgrade()
        load(store, list(fleet(now - hours * HOUR - 2 * HOUR, hours)))
        metrics = CollectorMetrics()
        metrics.register_shared(FleetMetrics(store.engine, ttl_s=0))
        text = metrics.exposition().decode()
        check = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
        )
        assert check.returncode == 0, check.stdout + check.stderr
        series = _fleet_series(text)
        assert 'ett_fleet_ett_ratio{model="dlrm",team="ads",window="24h"}' in text
        # the last hour holds no job time: no ratio (a 0 read as "ETT 0 %" on a dashboard)
        assert 'ett_fleet_wall_seconds{model="dlrm",team="ads",window="1h"} 0.0' in text
        assert 'ett_fleet_ett_ratio{model="dlrm",team="ads",window="1h"}' not in text
        assert (
            'ett_fleet_lost_seconds{component="data",model="dlrm",team="ads",window="1h"}' in text
        )
        counts.append(len(series))
    pairs = 2  # (dlrm, ads) and (ranker, feed)
    assert counts[0] == counts[1] <= pairs * SERIES_PER_PAIR  # 8x the jobs, the same series


def test_prometheus_and_the_evaluator_reach_alertmanager(tmp_path: Path) -> None:
    need("prometheus")
    need("prometheus-alertmanager")
    now = time.time()
    url = f"sqlite:///{tmp_path / 'collector.db'}"
    store = Store(url)
    store.upgrade()
    load(store, list(fleet(now - 41 * HOUR, 40, regress=Regress("dlrm", now - 6 * HOUR, now))))
    store.close()
    rules = tmp_path / "rules.yml"
    rules.write_text(data_rules(defaults=True))
    assert (
        _ett(
            "alerts",
            "export-prometheus",
            "--rules",
            str(rules),
            "-o",
            str(tmp_path / "ett-rules.yml"),
        ).returncode
        == 0
    )

    hook = Webhook()
    am, am_url = start_alertmanager(tmp_path, hook.url)
    serve, serve_url = start_serve(
        url,
        tmp_path,
        "--alert-rules",
        str(rules),
        "--alert-interval",
        "1s",
        "--alertmanager",
        am_url,
    )
    prom, _ = start_prometheus(
        tmp_path, serve_url.removeprefix("http://"), tmp_path / "ett-rules.yml", am_url
    )
    try:

        def both() -> bool:
            sources = {
                a["labels"].get("source", "ett")
                for a in hook.alerts
                if a["labels"].get("alertname") == "data_regression"
                and a["labels"].get("model") == "dlrm"
                and a["labels"].get("component") == "data"
            }
            return sources == {"ett", "prometheus"}

        wait_for(both, WAIT_S, "data_regression from ett serve and from Prometheus at the webhook")
        ours = next(
            a
            for a in hook.alerts
            if "source" not in a["labels"] and a["labels"].get("alertname") == "data_regression"
        )
        assert ours["status"] == "firing"
        assert "dlrm-" in ours["annotations"]["jobs"]
        assert "data lost" in ours["annotations"]["description"]
        with urllib.request.urlopen(serve_url + "/api/v1/alerts?state=firing", timeout=10) as r:
            firing = json.loads(r.read())
        assert any(a["rule"] == "data_regression" for a in firing)
    finally:
        for p in (prom, serve, am):
            p.stop()
        hook.stop()


def test_alerts_made_while_alertmanager_is_down_are_delivered_later(tmp_path: Path) -> None:
    need("prometheus-alertmanager")
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    store.upgrade()
    start = time.time() - 40 * HOUR  # the regression and its end are in the past
    onset = start + 24 * HOUR
    load(store, list(fleet(start, 36, regress=Regress("ranker", onset, onset + 3 * HOUR))))
    rules = tmp_path / "rules.yml"
    rules.write_text(data_rules())
    port = free_port()
    service = AlertService(store.engine, load_rules(rules), 30.0, f"http://127.0.0.1:{port}")
    first_end = onset + 5 * HOUR / 4  # after the first regressed job of ranker ended
    service.evaluate_once(first_end)
    assert [a.state for a in service.store.alerts()] == [AlertState.FIRING]
    with pytest.raises(DeliveryError):
        service.deliver_once(first_end)
    assert len(service.store.outbox(time.time(), 30.0)) == 1  # kept for later

    hook = Webhook()
    am, _ = start_alertmanager(tmp_path, hook.url, port)
    try:
        assert service.deliver_once() == 1
        assert service.store.outbox(time.time(), 30.0) == []
        wait_for(lambda: hook.alerts, WAIT_S, "the webhook to hear of the alert")
        assert hook.alerts[0]["labels"]["model"] == "ranker"
        assert hook.alerts[0]["labels"]["component"] == "data"

        service.evaluate_once(onset + 8 * HOUR)  # the regression is over
        assert [a.state for a in service.store.alerts()] == [AlertState.RESOLVED]
        assert service.deliver_once() == 1
        wait_for(lambda: any(a["status"] == "resolved" for a in hook.alerts), WAIT_S, "resolved")
    finally:
        am.stop()
        hook.stop()


def test_exported_sums_count_each_series_once_over_collectors() -> None:
    """Two collectors on one database both expose the fleet series: the exported rules' sums
    counted them twice (65 jobs read 130, thresholds halved, '2 job(s) presumed dead' for 1)."""
    import re

    from ett_collector.alerts.prometheus import prometheus_rule

    user = load_rules(HERE / "promtool" / "burn_rules.yml")
    exprs = [prometheus_rule(r)["expr"] for r in user.enabled() if r.kind.value != "straggler"]
    exprs += [prometheus_rule(r)["expr"] for r in load_rules().enabled()]
    text = "\n".join(exprs)
    assert "ett_fleet_" in text
    assert not re.search(r"sum by \([^)]*\) \(ett_fleet_", text), text
    assert "sum by (model) (max without (instance, job) (ett_fleet_" in text
