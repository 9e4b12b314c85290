"""A real `ett serve` over TLS, with scoped token files, tried by an outsider: plain HTTP to the
TLS port, a client that trusts another CA, an expired server certificate, and (with client
certificates required) no certificate, an expired one, one from another CA. Each is refused and
nothing is stored; the library (``OTEL_EXPORTER_OTLP_CERTIFICATE`` and the client certificate
settings) and the dashboard's client (a CA bundle) get through with the right ones.

The CAs are made here, with the ``openssl`` command (tests/support/pki.py).
"""

from __future__ import annotations

import os
import secrets
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.collector_process import stop_process
from tests.support.pki import Authority, Pair
from tests.support.ports import free_port
from tests.support.replay import encode_request
from tests.support.waits import wait_until
from tests.support.worked_example import worked_example

pytestmark = pytest.mark.e2e

WRITE, READ = secrets.token_hex(16), secrets.token_hex(16)
PROTO = {"content-type": "application/x-protobuf"}


@dataclass(frozen=True)
class Pki:
    ca: Authority
    other: Authority
    server: Pair
    expired_server: Pair
    client: Pair
    expired_client: Pair
    other_client: Pair


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca, other = Authority.make(root, "ett-test-ca"), Authority.make(root, "other-ca")
    return Pki(
        ca,
        other,
        ca.issue("server"),
        ca.issue("old-server", expired=True),
        ca.issue("client"),
        ca.issue("old-client", expired=True),
        other.issue("other-client"),
    )


def _context(ca: Path | None, client: Pair | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    if ca is None:  # only to see that a server is up, whatever its certificate
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    return context


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    ca: Path
    client: Pair | None

    def get(self, path: str, token: str = READ) -> httpx.Response:
        verify = _context(self.ca, self.client)
        headers = {"Authorization": f"Bearer {token}"}
        return httpx.get(self.url + path, headers=headers, verify=verify, timeout=30)

    def spans(self) -> int:
        return int(self.get("/healthz").json()["spans"])


def _serve(home: Path, server: Pair, pki: Pki, client_ca: Path | None = None) -> Server:
    home.mkdir(parents=True)
    files = []
    for name, token in (("write", WRITE), ("read", READ)):
        path = home / f"{name}.tokens"
        path.write_text(token + "\n")
        path.chmod(0o600)
        files += [f"--{name}-tokens", str(path)]
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "ett_cli",
        "serve",
        "--port",
        str(port),
        "--db",
        f"sqlite:///{home / 'c.db'}",
        "--tls-cert",
        str(server.cert),
        "--tls-key",
        str(server.key),
        *files,
    ]
    if client_ca is not None:
        cmd += ["--tls-client-ca", str(client_ca)]
    env = {**os.environ, "ETT_HOME": str(home), "ETT_LIVE_REFRESH_S": "1"}
    log = open(home / "serve.log", "ab")  # noqa: SIM115 - lives with the process
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{port}"
    up = _context(None, pki.client if client_ca else None)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, (home / "serve.log").read_text()
        try:
            httpx.get(url + "/healthz", verify=up, timeout=5)
            return Server(url, proc, pki.ca.pair.cert, pki.client if client_ca else None)
        except httpx.HTTPError:
            time.sleep(0.1)
    stop_process(proc)
    raise AssertionError("ett serve --tls-cert did not answer within 120 s")


@pytest.fixture(scope="module")
def tls(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = _serve(tmp_path_factory.mktemp("tls") / "home", pki.server, pki)
    yield s
    stop_process(s.process)


def _refused(call: object) -> bool:
    """True when the call raised a connection-level error (no HTTP answer at all)."""
    try:
        call()  # type: ignore[operator]
    except (httpx.HTTPError, ssl.SSLError, OSError):
        return True
    return False


def test_plain_http_and_an_untrusted_ca_get_nothing(tls: Server, pki: Pki) -> None:
    body = encode_request(worked_example("plain-http", base=1_790_000_000.0))
    plain = tls.url.replace("https://", "http://") + "/v1/traces"
    auth = {"Authorization": f"Bearer {WRITE}", **PROTO}
    assert _refused(lambda: httpx.post(plain, content=body, headers=auth, timeout=10))
    wrong_ca = _context(pki.other.pair.cert)
    assert _refused(
        lambda: httpx.post(
            tls.url + "/v1/traces", content=body, headers=auth, verify=wrong_ca, timeout=10
        )
    )
    assert tls.spans() == 0
    # the right CA and a read token: TLS passes, the token does not
    read = httpx.post(
        tls.url + "/v1/traces",
        content=body,
        verify=_context(pki.ca.pair.cert),
        headers={"Authorization": f"Bearer {READ}", **PROTO},
        timeout=10,
    )
    assert read.status_code == 403
    assert tls.spans() == 0


_JOB = """
import sys, ett
sess = ett.init(job_id=sys.argv[1], endpoint=sys.argv[2], install_handlers=False)
with sess.eval():
    pass
sess.end()
print(sess.dropped_spans)
"""


def _library_job(job_id: str, url: str, spool: Path, **env: str) -> int:
    """Run a tiny job with the library in its own process (one exporter per process); the
    spans it dropped."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_EXPORTER_OTLP_", "ETT_"))
    }
    clean.update(
        {
            "ETT_TOKEN": WRITE,
            "ETT_SPOOL_DIR": str(spool),
            "ETT_EXIT_TIMEOUT_S": "0",
            "ETT_FLUSH_TIMEOUT_S": "60",
            **env,
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", _JOB, job_id, url],
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert WRITE not in out.stdout + out.stderr  # the token is never printed
    _LOGS.append(out.stderr)
    return int(out.stdout.strip().splitlines()[-1])


_LOGS: list[str] = []


def test_the_library_verifies_the_collector_with_otlp_certificate(
    tls: Server, pki: Pki, tmp_path: Path
) -> None:
    _library_job(
        "tls-wrong-ca",
        tls.url,
        tmp_path / "s1",
        ETT_FLUSH_TIMEOUT_S="3",
        OTEL_EXPORTER_OTLP_CERTIFICATE=str(pki.other.pair.cert),
    )
    assert tls.get("/api/v1/jobs/tls-wrong-ca").status_code == 404
    dropped = _library_job(
        "tls-right-ca",
        tls.url,
        tmp_path / "s2",
        OTEL_EXPORTER_OTLP_CERTIFICATE=str(pki.ca.pair.cert),
    )
    assert dropped == 0
    wait_until(
        lambda: tls.get("/api/v1/jobs/tls-right-ca").status_code == 200,
        60,
        "the job over TLS",
        interval=0.2,
        detail=lambda: _LOGS[-1],
    )


def test_the_dashboard_client_trusts_only_its_ca_bundle(tls: Server, pki: Pki) -> None:
    from ett_dashboard.client import ApiError, _fetch
    from ett_dashboard.settings import DashboardSettings

    good = DashboardSettings(api_url=tls.url, token=READ, ca_bundle=str(pki.ca.pair.cert))
    assert isinstance(_fetch(good, "/api/v1/jobs", ()), list)
    for settings, words in (
        (DashboardSettings(api_url=tls.url, token=READ), "ca-bundle"),
        (
            DashboardSettings(api_url=tls.url, token=READ, ca_bundle=str(pki.other.pair.cert)),
            "ca-bundle",
        ),
        (
            DashboardSettings(api_url=tls.url, token=WRITE, ca_bundle=str(pki.ca.pair.cert)),
            "read token",
        ),
    ):
        with pytest.raises(ApiError) as info:
            _fetch(settings, "/api/v1/jobs", ())
        assert words in info.value.message
        assert READ not in info.value.message and WRITE not in info.value.message


def test_an_expired_server_certificate_is_refused(pki: Pki, tmp_path: Path) -> None:
    s = _serve(tmp_path / "home", pki.expired_server, pki)
    try:
        try:
            s.get("/api/v1/jobs")
        except httpx.ConnectError as exc:
            assert "expired" in str(exc)
        else:
            raise AssertionError("a client accepted an expired server certificate")
    finally:
        stop_process(s.process)


def test_client_certificates_when_the_collector_asks_for_them(pki: Pki, tmp_path: Path) -> None:
    s = _serve(tmp_path / "home", pki.server, pki, client_ca=pki.ca.pair.cert)
    try:
        body = encode_request(worked_example("mtls", base=1_790_000_000.0))
        auth = {"Authorization": f"Bearer {WRITE}", **PROTO}
        for client in (None, pki.expired_client, pki.other_client):
            verify = _context(pki.ca.pair.cert, client)
            assert _refused(
                lambda v=verify: httpx.post(
                    s.url + "/v1/traces", content=body, headers=auth, verify=v, timeout=10
                )
            ), client
        assert s.spans() == 0
        dropped = _library_job(
            "mtls-library",
            s.url,
            tmp_path / "spool",
            OTEL_EXPORTER_OTLP_CERTIFICATE=str(pki.ca.pair.cert),
            OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE=str(pki.client.cert),
            OTEL_EXPORTER_OTLP_CLIENT_KEY=str(pki.client.key),
        )
        assert dropped == 0
        wait_until(
            lambda: s.get("/api/v1/jobs/mtls-library").status_code == 200,
            60,
            "the library's spans over mTLS",
            interval=0.2,
        )
    finally:
        stop_process(s.process)


@pytest.mark.prometheus
def test_prometheus_scrapes_over_tls_with_a_read_token_only(
    tls: Server, pki: Pki, tmp_path: Path
) -> None:
    """A real Prometheus: the scrape job with the read token is up; the one with the write
    token is down (403)."""
    import json
    import urllib.parse
    import urllib.request

    from tests.alerts.processes import Process, http_ok, need, wait_for

    binary = need("prometheus")
    jobs, target = "", tls.url.removeprefix("https://")
    for name, token in (("reader", READ), ("writer", WRITE)):
        path = tmp_path / f"{name}.token"
        path.write_text(token)
        path.chmod(0o600)
        jobs += (
            f"  - job_name: {name}\n    scheme: https\n"
            f"    tls_config: {{ca_file: '{pki.ca.pair.cert}'}}\n"
            f"    authorization: {{credentials_file: '{path}'}}\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n"
        )
    config = tmp_path / "prometheus.yml"
    config.write_text(f"global:\n  scrape_interval: 1s\nscrape_configs:\n{jobs}")
    port = free_port()
    cmd = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    p = Process(cmd, tmp_path / "prometheus.log")
    url = f"http://127.0.0.1:{port}"

    def up() -> dict[str, str] | None:
        q = urllib.parse.urlencode({"query": "up"})
        with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as r:
            result = json.load(r)["data"]["result"]
        got = {s["metric"]["job"]: s["value"][1] for s in result}
        return got if len(got) == 2 else None

    try:
        wait_for(lambda: http_ok(url + "/-/ready"), 120, "Prometheus")
        assert wait_for(up, 120, "both scrape jobs") == {"reader": "1", "writer": "0"}
    finally:
        p.stop()
