"""Who may talk to the collector: credential and TLS settings (standard library only).

Three scopes, each with its own bearer tokens, several valid at once (add the new token, move the
clients, remove the old one: no restart when they come from a file):

- ``write``: ``POST /v1/traces`` only (the trainers' token, on every training host);
- ``read``: every ``GET`` route (the read API, ``/metrics``, the alerts; the dashboard's token);
- ``admin``: any other method on any other route (none today; the scope is there so that a
  recompute or prune route added later is closed to write and read tokens by default).

``ETT_TOKEN`` / ``ett serve --token`` stays what it always was: one token that opens everything
(all three scopes). With no token of any kind the collector is open, as before.

Environment, per scope (``WRITE``, ``READ``, ``ADMIN``): ``ETT_<SCOPE>_TOKENS`` (tokens separated
by commas or white space) and ``ETT_<SCOPE>_TOKENS_FILE`` (one token per line, ``#`` comments;
re-read when it changes, checked at most every :data:`RELOAD_CHECK_S`; it must not be readable by
other users). Wrong tokens: ``ETT_AUTH_MAX_FAILURES`` (default 10) within ``ETT_AUTH_BAN_S``
(default 60 s) from one address ban it for ``ETT_AUTH_BAN_S``. TLS: ``ETT_TLS_CERT``,
``ETT_TLS_KEY`` (PEM files: ``ett serve`` speaks HTTPS only), ``ETT_TLS_CLIENT_CA`` (clients must
present a certificate signed by this CA bundle).
"""

from __future__ import annotations

import enum
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RELOAD_CHECK_S = 1.0
"""How often a token file's :func:`token_file_stamp` is checked for a change."""
MIN_TOKEN_CHARS = 16
"""Shortest scoped token accepted (``ETT_TOKEN`` is exempt, for compatibility)."""
DEFAULT_MAX_FAILURES = 10
DEFAULT_BAN_S = 60.0


class SecurityConfigError(ValueError):
    """A credential or TLS setting that cannot work (``Settings`` raises it as ``ConfigError``)."""


class Scope(enum.Enum):
    """What a token may do."""

    WRITE = "write"
    READ = "read"
    ADMIN = "admin"


_SPLIT = re.compile(r"[\s,]+")


def parse_tokens(text: str, *, comments: bool = False) -> list[str]:
    """The tokens in ``text``: separated by commas or white space; with ``comments``, what
    follows ``#`` on a line is left out."""
    if comments:
        text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    return [t for t in _SPLIT.split(text) if t]


def read_token_file(path: Path) -> list[str]:
    """The tokens of a token file.

    Raises:
        SecurityConfigError: the file is missing, unreadable, readable by other users, holds no
            token (every client of its scope would be refused), or holds a token shorter than
            :data:`MIN_TOKEN_CHARS` (the message never holds a token)."""
    try:
        mode = path.stat().st_mode
        # utf-8-sig: a byte-order mark (Notepad, PowerShell's Out-File) is no part of the first
        # token, which would otherwise never match and nothing would say why
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise SecurityConfigError(f"cannot read the token file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SecurityConfigError(f"the token file {path} is not UTF-8 text") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecurityConfigError(
            f"the token file {path} is readable by other users: chmod 600 {path}"
        )
    tokens = parse_tokens(text, comments=True)
    if not tokens:
        raise SecurityConfigError(
            f"the token file {path} holds no token, so every client would be refused: put one "
            f"token per line in it (e.g. `openssl rand -hex 32 > {path}`)"
        )
    check_lengths(tokens, str(path))
    return tokens


def token_file_stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    """What a change of a token file changes: its modification and inode change times, size and
    mode. ``chmod 644`` alone changes neither content nor modification time, yet must be seen
    (and warned about: :func:`read_token_file` refuses a file other users may read)."""
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_mode)


def check_lengths(tokens: list[str], where: str) -> None:
    """Refuse a token shorter than :data:`MIN_TOKEN_CHARS` (saying where, not which)."""
    for n, token in enumerate(tokens, 1):
        if len(token) < MIN_TOKEN_CHARS:
            raise SecurityConfigError(
                f"token {n} of {where} has {len(token)} characters; use at least "
                f"{MIN_TOKEN_CHARS} random ones (e.g. `openssl rand -hex 32`)"
            )


@dataclass(frozen=True)
class ScopeTokens:
    """One scope's tokens: given directly, and the file they are also read from."""

    tokens: tuple[str, ...] = ()
    file: Path | None = None

    def __repr__(self) -> str:  # never print a token (settings objects end up in logs)
        return f"ScopeTokens({len(self.tokens)} token(s), file={self.file})"


@dataclass(frozen=True)
class AuthSettings:
    """The scoped credentials and the wrong-token ban (``ETT_TOKEN`` is ``Settings.token``)."""

    scopes: dict[Scope, ScopeTokens] = field(default_factory=dict)
    max_failures: int = DEFAULT_MAX_FAILURES
    ban_s: float = DEFAULT_BAN_S

    @classmethod
    def from_env(cls) -> AuthSettings:
        """From ``ETT_<SCOPE>_TOKENS``, ``ETT_<SCOPE>_TOKENS_FILE``, ``ETT_AUTH_MAX_FAILURES``
        and ``ETT_AUTH_BAN_S``."""
        scopes: dict[Scope, ScopeTokens] = {}
        for scope in Scope:
            name = f"ETT_{scope.name}_TOKENS"
            tokens = parse_tokens(os.environ.get(name, ""))
            file = os.environ.get(f"{name}_FILE", "").strip()
            scopes[scope] = ScopeTokens(tuple(tokens), Path(file) if file else None)
        failures = os.environ.get("ETT_AUTH_MAX_FAILURES", "").strip()
        ban = os.environ.get("ETT_AUTH_BAN_S", "").strip()
        try:
            max_failures = int(failures) if failures else DEFAULT_MAX_FAILURES
            ban_s = float(ban) if ban else DEFAULT_BAN_S
        except ValueError:
            raise SecurityConfigError(
                "ETT_AUTH_MAX_FAILURES must be a whole number and ETT_AUTH_BAN_S a number of "
                f"seconds; got {failures!r} and {ban!r}"
            ) from None
        return cls(scopes, max_failures, ban_s)

    def environment(self) -> dict[str, str]:
        """The ``ETT_<SCOPE>_TOKENS_FILE`` variables of the token files (for worker processes;
        tokens given directly are in the environment already)."""
        return {
            f"ETT_{s.name}_TOKENS_FILE": str(src.file)
            for s, src in self.scopes.items()
            if src.file is not None
        }

    @property
    def enabled(self) -> bool:
        """True when any scoped token or token file is configured."""
        return any(src.tokens or src.file for src in self.scopes.values())

    def with_files(self, files: dict[Scope, Path | None]) -> AuthSettings:
        """These settings with the token files ``files`` names (``ett serve`` flags)."""
        scopes = dict(self.scopes)
        for scope, path in files.items():
            if path is not None:
                scopes[scope] = ScopeTokens(scopes.get(scope, ScopeTokens()).tokens, path)
        return AuthSettings(scopes, self.max_failures, self.ban_s)

    def check(self) -> None:
        """Fail fast: every token file readable and private, the ban settings sane, and no
        token in two scopes (one that must do everything is ``ETT_TOKEN``).

        Raises:
            SecurityConfigError: saying which setting to change."""
        if self.max_failures < 1 or not 0 < self.ban_s < float("inf"):
            raise SecurityConfigError(
                "ETT_AUTH_MAX_FAILURES must be at least 1 and ETT_AUTH_BAN_S a positive number"
            )
        seen: dict[str, Scope] = {}
        for scope, source in self.scopes.items():
            tokens = list(source.tokens)
            check_lengths(tokens, f"ETT_{scope.name}_TOKENS")
            if source.file is not None:
                tokens += read_token_file(source.file)
            for token in tokens:
                other = seen.setdefault(token, scope)
                if other is not scope:
                    raise SecurityConfigError(
                        f"one token is both a {other.value} and a {scope.value} token: give each "
                        "scope its own tokens (ETT_TOKEN is the one that may do everything)"
                    )


def _check_tls_files(cert: Path, key: Path, client_ca: Path | None) -> None:
    """Load the files as the server will, so that a wrong one is said in one line at start
    (before the address is bound or a database created), not as a raw ``ssl.SSLError``.

    Raises:
        SecurityConfigError: a certificate file without a PEM certificate, a key that is not a
            PEM private key, is encrypted, or is not the certificate's; a client CA bundle
            without a PEM certificate."""
    import ssl

    def no_certificate(path: Path, what: str) -> SecurityConfigError:
        return SecurityConfigError(f"the TLS {what} {path} holds no PEM certificate")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for path, what in ((cert, "certificate"), (client_ca, "client CA bundle")):
        if path is None:
            continue
        try:
            context.load_verify_locations(cafile=str(path))
        except (ssl.SSLError, ValueError):
            raise no_certificate(path, what) from None
    asked: list[bool] = []

    def passphrase() -> bytes:  # never a prompt on the terminal, as OpenSSL's own would
        asked.append(True)
        return b""

    try:
        context.load_cert_chain(str(cert), str(key), password=passphrase)
    except ssl.SSLError as exc:
        if asked:
            why = "is encrypted: give ett serve the key without a passphrase (chmod 600 it)"
        elif exc.reason == "KEY_VALUES_MISMATCH":
            why = f"is not the key of the certificate {cert}: give the key it was issued with"
        else:
            why = "is not a PEM private key" + (f" ({exc.reason})" if exc.reason else "")
        raise SecurityConfigError(f"the TLS key {key} {why}") from None


@dataclass(frozen=True)
class TlsSettings:
    """HTTPS for ``ett serve``: ``ETT_TLS_CERT``, ``ETT_TLS_KEY``, ``ETT_TLS_CLIENT_CA``."""

    cert: Path | None = None
    key: Path | None = None
    client_ca: Path | None = None

    @classmethod
    def from_env(cls) -> TlsSettings:
        """From the environment (unset or empty: None)."""

        def path(name: str) -> Path | None:
            raw = os.environ.get(name, "").strip()
            return Path(raw) if raw else None

        return cls(path("ETT_TLS_CERT"), path("ETT_TLS_KEY"), path("ETT_TLS_CLIENT_CA"))

    @property
    def enabled(self) -> bool:
        """True when the server speaks HTTPS."""
        return self.cert is not None

    def check(self) -> None:
        """Certificate and key come together, and every file named can be read.

        Raises:
            SecurityConfigError: saying which setting to change."""
        if (self.cert is None) != (self.key is None):
            raise SecurityConfigError(
                "TLS needs both a certificate and its key: set ETT_TLS_CERT and ETT_TLS_KEY "
                "(ett serve --tls-cert FILE --tls-key FILE)"
            )
        if self.client_ca is not None and self.cert is None:
            raise SecurityConfigError("ETT_TLS_CLIENT_CA needs ETT_TLS_CERT and ETT_TLS_KEY")
        for name, value in (("cert", self.cert), ("key", self.key), ("client CA", self.client_ca)):
            if value is not None and not os.access(value, os.R_OK):
                raise SecurityConfigError(f"cannot read the TLS {name} file {value}")
        if self.cert is not None and self.key is not None:
            _check_tls_files(self.cert, self.key, self.client_ca)

    def uvicorn_options(self) -> dict[str, Any]:
        """uvicorn's ``ssl_*`` options for these settings (empty: plain HTTP). A client CA
        makes a client certificate required."""
        if self.cert is None:
            return {}
        import ssl

        options: dict[str, Any] = {
            "ssl_certfile": str(self.cert),
            "ssl_keyfile": str(self.key),
        }
        if self.client_ca is not None:
            options["ssl_ca_certs"] = str(self.client_ca)
            options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
        return options

    def environment(self) -> dict[str, str]:
        """The ``ETT_TLS_*`` variables that give these settings (for worker processes)."""
        pairs = (
            ("ETT_TLS_CERT", self.cert),
            ("ETT_TLS_KEY", self.key),
            ("ETT_TLS_CLIENT_CA", self.client_ca),
        )
        return {name: str(value) for name, value in pairs if value is not None}
