"""The one way the dashboard reads: the collector's HTTP read API, with short-lived caching.

Every answer is cached for ``ETT_DASHBOARD_CACHE_S`` (2 s) per URL, token and parameters, shared
by every browser session of the process: a page that refreshes every few seconds asks the
collector once per refresh, however many people look at it. Failures are not cached.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import streamlit as st

from .settings import DashboardSettings

_TTL_S = DashboardSettings.from_env().cache_s
_lock = threading.Lock()
_requests = 0


class ApiError(Exception):
    """A read that failed, with a message for the page (no traceback) and the HTTP status
    (0 when the collector did not answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def requests_made() -> int:
    """HTTP requests this process has sent to the collector (cache hits not counted)."""
    return _requests


def _count() -> None:
    global _requests
    with _lock:
        _requests += 1


def _fetch(api_url: str, token: str | None, path: str, params: tuple[tuple[str, str], ...]) -> Any:
    _count()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.get(api_url + path, params=dict(params), headers=headers, timeout=10.0)
    except httpx.HTTPError as exc:
        raise ApiError(
            f"The collector at {api_url} does not answer ({type(exc).__name__}). Start it with "
            "`ett serve`, or point the dashboard at it: `ett dashboard --api URL`."
        ) from exc
    if r.status_code == 200:
        return r.json()
    try:
        detail = str(r.json().get("error", r.text))
    except ValueError:
        detail = r.text[:200]
    if r.status_code == 401:
        raise ApiError(
            f"The collector at {api_url} refused the token ({detail}). Pass the collector's "
            "token: `ett dashboard --token T` (or ETT_TOKEN).",
            401,
        )
    raise ApiError(f"The collector answered {r.status_code} for {path}: {detail}", r.status_code)


@st.cache_data(ttl=_TTL_S, show_spinner=False, max_entries=512)
def _cached(api_url: str, token: str | None, path: str, params: tuple[tuple[str, str], ...]) -> Any:
    return _fetch(api_url, token, path, params)


class Client:
    """Typed reads of the collector's API (``/api/v1/...``)."""

    def __init__(self, settings: DashboardSettings | None = None) -> None:
        self.settings = settings or DashboardSettings.from_env()

    def get(self, path: str, **params: Any) -> Any:
        """The JSON answer of ``GET path?params`` (None-valued parameters left out).

        Raises:
            ApiError: collector down, wrong token, or a 4xx/5xx answer.
        """
        items = tuple(sorted((k, str(v)) for k, v in params.items() if v not in (None, "")))
        return _cached(self.settings.api_url, self.settings.token, path, items)

    def fleet(self, **params: Any) -> dict[str, Any]:
        """``GET /api/v1/fleet``: series, lost GPU-hours by component, worst jobs."""
        out: dict[str, Any] = self.get("/api/v1/fleet", **params)
        return out

    def facets(self) -> dict[str, list[str]]:
        """``GET /api/v1/facets``: models, teams and states to filter on."""
        out: dict[str, list[str]] = self.get("/api/v1/facets")
        return out

    def jobs(self, **params: Any) -> list[dict[str, Any]]:
        """``GET /api/v1/jobs``: compact job rows, newest first."""
        out: list[dict[str, Any]] = self.get("/api/v1/jobs", **params)
        return out

    def job(self, job_id: str) -> dict[str, Any]:
        """``GET /api/v1/jobs/{id}``: every figure of one job."""
        out: dict[str, Any] = self.get(f"/api/v1/jobs/{_quote(job_id)}")
        return out

    def segments(self, job_id: str) -> list[dict[str, Any]]:
        """``GET /api/v1/jobs/{id}/segments``."""
        out: list[dict[str, Any]] = self.get(f"/api/v1/jobs/{_quote(job_id)}/segments")
        return out

    def activity(self, job_id: str) -> dict[str, list[dict[str, Any]]]:
        """``GET /api/v1/jobs/{id}/activity``: phases per rank, checkpoints, compiles."""
        out: dict[str, list[dict[str, Any]]] = self.get(f"/api/v1/jobs/{_quote(job_id)}/activity")
        return out

    def checkpoint_advice(self, **params: Any) -> dict[str, Any]:
        """``GET /api/v1/checkpoint-advice``: per model and per job."""
        out: dict[str, Any] = self.get("/api/v1/checkpoint-advice", **params)
        return out

    def alerts(self) -> dict[str, Any] | list[Any] | None:
        """``GET /api/v1/alerts``; None where the collector has no alerting (404)."""
        try:
            out: dict[str, Any] | list[Any] = self.get("/api/v1/alerts")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return out


def _quote(job_id: str) -> str:
    from urllib.parse import quote

    return quote(job_id, safe="")
