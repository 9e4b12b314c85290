"""The dashboard's configuration, from the environment that ``ett dashboard`` sets.

- ``ETT_API_URL``: the collector's base URL (default ``http://127.0.0.1:4318``);
- ``ETT_READ_TOKEN`` (or a file holding it, ``ETT_READ_TOKEN_FILE``): a read token of the
  collector; ``ETT_TOKEN`` (its one token for everything) when neither is set;
- ``ETT_API_CA_BUNDLE``: the CA bundle (PEM) that signed an HTTPS collector's certificate
  (default: the system's trusted CAs); ``ETT_API_CLIENT_CERT`` and ``ETT_API_CLIENT_KEY``: a
  client certificate, for a collector that asks for one (``ETT_TLS_CLIENT_CA``);
- ``ETT_DASHBOARD_REFRESH_S``: how often pages refresh on their own (default 5 s);
- ``ETT_DASHBOARD_CACHE_S``: how long an API answer is reused (default 2 s).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_API_URL = "http://127.0.0.1:4318"


@dataclass(frozen=True)
class DashboardSettings:
    """Where the collector is and how fresh pages stay."""

    api_url: str = DEFAULT_API_URL
    token: str | None = field(default=None, repr=False)
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    refresh_s: float = 5.0
    cache_s: float = 2.0

    @classmethod
    def from_env(cls) -> DashboardSettings:
        """The settings of this process (bad numbers fall back to the defaults)."""

        def number(name: str, default: float) -> float:
            try:
                value = float(os.environ.get(name, default))
            except ValueError:
                return default
            return value if value > 0 else default

        return cls(
            api_url=os.environ.get("ETT_API_URL", DEFAULT_API_URL).rstrip("/"),
            token=read_token(),
            ca_bundle=os.environ.get("ETT_API_CA_BUNDLE") or None,
            client_cert=os.environ.get("ETT_API_CLIENT_CERT") or None,
            client_key=os.environ.get("ETT_API_CLIENT_KEY") or None,
            refresh_s=number("ETT_DASHBOARD_REFRESH_S", 5.0),
            cache_s=number("ETT_DASHBOARD_CACHE_S", 2.0),
        )


def read_token() -> str | None:
    """``ETT_READ_TOKEN``, else the first line of ``ETT_READ_TOKEN_FILE`` (unreadable: None, and
    the collector's 401 says so), else ``ETT_TOKEN``."""
    token = os.environ.get("ETT_READ_TOKEN", "").strip()
    path = os.environ.get("ETT_READ_TOKEN_FILE", "").strip()
    if not token and path:
        try:
            token = Path(path).read_text(encoding="utf-8").strip().splitlines()[0].strip()
        except (OSError, UnicodeDecodeError, IndexError):
            token = ""
    return token or os.environ.get("ETT_TOKEN", "").strip() or None
