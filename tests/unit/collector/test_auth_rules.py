"""The pieces of the credential check: the scope each request needs, credentials in a URL, the
bearer header, and the wrong-token ban (on a clock of our own)."""

from __future__ import annotations

import pytest

from ett_collector.api import _bans
from ett_collector.api._auth import bearer, credentials_in_url, required_scope
from ett_collector.api._bans import Bans
from ett_collector.security import Scope, parse_tokens


def test_every_request_needs_a_scope_but_the_probes() -> None:
    assert required_scope("GET", "/healthz") is None and required_scope("GET", "/readyz") is None
    assert required_scope("POST", "/v1/traces") is Scope.WRITE
    assert required_scope("GET", "/v1/traces") is Scope.WRITE  # the path decides, not the method
    for path in ("/metrics", "/api/v1/jobs", "/api/v1/new-route-added-later", "/"):
        assert required_scope("GET", path) is Scope.READ
        assert required_scope("HEAD", path) is Scope.READ
        assert required_scope("POST", path) is Scope.ADMIN
        assert required_scope("DELETE", path) is Scope.ADMIN
    assert required_scope("POST", "/healthz") is None


def test_credentials_in_the_url_are_seen_whatever_their_case() -> None:
    assert credentials_in_url(b"Token=abc")
    assert credentials_in_url(b"limit=5&access_token=")
    assert credentials_in_url(b"API_KEY=x")
    assert not credentials_in_url(b"")
    assert not credentials_in_url(b"state=running&tokens_seen=3")


def test_the_bearer_header() -> None:
    assert bearer([(b"authorization", b"Bearer abc")]) == "abc"
    assert bearer([(b"authorization", b"bearer  abc ")]) == "abc"
    assert bearer([(b"authorization", b"Basic abc")]) is None
    assert bearer([(b"authorization", b"Bearer ")]) is None
    assert bearer([]) is None


def test_tokens_split_on_commas_and_space_and_files_take_comments() -> None:
    assert parse_tokens("a, b\nc") == ["a", "b", "c"]
    assert parse_tokens("# old\nnew  # since Monday\n\n", comments=True) == ["new"]


def test_a_ban_starts_at_the_limit_and_ends_after_its_time() -> None:
    now = [1000.0]
    bans = Bans(max_failures=3, ban_s=60.0, clock=lambda: now[0])
    for _ in range(2):
        bans.failed("10.0.0.1")
    assert bans.banned_for("10.0.0.1") is None
    bans.failed("10.0.0.1")
    assert bans.banned_for("10.0.0.1") == 60 and bans.banned_addresses() == 1
    assert bans.banned_for("10.0.0.2") is None  # per address
    now[0] += 59.5
    assert bans.banned_for("10.0.0.1") == 1
    now[0] += 1.0
    assert bans.banned_for("10.0.0.1") is None
    bans.failed("10.0.0.1")  # a new window: one failure is not a ban
    assert bans.banned_for("10.0.0.1") is None


def test_failures_spread_thinner_than_the_window_never_ban() -> None:
    now = [0.0]
    bans = Bans(max_failures=3, ban_s=10.0, clock=lambda: now[0])
    for _ in range(10):
        bans.failed("10.0.0.1")
        now[0] += 6.0
    assert bans.banned_for("10.0.0.1") is None


def test_the_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bans, "MAX_ADDRESSES", 100)
    bans = Bans(max_failures=1, ban_s=60.0)
    for n in range(250):
        bans.failed(f"10.0.0.{n}")
    assert bans.banned_addresses() == 100
    assert bans.banned_for("10.0.0.249") is not None  # the newest are kept
    assert bans.banned_for("10.0.0.0") is None  # the oldest forgotten
