"""An outsider against the whole app (alerts included), in process on SQLite: every route the
app has is tried, so a route added later is covered without touching this file.

No token, a wrong one, a read token on ingest, a write token on every read route, a token in the
query string, a burst of wrong tokens: each refused with its status, nothing stored, no token in
the answer, the log or ``/metrics``; the right scope passes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import re
import secrets
from pathlib import Path

import httpx
import pytest
from google.protobuf.json_format import MessageToJson
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from starlette.applications import Starlette
from starlette.routing import Route

from ett_collector.api._auth import PUBLIC
from ett_collector.api._factory import build_app
from ett_collector.security import AuthSettings, Scope, ScopeTokens
from ett_collector.settings import Settings
from ett_collector.storage import Store
from tests.support.replay import encode_request, sdk_spans
from tests.support.waits import wait_until
from tests.support.worked_example import worked_example

FULL = "legacy-" + secrets.token_hex(8)
WRITE, READ, ADMIN = (secrets.token_hex(16) for _ in range(3))
ALL = (FULL, WRITE, READ, ADMIN)


def _app(tmp_path: Path, read_file: Path | None = None) -> tuple[Starlette, Store]:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    Store(db).upgrade()
    scopes = {
        Scope.WRITE: ScopeTokens((WRITE,)),
        Scope.READ: ScopeTokens((READ,), read_file),
        Scope.ADMIN: ScopeTokens((ADMIN,)),
    }
    settings = Settings(db_url=db, token=FULL, auth=AuthSettings(scopes, max_failures=5))
    app = build_app(settings)
    return app, app.state.pipeline.store


def _call(
    app: Starlette,
    method: str,
    path: str,
    token: str | None = None,
    address: str = "10.0.0.1",
    **kw: object,
) -> httpx.Response:
    headers = dict(kw.pop("headers", {}) or {})  # type: ignore[call-overload]
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(address, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.request(method, path, headers=headers, **kw)  # type: ignore[arg-type]

    return asyncio.run(go())


def _routes(app: Starlette) -> list[tuple[str, str]]:
    """(method, concrete path) of every route of the app (path parameters filled in)."""
    out = []
    for route in app.routes:
        assert isinstance(route, Route), f"not a plain route: {route!r}: extend this test"
        path = re.sub(r"\{[^}]*\}", "x", route.path)
        for method in sorted(route.methods or {"GET"}):
            if method != "HEAD":
                out.append((method, path))
    return out


def _otlp_status(r: httpx.Response) -> Status:
    status = Status()
    status.ParseFromString(r.content)
    return status


def _assert_clean(r: httpx.Response) -> None:
    for token in ALL:
        assert token not in r.text


def test_every_route_refuses_the_wrong_credentials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    app, store = _app(tmp_path)
    routes = _routes(app)
    assert ("POST", "/v1/traces") in routes and ("GET", "/api/v1/alerts") in routes
    body = encode_request(worked_example("outsider", base=1_790_000_000.0))
    proto = {"content-type": "application/x-protobuf"}
    for n, (method, path) in enumerate(routes):
        outsider = f"10.1.0.{n}"  # one address per route: the burst ban is tested below
        if path in PUBLIC:
            assert _call(app, method, path).status_code == 200, path
            continue
        ingest = path == "/v1/traces"
        kw = {"content": body, "headers": proto} if ingest else {}
        none = _call(app, method, path, address=outsider, **kw)  # type: ignore[arg-type]
        assert none.status_code == 401, (path, none.text)
        assert none.headers["www-authenticate"].startswith("Bearer")
        wrong = _call(app, method, path, "x" * 32, address=outsider, **kw)  # type: ignore[arg-type]
        assert wrong.status_code == 401, (path, wrong.text)
        url = path + f"?token={READ}&access_token={WRITE}"
        in_url = _call(app, method, url, address=outsider, **kw)  # type: ignore[arg-type]
        assert in_url.status_code == 401 and "URL" in in_url.text, path
        wrong_scope = (READ, ADMIN) if ingest else (WRITE,)
        for token in wrong_scope:
            r = _call(app, method, path, token, address="10.0.0.2", **kw)  # type: ignore[arg-type]
            assert r.status_code == 403, (path, token[:4], r.text)
            _assert_clean(r)
        for r in (none, wrong, in_url):
            _assert_clean(r)
            if ingest:  # OTLP's status format, as the request: protobuf
                assert r.headers["content-type"] == "application/x-protobuf"
                assert _otlp_status(r).code == 16  # UNAUTHENTICATED
            else:
                assert r.json()["status"] == 401
        right = WRITE if ingest else READ
        passed = _call(app, method, path, right, address="10.0.0.3", **kw)  # type: ignore[arg-type]
        assert passed.status_code not in (401, 403, 429), (path, passed.text)
    counts = store.span_counts()
    assert counts["spans"] > 0  # the write token's one ingest, and only it
    stored = counts["spans"]
    assert len(worked_example("outsider")) == stored
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "asyncio"))]
    text = "\n".join(ours) + _call(app, "GET", "/metrics", READ, address="10.0.0.3").text
    for token in ALL:
        assert token not in text
    store.close()


def test_ingest_refusals_speak_otlp_json_and_store_nothing(tmp_path: Path) -> None:
    app, store = _app(tmp_path)
    records = worked_example("outsider-json", base=1_790_000_000.0)
    body = MessageToJson(encode_spans(sdk_spans(records))).encode()
    h = {"content-type": "application/json"}
    read = _call(app, "POST", "/v1/traces", READ, content=body, headers=h)
    assert read.status_code == 403 and read.headers["content-type"] == "application/json"
    assert read.json()["code"] == 7  # PERMISSION_DENIED
    none = _call(app, "POST", "/v1/traces", content=body, headers=h)
    assert none.status_code == 401 and none.json()["code"] == 16
    assert store.span_counts()["spans"] == 0
    proto = {"content-type": "application/x-protobuf"}
    ok = _call(app, "POST", "/v1/traces", FULL, content=encode_request(records), headers=proto)
    assert ok.status_code == 200
    assert _call(app, "GET", "/api/v1/jobs", FULL).status_code == 200
    assert store.span_counts()["spans"] == len(records)
    # an admin route (any method other than GET on a read path) needs the admin token
    assert _call(app, "POST", "/api/v1/jobs", READ).status_code == 403
    assert _call(app, "POST", "/api/v1/jobs", ADMIN).status_code == 405  # passed, no such method
    store.close()


def test_a_burst_of_wrong_tokens_is_banned_and_counted(tmp_path: Path) -> None:
    app, store = _app(tmp_path)
    statuses = [
        _call(app, "GET", "/api/v1/jobs", f"guess-{n:026d}", address="10.9.9.9").status_code
        for n in range(7)
    ]
    assert statuses[:5] == [401] * 5 and statuses[5:] == [429, 429]
    banned = _call(app, "GET", "/api/v1/jobs", address="10.9.9.9")  # no token: banned too
    assert banned.status_code == 429 and int(banned.headers["retry-after"]) >= 1
    assert _call(app, "GET", "/api/v1/jobs", READ, address="10.9.9.8").status_code == 200
    metrics = _call(app, "GET", "/metrics", READ, address="10.9.9.8").text
    assert 'ett_auth_refusals_total{reason="wrong"} 5.0' in metrics
    assert 'ett_auth_refusals_total{reason="banned"} 3.0' in metrics
    store.close()


def test_valid_tokens_pass_from_a_banned_address(tmp_path: Path) -> None:
    """One client's wrong tokens ban its address, not the other clients behind it."""
    app, store = _app(tmp_path)
    here = "127.0.0.1"
    for n in range(5):  # max_failures: the address is banned
        _call(app, "GET", "/api/v1/jobs", f"stale-{n:026d}", address=here)
    assert _call(app, "GET", "/api/v1/jobs", "stale-" + "9" * 26, address=here).status_code == 429
    body = encode_request(worked_example("banned-address", base=1_790_000_000.0))
    proto = {"Content-Type": "application/x-protobuf"}
    sent = _call(app, "POST", "/v1/traces", WRITE, address=here, content=body, headers=proto)
    assert sent.status_code == 200, sent.text
    for token in (READ, FULL):
        assert _call(app, "GET", "/api/v1/jobs", token, address=here).status_code == 200
    assert _call(app, "GET", "/api/v1/jobs", WRITE, address=here).status_code == 403
    in_url = _call(app, "GET", f"/api/v1/jobs?token={READ}", READ, address=here)
    assert in_url.status_code == 429  # a credential in the URL is no valid request
    store.close()


def test_a_token_file_rotates_without_restart(tmp_path: Path) -> None:
    tokens = tmp_path / "read.tokens"
    old, new = secrets.token_hex(16), secrets.token_hex(16)
    tokens.write_text(f"# dashboard\n{old}\n")
    os.chmod(tokens, 0o600)
    app, store = _app(tmp_path, read_file=tokens)
    assert _call(app, "GET", "/api/v1/facets", old).status_code == 200
    assert _call(app, "GET", "/api/v1/facets", new, address="10.0.0.7").status_code == 401
    tokens.write_text(f"{old}\n{new}\n")  # both valid while clients move
    addresses = (f"10.2.0.{n % 250}" for n in itertools.count())  # wrong tokens would ban one
    wait_until(
        lambda: (
            _call(app, "GET", "/api/v1/facets", new, address=next(addresses)).status_code == 200
        ),
        10,
        "the new token to be valid",
        interval=0.1,
    )
    assert _call(app, "GET", "/api/v1/facets", old).status_code == 200
    tokens.write_text(f"{new}\n" + " " * 8)  # the old one retired (another size: a change)
    wait_until(
        lambda: _call(app, "GET", "/api/v1/facets", old, address="10.0.0.8").status_code != 200,
        10,
        "the old token to be retired",
        interval=0.1,
    )
    assert _call(app, "GET", "/api/v1/facets", new).status_code == 200
    store.close()


def test_bad_credential_settings_fail_fast(tmp_path: Path) -> None:
    from ett_collector.settings import ConfigError

    loose = tmp_path / "loose.tokens"
    loose.write_text(secrets.token_hex(16))
    os.chmod(loose, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        Settings(auth=AuthSettings({Scope.READ: ScopeTokens((), loose)}))
    with pytest.raises(ConfigError, match="at least 16"):
        Settings(auth=AuthSettings({Scope.READ: ScopeTokens(("short",))}))
    same = secrets.token_hex(16)
    with pytest.raises(ConfigError, match="both a write and a read") as info:
        Settings(
            auth=AuthSettings({Scope.WRITE: ScopeTokens((same,)), Scope.READ: ScopeTokens((same,))})
        )
    assert same not in str(info.value)
    assert FULL not in repr(Settings(token=FULL))
    assert json.dumps(str(AuthSettings({Scope.READ: ScopeTokens((same,))}))).count(same) == 0
