"""A small local stand-in for Grafana's HTTP API (the endpoints `ett grafana push` calls), with
the documented answers: 200 with Grafana's bodies, 401, 403, 404 and 412. It records every
request so tests can check the bodies; it stores what was written so a second push can be
checked for idempotence."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    authorization: str
    body: Any


@dataclass
class GrafanaStub:
    """Grafana on 127.0.0.1; ``refuse`` maps (method, path prefix) to a status to answer."""

    token: str = "glsa_test"
    refuse: dict[tuple[str, str], int] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    folders: dict[str, Any] = field(default_factory=dict)
    datasources: dict[str, Any] = field(default_factory=dict)
    dashboards: dict[str, Any] = field(default_factory=dict)
    rule_groups: dict[str, Any] = field(default_factory=dict)

    def start(self) -> str:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                auth = self.headers.get("Authorization", "")
                stub.requests.append(Request(self.command, self.path, auth, body))
                status, answer = stub.route(self.command, self.path, auth, body)
                self._answer(status, answer)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method != "GET"]

    def route(self, method: str, path: str, auth: str, body: Any) -> tuple[int, Any]:
        if auth != f"Bearer {self.token}":
            return 401, {"message": "Unauthorized"}
        for (m, prefix), status in self.refuse.items():
            if method == m and path.startswith(prefix):
                return status, {
                    403: {
                        "message": "You'll need additional permissions to perform this "
                        "action. Permissions needed: dashboards:create"
                    },
                    412: {
                        "message": "The dashboard has been changed by someone else",
                        "status": "version-mismatch",
                    },
                }.get(status, {"message": "refused"})
        if path.startswith("/api/folders/") and method == "GET":
            uid = path.rsplit("/", 1)[1]
            if uid in self.folders:
                return 200, self.folders[uid]
            return 404, {"message": "folder not found", "status": "not-found"}
        if path == "/api/folders" and method == "POST":
            self.folders[body["uid"]] = {"id": 1, "uid": body["uid"], "title": body["title"]}
            return 200, self.folders[body["uid"]]
        if path.startswith("/api/datasources/uid/"):
            uid = path.rsplit("/", 1)[1]
            if method == "GET":
                if uid in self.datasources:
                    return 200, self.datasources[uid]
                return 404, {"message": "Data source not found"}
            if method == "PUT" and uid in self.datasources:
                self.datasources[uid] = body
                return 200, {"message": "Datasource updated", "datasource": body}
        if path == "/api/datasources" and method == "POST":
            self.datasources[body["uid"]] = body
            return 200, {"message": "Datasource added", "id": 1, "datasource": body}
        if path == "/api/dashboards/db" and method == "POST":
            uid = body["dashboard"]["uid"]
            version = self.dashboards.get(uid, {}).get("version", 0) + 1
            self.dashboards[uid] = {"dashboard": body["dashboard"], "version": version}
            return 200, {
                "id": 1,
                "uid": uid,
                "url": f"/d/{uid}",
                "status": "success",
                "version": version,
                "slug": uid,
            }
        if path.startswith("/api/v1/provisioning/folder/") and method == "PUT":
            self.rule_groups[path] = body
            return 200, body
        return 404, {"message": "Not found"}
