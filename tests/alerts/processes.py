"""Real processes for the alert tests: ``ett serve``, Prometheus, Alertmanager and a webhook
receiver, each on a free 127.0.0.1 port. Missing binaries skip the test with how to get them, or
fail it under ``CI=true``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.collector_process import WAIT_S
from tests.support.ports import free_port
from tests.support.waits import wait_until

MISSING = (
    "{name} not found; run `make setup` (scripts/setup-system.sh installs it) or "
    "apt-get install -y prometheus prometheus-alertmanager"
)


def need(binary: str) -> str:
    """The path of ``binary``; skip (fail under CI) when it is missing."""
    path = shutil.which(binary)
    if path is None:
        message = MISSING.format(name=binary)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """``check()``'s first truthy value (an OSError, a server not up yet, counts as "not yet")."""
    return wait_until(check, timeout, what, interval=0.2, ignore=(OSError,))


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as r:
        return bool(r.status == 200)


class Process:
    """A started subprocess with its log file, stopped by :meth:`stop`."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 - lives with the process
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, env=env)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def start_serve(db_url: str, home: Path, *args: str) -> tuple[Process, str]:
    """``ett serve`` on a free port; returns it and its base URL once /healthz answers."""
    port = free_port()
    env = {**os.environ, "ETT_HOME": str(home)}
    cmd = [sys.executable, "-m", "ett_cli", "serve", "--port", str(port), "--db", db_url, *args]
    p = Process(cmd, home / f"serve-{port}.log", env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: p.proc.poll() is None and http_ok(url + "/healthz"), WAIT_S, "ett serve")
    except AssertionError:
        p.stop()
        raise AssertionError("ett serve did not start:\n" + p.tail()) from None
    return p, url


def start_alertmanager(
    root: Path, webhook_url: str, port: int | None = None
) -> tuple[Process, str]:
    """A real Alertmanager routing every alert to ``webhook_url`` at once."""
    binary = need("prometheus-alertmanager")
    port = port or free_port()
    config = root / "alertmanager.yml"
    config.write_text(
        "route:\n  receiver: hook\n  group_by: ['alertname', 'source']\n  group_wait: 1s\n"
        "  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n"
        f"    webhook_configs:\n      - url: {webhook_url}\n        send_resolved: true\n"
    )
    (root / "am-data").mkdir(exist_ok=True)
    cmd = [
        binary,
        f"--config.file={config}",
        f"--storage.path={root / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    p = Process(cmd, root / "alertmanager.log")
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: http_ok(url + "/-/ready"), WAIT_S, "Alertmanager")
    return p, url


def start_prometheus(
    root: Path, target: str, rules: Path, alertmanager: str
) -> tuple[Process, str]:
    """A real Prometheus scraping ``target`` (host:port) every second and evaluating ``rules``."""
    binary = need("prometheus")
    port = free_port()
    config = root / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "  external_labels:\n    source: prometheus\n"
        f"rule_files:\n  - {rules}\n"
        "alerting:\n  alertmanagers:\n    - static_configs:\n"
        f"        - targets: ['{alertmanager.removeprefix('http://')}']\n"
        "scrape_configs:\n  - job_name: ett\n    static_configs:\n"
        f"      - targets: ['{target}']\n"
    )
    cmd = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={root / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    p = Process(cmd, root / "prometheus.log")
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: http_ok(url + "/-/ready"), WAIT_S, "Prometheus")
    return p, url


class Webhook:
    """Alertmanager's webhook receiver: keeps every alert it is sent."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        received = self.alerts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.extend(json.loads(body).get("alerts", []))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
