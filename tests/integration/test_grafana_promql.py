"""Every PromQL expression of the Grafana dashboards runs on a real Prometheus scraping a live
`ett serve` and returns series."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
import yaml

from ett_grafana._provisioning import render
from tests.support.collector_process import Collector, start_collector
from tests.support.performance_seed import perf_job
from tests.support.ports import free_port
from tests.support.replay import send_spans
from tests.support.waits import wait_until
from tests.support.worked_example import worked_example

pytestmark = [pytest.mark.prometheus, pytest.mark.e2e]

MISSING = (
    "prometheus binary not found; run `make test` (it installs the Debian package) or "
    "apt-get install prometheus"
)


def _expressions() -> list[str]:
    out = []
    for path, text in sorted(render().items()):
        if path.endswith(".json"):
            for panel in json.loads(text)["panels"]:
                for target in panel.get("targets", []):
                    if target["datasource"]["type"] == "prometheus":
                        out.append(target["expr"])
    return out


def _alert_expressions() -> list[str]:
    rules = yaml.safe_load(render()["alerting/ett-rules.yaml"])["groups"][0]["rules"]
    return [r["data"][0]["model"]["expr"] for r in rules]


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    c = start_collector(tmp_path_factory.mktemp("grafana-promql") / "ett-home")
    yield c
    c.stop()


@pytest.fixture(scope="module")
def prometheus(collector: Collector, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    root = tmp_path_factory.mktemp("prometheus")
    target = collector.url.removeprefix("http://")
    (root / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: ett-collector\n    static_configs: [{{targets: ['{target}']}}]\n"
    )
    port = free_port()
    log = open(root / "prometheus.log", "wb")  # noqa: SIM115 - lives with the process
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: httpx.get(url + "/-/ready", timeout=1).status_code == 200,
            60,
            "Prometheus to be ready",
            interval=0.5,
            ignore=(httpx.HTTPError,),
            detail=lambda: (root / "prometheus.log").read_text()[-2000:],
        )
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_the_dashboards_have_promql_panels() -> None:
    assert len(_expressions()) >= 4


def test_every_promql_expression_returns_series(collector: Collector, prometheus: str) -> None:
    base = time.time() - 600
    assert send_spans(worked_example("promql-job", base), collector.url) > 0
    assert collector.job("promql-job")["ett_pct"] == pytest.approx(60.0)  # recomputed: observed
    # a job with training windows: the per-model loop gauges (ett_model_*, issue 26)
    assert send_spans(perf_job("promql-loop", "dlrm", base), collector.url) > 0
    assert collector.job("promql-loop")["productive_s"] > 0
    pending = set(_expressions())
    results: dict[str, list[object]] = {}

    def all_answer() -> bool:
        for expr in sorted(pending):
            r = httpx.get(prometheus + "/api/v1/query", params={"query": expr}, timeout=5)
            assert r.status_code == 200, (expr, r.text)  # a bad expression fails here at once
            body = r.json()
            assert body["status"] == "success", (expr, body)
            if body["data"]["result"]:
                results[expr] = body["data"]["result"]
                pending.discard(expr)
        return not pending

    wait_until(
        all_answer,
        90,
        "series from every expression",
        interval=0.5,
        ignore=(httpx.HTTPError,),
        detail=lambda: sorted(pending),
    )
    assert set(results) == set(_expressions())


def test_alert_rule_expressions_evaluate_on_prometheus(prometheus: str) -> None:
    """The Grafana rules' PromQL parses and evaluates (a quiet fleet: no series, no alert)."""
    exprs = _alert_expressions()
    assert exprs
    for expr in exprs:
        r = httpx.get(prometheus + "/api/v1/query", params={"query": expr}, timeout=5)
        assert r.status_code == 200 and r.json()["status"] == "success", (expr, r.text)
