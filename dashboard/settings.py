"""The dashboard's configuration, from the environment that ``ett dashboard`` sets.

- ``ETT_API_URL``: the collector's base URL (default ``http://127.0.0.1:4318``);
- ``ETT_TOKEN``: its bearer token, when it has one;
- ``ETT_DASHBOARD_REFRESH_S``: how often pages refresh on their own (default 5 s);
- ``ETT_DASHBOARD_CACHE_S``: how long an API answer is reused (default 2 s).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_API_URL = "http://127.0.0.1:4318"


@dataclass(frozen=True)
class DashboardSettings:
    """Where the collector is and how fresh pages stay."""

    api_url: str = DEFAULT_API_URL
    token: str | None = None
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
            token=os.environ.get("ETT_TOKEN") or None,
            refresh_s=number("ETT_DASHBOARD_REFRESH_S", 5.0),
            cache_s=number("ETT_DASHBOARD_CACHE_S", 2.0),
        )
