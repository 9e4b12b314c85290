"""The one way the dashboard reads: the collector's HTTP read API, with short-lived caching.

Every answer is cached for ``ETT_DASHBOARD_CACHE_S`` (2 s) per settings and parameters, shared
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


_clients: dict[tuple[str | None, str | None, str | None], httpx.Client] = {}


def _client(settings: DashboardSettings) -> httpx.Client:
    """One connection pool per TLS setting: the CA bundle that verifies the collector (httpx's
    trusted CAs without one) and the client certificate, if any."""
    key = (settings.ca_bundle, settings.client_cert, settings.client_key)
    with _lock:
        client = _clients.get(key)
        if client is None:
            verify: Any = True  # httpx's own trusted CAs
            if settings.ca_bundle or settings.client_cert:
                import ssl

                verify = ssl.create_default_context(cafile=settings.ca_bundle)
                if settings.client_cert:
                    verify.load_cert_chain(settings.client_cert, settings.client_key)
            client = _clients[key] = httpx.Client(verify=verify, timeout=10.0)
    return client


def _fetch(settings: DashboardSettings, path: str, params: tuple[tuple[str, str], ...]) -> Any:
    _count()
    api_url, token = settings.api_url, settings.token
    headers = {"Authorization": f"Bearer {token}"} if token else {}  # never in the URL
    try:
        r = _client(settings).get(api_url + path, params=dict(params), headers=headers)
    except httpx.ConnectError as exc:
        if "CERTIFICATE_VERIFY_FAILED" in str(exc) or "SSL" in str(exc):
            raise ApiError(
                f"The collector at {api_url} has a certificate this dashboard does not trust "
                f"({_tls_reason(exc)}): pass the CA bundle that signed it, "
                "`ett dashboard --ca-bundle FILE` (or ETT_API_CA_BUNDLE)."
            ) from exc
        raise _not_answering(api_url, exc) from exc
    except (httpx.HTTPError, OSError) as exc:
        raise _not_answering(api_url, exc) from exc
    if r.status_code == 200:
        return r.json()
    try:
        detail = str(r.json().get("error", r.text))
    except ValueError:
        detail = r.text[:200]
    if r.status_code in (401, 403):
        raise ApiError(
            f"The collector at {api_url} refused the token ({detail}). Pass a read token of "
            "the collector: `ett dashboard --token-file FILE` (or ETT_READ_TOKEN).",
            r.status_code,
        )
    raise ApiError(f"The collector answered {r.status_code} for {path}: {detail}", r.status_code)


def _not_answering(api_url: str, exc: BaseException) -> ApiError:
    return ApiError(
        f"The collector at {api_url} does not answer ({type(exc).__name__}). Start it with "
        "`ett serve`, or point the dashboard at it: `ett dashboard --api URL`."
    )


def _tls_reason(exc: BaseException) -> str:
    """The verification failure's own words (expired, self-signed...), without the rest."""
    text = str(exc)
    at = text.find("certificate verify failed")
    return text[at : text.find(")", at) if ")" in text[at:] else None] if at >= 0 else "TLS error"


@st.cache_data(ttl=_TTL_S, show_spinner=False, max_entries=512)
def _cached(settings: DashboardSettings, path: str, params: tuple[tuple[str, str], ...]) -> Any:
    return _fetch(settings, path, params)


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
        return _cached(self.settings, path, items)

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

    def activity(self, job_id: str) -> dict[str, Any]:
        """``GET /api/v1/jobs/{id}/activity``: phases per rank, checkpoints, compiles (lists),
        and ``spans_pruned`` / ``spans_pruned_at``: whether retention took the raw spans."""
        out: dict[str, Any] = self.get(f"/api/v1/jobs/{_quote(job_id)}/activity")
        return out

    def performance(self, job_id: str, buckets: int = 60) -> dict[str, Any]:
        """``GET /api/v1/jobs/{id}/performance``: step time, slow time, straggler, series."""
        out: dict[str, Any] = self.get(
            f"/api/v1/jobs/{_quote(job_id)}/performance", buckets=buckets
        )
        return out

    def model_performance(self, **params: Any) -> dict[str, Any]:
        """``GET /api/v1/models/performance``: slow time and throughput per model."""
        out: dict[str, Any] = self.get("/api/v1/models/performance", **params)
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
