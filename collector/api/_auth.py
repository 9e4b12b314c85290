"""Bearer tokens on every route: an ASGI middleware in front of the whole app.

Default deny: :func:`required_scope` gives each request the scope it needs from its method and
path alone, so a route added later is closed to the wrong tokens without a line here. Only
:data:`PUBLIC` (the probes) is open. A refusal is answered before the body is read, in OTLP's
status format on the ingest route and as ``{"error", "status"}`` elsewhere; its message never
holds the token. Tokens are compared as SHA-256 digests with :func:`hmac.compare_digest`, against
every configured token (no early exit). A token in the query string is refused whatever it is.
A valid token passes from an address banned for wrong ones (:mod:`._bans`): one client with a
stale token must not lock out the others behind the same address or proxy.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from .. import otlp
from ..security import (
    AuthSettings,
    Scope,
    SecurityConfigError,
    read_token_file,
    token_file_stamp,
)
from ._bans import Bans

log = logging.getLogger("ett_collector.auth")

PUBLIC = frozenset({"/healthz", "/readyz"})
"""Paths open to anyone: liveness and readiness probes (they hold no figures)."""
INGEST = "/v1/traces"
URL_CREDENTIALS = frozenset({"token", "access_token", "api_key", "apikey", "key", "bearer"})
"""Query parameters refused on sight: a credential in a URL ends up in proxies' logs."""
ALL_SCOPES = frozenset(Scope)


def required_scope(method: str, path: str) -> Scope | None:
    """The scope a request needs: None for :data:`PUBLIC`, ``write`` for the ingest route,
    ``read`` for any other ``GET``/``HEAD``, ``admin`` for anything else."""
    if path in PUBLIC:
        return None
    if path == INGEST:
        return Scope.WRITE
    return Scope.READ if method in ("GET", "HEAD") else Scope.ADMIN


def digest(token: str) -> bytes:
    """SHA-256 of a token: what the keyring keeps and compares."""
    return hashlib.sha256(token.encode()).digest()


class Keyring:
    """The valid tokens and their scopes; token files are re-read when they change (their
    :func:`~ett_collector.security.token_file_stamp`: times, size, mode; a ``chmod`` alone is a
    change), looked at no more than every ``check_s``. A file that breaks (gone, unreadable, too
    open) keeps its last good tokens, with a warning in the log."""

    def __init__(self, full: str | None, auth: AuthSettings, check_s: float = 1.0) -> None:
        self._fixed: list[tuple[bytes, frozenset[Scope]]] = []
        if full:
            self._fixed.append((digest(full), ALL_SCOPES))
        for scope, source in auth.scopes.items():
            self._fixed += [(digest(t), frozenset({scope})) for t in source.tokens]
        self._files = {s: src.file for s, src in auth.scopes.items() if src.file is not None}
        self._stamps: dict[Scope, tuple[int, ...]] = {}
        self._loaded: dict[Scope, list[bytes]] = {}
        self._entries = list(self._fixed)
        self._check_s = check_s
        self._next_check = 0.0
        self._lock = threading.Lock()
        self._reload(time.monotonic())

    @property
    def enabled(self) -> bool:
        """False when no token of any kind is configured: the collector is open."""
        return bool(self._fixed or self._files)

    def scopes(self, token: str) -> frozenset[Scope]:
        """The scopes ``token`` opens (empty: not a valid token)."""
        now = time.monotonic()
        if self._files and now >= self._next_check:
            self._reload(now)
        given = digest(token)
        found: set[Scope] = set()
        for known, scopes in self._entries:
            if hmac.compare_digest(given, known):  # every entry compared: no early exit
                found |= scopes
        return frozenset(found)

    def _reload(self, now: float) -> None:
        with self._lock:
            if now < self._next_check:
                return
            self._next_check = now + self._check_s
            for scope, path in self._files.items():
                self._reload_file(scope, path)
            loaded = [(d, frozenset({s})) for s, ds in self._loaded.items() for d in ds]
            self._entries = self._fixed + loaded  # one assignment: readers see old or new

    def _reload_file(self, scope: Scope, path: Path) -> None:
        try:
            st = path.stat()
        except OSError as exc:
            log.warning("token file %s: %s; its last tokens stay valid", path, exc.strerror)
            return
        stamp = token_file_stamp(st)
        if self._stamps.get(scope) == stamp:
            return
        try:
            tokens = read_token_file(path)
        except SecurityConfigError as exc:
            log.warning("%s; its last tokens stay valid", exc)
            return
        self._stamps[scope] = stamp
        self._loaded[scope] = [digest(t) for t in tokens]


@dataclass(frozen=True)
class Refusal:
    """An answer to a request that may not pass: status, message, counter reason."""

    status: int
    message: str
    reason: str
    retry_after_s: int | None = None


def credentials_in_url(query_string: bytes) -> bool:
    """True when the query string holds a parameter named like a credential."""
    if not query_string:
        return False
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    return any(name.lower() in URL_CREDENTIALS for name, _ in pairs)


def bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The token of an ``Authorization: Bearer`` header; None when there is none."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, given = value.decode("latin-1").partition(" ")
            return given.strip() if scheme.lower() == "bearer" and given.strip() else None
    return None


class Guard:
    """Decides each request: None to let it pass, or the :class:`Refusal` to answer."""

    def __init__(self, keyring: Keyring, bans: Bans, on_refusal: Callable[[str], None]) -> None:
        self.keyring = keyring
        self.bans = bans
        self._count = on_refusal

    def check(self, scope: dict[str, Any]) -> Refusal | None:
        """The decision for one ASGI HTTP ``scope``."""
        need = required_scope(scope["method"], scope["path"])
        if need is None or not self.keyring.enabled:
            return None
        address = (scope.get("client") or ("?", 0))[0]
        in_url = credentials_in_url(scope.get("query_string", b""))
        token = bearer(scope["headers"])
        scopes = self.keyring.scopes(token) if token is not None else frozenset()
        if scopes and not in_url:  # a valid token passes even from a banned address
            if need not in scopes:
                names = "/".join(sorted(s.value for s in scopes))
                message = f"this is a {names} token; this route needs a {need.value} token"
                return self._refuse(Refusal(403, message, reason="forbidden"))
            return None
        wait = self.bans.banned_for(address)
        if wait is not None:
            message = "too many wrong tokens from this address; retry later"
            return self._refuse(Refusal(429, message, reason="banned", retry_after_s=wait))
        if in_url:
            self.bans.failed(address)
            message = "credentials are not accepted in the URL: send Authorization: Bearer TOKEN"
            return self._refuse(Refusal(401, message, reason="url"))
        if token is None:
            message = "missing bearer token (Authorization: Bearer TOKEN)"
            return self._refuse(Refusal(401, message, reason="missing"))
        self.bans.failed(address)
        return self._refuse(Refusal(401, "wrong bearer token", "wrong"))

    def _refuse(self, refusal: Refusal) -> Refusal:
        self._count(refusal.reason)
        return refusal


class AuthMiddleware:
    """ASGI middleware: :class:`Guard` in front of ``app``; ``on_ingest_refusal(status)`` counts
    refused ingest requests beside the others (``ett_ingest_requests_total{code}``)."""

    def __init__(self, app: Any, guard: Guard, on_ingest_refusal: Callable[[int], None]) -> None:
        self.app = app
        self.guard = guard
        self._ingest_refused = on_ingest_refusal

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.guard.check(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        headers = [(b"connection", b"close")]  # a refused client does not keep a connection
        if refusal.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="ett"'))
        if refusal.retry_after_s is not None:
            headers.append((b"retry-after", str(refusal.retry_after_s).encode()))
        if scope["path"] == INGEST:
            self._ingest_refused(refusal.status)
            ctype = _header(scope, b"content-type")
            out_type = otlp.response_content_type(ctype)
            body = otlp.encode_status(refusal.status, refusal.message, out_type.endswith("json"))
        else:
            out_type = "application/json"
            body = _json_error(refusal.status, refusal.message)
        headers += [(b"content-type", out_type.encode()), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _json_error(status: int, message: str) -> bytes:
    import json

    return json.dumps({"error": message, "status": status}).encode()


def guard_for(
    full_token: str | None, auth: AuthSettings, on_refusal: Callable[[str], None]
) -> Guard:
    """The guard of a collector with these settings."""
    return Guard(Keyring(full_token, auth), Bans(auth.max_failures, auth.ban_s), on_refusal)
