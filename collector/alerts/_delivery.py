"""Delivery to Alertmanager's HTTP API (``POST /api/v2/alerts``), as Prometheus does it: firing
alerts are re-sent while they fire, with ``endsAt`` a few intervals ahead (so an evaluator that
dies lets them expire), and a resolved alert is sent once more with its ``endsAt``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ._state import Alert, AlertState

TIMEOUT_S = 5.0
"""How long one POST may take."""


class DeliveryError(RuntimeError):
    """Alertmanager did not accept a batch (down, or answered an error)."""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def payload(alerts: Sequence[Alert], now: float, valid_s: float) -> list[dict[str, Any]]:
    """The JSON body of one POST: ``valid_s`` is how long a firing alert stays valid unless
    re-sent."""
    out = []
    for a in alerts:
        starts = a.fired_at if a.fired_at is not None else a.active_since
        ends = a.resolved_at if a.state is AlertState.RESOLVED and a.resolved_at else now + valid_s
        item: dict[str, Any] = {
            "labels": {"alertname": a.rule, **a.labels},
            "annotations": dict(a.annotations),
            "startsAt": _iso(starts),
            "endsAt": _iso(ends),
        }
        if "dashboard" in a.annotations:
            item["generatorURL"] = a.annotations["dashboard"]
        out.append(item)
    return out


def post_alerts(base_url: str, body: list[dict[str, Any]]) -> None:
    """POST ``body`` to ``{base_url}/api/v2/alerts``.

    Raises:
        DeliveryError: when Alertmanager cannot be reached or does not answer 200.
    """
    req = urllib.request.Request(
        base_url.rstrip("/") + "/api/v2/alerts",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            if resp.status != 200:
                raise DeliveryError(f"Alertmanager answered {resp.status}")
    except urllib.error.HTTPError as exc:
        detail = " ".join(exc.read()[:200].decode(errors="replace").split())  # one log line
        raise DeliveryError(f"Alertmanager answered {exc.code}: {detail}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise DeliveryError(f"Alertmanager at {base_url} unreachable: {exc}") from exc


class Backoff:
    """Exponential backoff between failed deliveries: 1 s, 2 s, 4 s, ... up to ``cap_s``."""

    def __init__(self, first_s: float = 1.0, cap_s: float = 60.0) -> None:
        self.first_s, self.cap_s = first_s, cap_s
        self.failures = 0

    def delay(self) -> float:
        """Seconds to wait before the next try (0 after a success)."""
        if self.failures == 0:
            return 0.0
        return float(min(self.cap_s, self.first_s * 2 ** (self.failures - 1)))

    def failed(self) -> None:
        self.failures += 1

    def succeeded(self) -> None:
        self.failures = 0
