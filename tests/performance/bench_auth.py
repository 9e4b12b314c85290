"""What the credential check costs a request, beside no check at all.

One ASGI request through :class:`AuthMiddleware` in front of a trivial app (no database, no
network: the check alone), with auth off, a valid read token among 1 and 50 configured ones, a
wrong token, and a banned address. Prints microseconds per request side by side.

    .venv/bin/python -m tests.performance.bench_auth
    .venv/bin/python -m pytest tests/performance/bench_auth.py -m performance -s
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest

from ett_collector.api._auth import AuthMiddleware, guard_for
from ett_collector.security import AuthSettings, Scope, ScopeTokens

N = 20_000


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"[]"})


def _per_request_us(app: Any, token: str | None, client: str = "10.0.0.1") -> float:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/jobs",
        "query_string": b"",
        "headers": headers,
        "client": (client, 1),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        return None

    async def run() -> float:
        start = time.perf_counter()
        for _ in range(N):
            await app(scope, receive, send)
        return time.perf_counter() - start

    return asyncio.run(run()) / N * 1e6


def _app(tokens: int, max_failures: int = 10**9) -> tuple[Any, str]:
    reads = tuple(secrets.token_hex(16) for _ in range(tokens))
    auth = AuthSettings({Scope.READ: ScopeTokens(reads)}, max_failures=max_failures)
    guard = guard_for(None, auth, lambda reason: None)
    return AuthMiddleware(_ok, guard, lambda status: None), reads[-1]


def run() -> dict[str, float]:
    """Microseconds per request for each case."""
    one, token = _app(1)
    fifty, token50 = _app(50)
    banning, _ = _app(1, max_failures=1)
    _per_request_us(banning, "x" * 32, "10.9.9.9")  # bans it on the first
    return {
        "no check (inner app alone)": _per_request_us(_ok, None),
        "valid read token, 1 configured": _per_request_us(one, token),
        "valid read token, 50 configured": _per_request_us(fifty, token50),
        "wrong token, 1 configured": _per_request_us(one, "x" * 32),
        "banned address": _per_request_us(banning, "x" * 32, "10.9.9.9"),
    }


def _print(figures: dict[str, float]) -> None:
    print(f"\n{'case':<34} {'us/request':>10}")
    for case, us in figures.items():
        print(f"{case:<34} {us:>10.2f}")


@pytest.mark.performance
def test_bench_auth() -> None:
    figures = run()
    _print(figures)
    assert all(us > 0 for us in figures.values())


if __name__ == "__main__":
    _print(run())
