"""`ett grafana push` against a local stand-in of Grafana's HTTP API: the request bodies, an
idempotent second push, and clear errors for 401, 403, 412 and an unreachable server."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from grafana_stub import GrafanaStub

from ett_cli import main
from ett_grafana._provisioning import ROOT

PG = "postgresql://ett_grafana:pa%40ss@db.example:5433/ett"


@pytest.fixture
def stub() -> Iterator[GrafanaStub]:
    s = GrafanaStub()
    s.url = s.start()  # type: ignore[attr-defined]
    yield s
    s.stop()


def _push(stub: GrafanaStub, *extra: str, token: str | None = None) -> int:
    return main(
        [
            "grafana",
            "push",
            "--url",
            stub.url,
            "--token",
            token or stub.token,  # type: ignore[attr-defined]
            *extra,
        ]
    )


def test_push_writes_folder_datasources_and_dashboards(stub: GrafanaStub, capsys) -> None:
    assert _push(stub, "--pg-url", PG, "--prometheus-url", "http://prom:9090") == 0
    assert stub.folders["ett"]["title"] == "ETT"
    pg = stub.datasources["ett-postgres"]
    assert pg["type"] == "grafana-postgresql-datasource"
    assert (pg["url"], pg["user"], pg["jsonData"]["database"]) == (
        "db.example:5433",
        "ett_grafana",
        "ett",
    )
    assert pg["secureJsonData"] == {"password": "pa@ss"}
    assert stub.datasources["ett-prometheus"]["url"] == "http://prom:9090"
    committed = {p.stem: json.loads(p.read_text()) for p in (ROOT / "dashboards").glob("*.json")}
    assert stub.dashboards.keys() == committed.keys()
    for uid, d in stub.dashboards.items():
        assert d["dashboard"] == committed[uid]  # exactly the committed provisioning files
    bodies = [r.body for r in stub.requests if r.path == "/api/dashboards/db"]
    assert all(b["folderUid"] == "ett" and b["overwrite"] is True for b in bodies)
    assert "pushed" in capsys.readouterr().out


def test_alert_rules_come_from_the_collectors_rule_definitions(stub: GrafanaStub) -> None:
    from ett_collector.alerts.prometheus import expression
    from ett_collector.alerts.rules import load_rules

    assert _push(stub) == 0
    ((path, group),) = stub.rule_groups.items()
    assert path == "/api/v1/provisioning/folder/ett/rule-groups/ett"
    enabled = load_rules().enabled()
    assert [r["title"] for r in group["rules"]] == [r.name for r in enabled]
    for sent, rule in zip(group["rules"], enabled, strict=True):
        assert sent["condition"] == "C" and sent["folderUID"] == "ett"
        assert sent["data"][0]["model"]["expr"] == expression(rule)  # the same PromQL
        assert sent["data"][0]["datasourceUid"] == "ett-prometheus"
        assert sent["labels"]["rule"] == rule.name


def test_a_bad_rules_file_is_refused_before_anything_is_written(
    stub: GrafanaStub, tmp_path, capsys
) -> None:
    bad = tmp_path / "rules.yml"
    bad.write_text("rules:\n  - name: x\n    kind: nonsense\n")
    assert _push(stub, "--rules", str(bad)) == 2
    assert "rules.yml" in capsys.readouterr().err
    assert stub.requests == []


def test_a_second_push_updates_in_place(stub: GrafanaStub) -> None:
    assert _push(stub, "--pg-url", PG) == 0
    first = len(stub.writes())
    assert _push(stub, "--pg-url", PG) == 0
    second = stub.writes()[first:]
    assert not any(r.path == "/api/folders" for r in second)  # the folder exists: not re-created
    assert [r.method for r in second if "datasources" in r.path] == ["PUT"]
    assert len(stub.folders) == 1 and len(stub.datasources) == 1
    assert {d["version"] for d in stub.dashboards.values()} == {2}


def test_wrong_token_writes_nothing(stub: GrafanaStub, capsys) -> None:
    assert _push(stub, token="wrong") == 2
    err = capsys.readouterr().err
    assert "401" in err and "--token" in err and "Nothing was written" in err
    assert "Traceback" not in err
    assert stub.writes() == []


def test_forbidden_dashboards_say_what_was_written(stub: GrafanaStub, capsys) -> None:
    stub.refuse[("POST", "/api/dashboards/db")] = 403
    assert _push(stub) == 2
    err = capsys.readouterr().err
    assert "403" in err and "Editor" in err and "Already written: folder ett" in err


def test_version_conflict(stub: GrafanaStub, capsys) -> None:
    stub.refuse[("POST", "/api/dashboards/db")] = 412
    assert _push(stub) == 1
    err = capsys.readouterr().err
    assert "412" in err and "version conflict" in err and "changed by someone else" in err
    assert not stub.dashboards


def test_unreachable_server(capsys) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once we leave: nothing listens there
    assert (
        main(
            [
                "grafana",
                "push",
                "--url",
                f"http://127.0.0.1:{port}",
                "--token",
                "t",
                "--timeout",
                "2",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "cannot reach Grafana" in err and "Nothing was written" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["grafana", "push", "--token", "t"], "no Grafana URL"),
        (["grafana", "push", "--url", "grafana:3000", "--token", "t"], "http://"),
        (
            ["grafana", "push", "--url", "http://x", "--token", "t", "--pg-url", "mysql://a/b"],
            "postgresql://",
        ),
    ],
)
def test_bad_arguments(argv: list[str], needle: str, capsys, monkeypatch) -> None:
    monkeypatch.delenv("GRAFANA_URL", raising=False)
    assert main(argv) == 2
    assert needle in capsys.readouterr().err
