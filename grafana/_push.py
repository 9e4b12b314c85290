"""Upload the folder, data sources, dashboards and alert rules to a Grafana server through
grafana-client. Every write is an upsert keyed by uid, so pushing twice changes nothing the second
time; a refusal stops the push with a message that names what was already written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from ._panels import FOLDER_TITLE, FOLDER_UID
from ._provisioning import dashboard_json, dashboard_models, datasources

MESSAGE = "ett grafana push"


class PushError(Exception):
    """A refusal or failure; ``exit_code`` 2 for credentials and permissions, 1 otherwise."""

    def __init__(self, message: str, *, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass
class Plan:
    """What to push: ``pg`` (host, database, user, password, sslmode) and ``prometheus_url``
    name the data sources; without them the data sources are left as they are."""

    pg: dict[str, str] | None = None
    prometheus_url: str | None = None
    rules_path: str | None = None
    written: list[str] = field(default_factory=list)


def pg_settings(url: str) -> dict[str, str]:
    """``postgresql://USER:PASSWORD@HOST:PORT/DB[?sslmode=...]`` -> data-source settings.

    Raises:
        ValueError: when a part is missing.
    """
    parts = urlsplit(url)
    if not parts.scheme.startswith("postgres") or not parts.hostname or not parts.path.strip("/"):
        raise ValueError(
            f"cannot read PostgreSQL URL {url!r}: write postgresql://USER:PASSWORD@HOST:5432/DB"
        )
    if not parts.username:
        raise ValueError("the PostgreSQL URL needs a user: the read-only role Grafana logs in as")
    query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    return {
        "host": f"{parts.hostname}:{parts.port or 5432}",
        "database": unquote(parts.path.strip("/")),
        "user": unquote(parts.username),
        "password": unquote(parts.password or ""),
        "sslmode": query.get("sslmode", "prefer"),
    }


def _steps(api: Any, plan: Plan) -> list[tuple[str, Callable[[], None]]]:
    from grafana_client.client import GrafanaClientError

    def folder() -> None:
        try:
            api.folder.get_folder(FOLDER_UID)
        except GrafanaClientError as exc:
            if exc.status_code != 404:
                raise
            api.folder.create_folder(FOLDER_TITLE, uid=FOLDER_UID)

    def datasource(body: dict[str, Any]) -> Callable[[], None]:
        def run() -> None:
            try:
                api.datasource.get_datasource_by_uid(body["uid"])
            except GrafanaClientError as exc:
                if exc.status_code != 404:
                    raise
                api.datasource.create_datasource(body)
            else:
                api.datasource.update_datasource_by_uid(body["uid"], body)

        return run

    def dashboard(data: dict[str, Any]) -> Callable[[], None]:
        def run() -> None:
            api.dashboard.update_dashboard(
                {"dashboard": data, "folderUid": FOLDER_UID, "overwrite": True, "message": MESSAGE}
            )

        return run

    steps: list[tuple[str, Callable[[], None]]] = [(f"folder {FOLDER_UID}", folder)]
    if plan.pg is not None or plan.prometheus_url is not None:
        for body in datasources(plan.pg, plan.prometheus_url):
            is_pg = body["uid"].endswith("postgres")
            if (plan.pg if is_pg else plan.prometheus_url) is not None:
                steps.append((f"data source {body['uid']}", datasource(body)))
    for uid, model in dashboard_models().items():
        steps.append((f"dashboard {uid}", dashboard(dashboard_json(model))))
    from . import _alerting

    body = _alerting.api_rule_group(FOLDER_UID, plan.rules_path)

    def rules() -> None:
        api.alertingprovisioning.update_rule_group(FOLDER_UID, body["title"], body)

    steps.append((f"alert rule group {body['title']} ({len(body['rules'])} rules)", rules))
    return steps


def _explain(url: str, step: str, exc: Exception) -> PushError:
    from grafana_client.client import GrafanaException

    status = getattr(exc, "status_code", 0) if isinstance(exc, GrafanaException) else 0
    detail = getattr(exc, "message", "") or str(exc)
    if status == 401:
        return PushError(
            f"Grafana at {url} refused the token (401 Unauthorized) at {step}: pass a service "
            "account token with --token (or GRAFANA_TOKEN)",
            exit_code=2,
        )
    if status == 403:
        return PushError(
            f"Grafana at {url} forbids this token to write {step} (403 Forbidden: {detail}): "
            "give its service account the Editor role (Admin for data sources)",
            exit_code=2,
        )
    if status == 412:
        return PushError(
            f"Grafana at {url} refused {step}: version conflict (412 Precondition Failed: "
            f"{detail}); it was changed on the server since",
            exit_code=1,
        )
    if status == 0:
        return PushError(f"cannot reach Grafana at {url} ({detail}): check --url", exit_code=1)
    return PushError(f"Grafana at {url} refused {step} ({detail})", exit_code=1)


def push(
    url: str,
    token: str,
    plan: Plan,
    *,
    timeout: float = 10.0,
    progress: Callable[[str], None] | None = None,
) -> list[str]:
    """Write everything in order (folder, data sources, dashboards, alert rules); returns what
    was written.

    Raises:
        PushError: at the first refusal; its message says what had been written before it.
    """
    import niquests
    from grafana_client.api import GrafanaApi
    from grafana_client.client import GrafanaException

    api = GrafanaApi.from_url(url, credential=token, timeout=timeout)
    for step, run in _steps(api, plan):
        try:
            run()
        except (GrafanaException, niquests.exceptions.RequestException, OSError) as exc:
            err = _explain(url, step, exc)
            done = ", ".join(plan.written)
            err.message += (
                f". Already written: {done} (pushing again is safe: every write is an upsert)"
                if plan.written
                else ". Nothing was written."
            )
            raise err from exc
        plan.written.append(step)
        if progress is not None:
            progress(step)
    return plan.written
