"""`ett grafana build [--check]`: the committed provisioning files match the code; the dashboards
parse as the SDK's schema types; Grafana's macros expand as Grafana expands them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from grafana_foundation_sdk.models.dashboard import Dashboard

from ett_cli import main
from ett_grafana._macros import MacroError, expand
from ett_grafana._provisioning import MANIFEST, render, stale, write
from ett_grafana._queries import POSTGRES_UID, PROMETHEUS_UID


def test_committed_files_are_up_to_date(capsys) -> None:
    assert main(["grafana", "build", "--check"]) == 0, capsys.readouterr().out
    assert stale() == []


def test_check_names_stale_missing_and_extra_files(tmp_path: Path, capsys) -> None:
    out = tmp_path / "provisioning"
    write(out)
    dashboards = out / "dashboards"
    (dashboards / "ett-job.json").write_text("{}\n")
    (dashboards / "ett-fleet.json").unlink()
    (dashboards / "old.json").write_text("{}\n")  # one a build wrote and no longer produces
    (out / MANIFEST).write_text((out / MANIFEST).read_text() + "dashboards/old.json\n")
    assert main(["grafana", "build", "--check", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "differs: dashboards/ett-job.json" in captured.out
    assert "missing: dashboards/ett-fleet.json" in captured.out
    assert "extra: dashboards/old.json" in captured.out
    assert "stale" in captured.err
    assert main(["grafana", "build", "--out", str(out)]) == 0
    assert stale(out) == []
    assert write(out) == []  # a second build changes nothing


def test_a_build_into_a_users_folder_removes_only_what_it_wrote(tmp_path: Path, capsys) -> None:
    """``--out /etc/grafana/provisioning`` holds other dashboards and data sources: a build
    never removes a file it did not write, and removes one it wrote and no longer produces."""
    out = tmp_path / "provisioning"
    theirs = {"other/my-dashboard.json": "{}\n", "compose.yaml": "a: 1\n", "package.json": "{}\n"}
    for rel, text in theirs.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    assert main(["grafana", "build", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert all(rel not in printed for rel in theirs) and "removed" not in printed
    assert all((out / rel).read_text() == text for rel, text in theirs.items())
    retired = out / "dashboards" / "ett-retired.json"  # as if an older version had written it
    retired.write_text("{}\n")
    manifest = out / MANIFEST
    manifest.write_text(manifest.read_text() + "dashboards/ett-retired.json\n")
    assert stale(out) == ["extra: dashboards/ett-retired.json"]
    assert write(out) == [("removed", "dashboards/ett-retired.json")]
    assert not retired.exists() and all((out / rel).exists() for rel in theirs)
    assert stale(out) == []


def test_build_into_a_file_or_a_stale_check_say_what_to_do(tmp_path: Path, capsys) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["grafana", "build", "--out", str(afile)]) == 2
    err = capsys.readouterr().err
    assert "a file is there, not a folder" in err and "Traceback" not in err
    out = tmp_path / "gf"
    assert main(["grafana", "build", "--check", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"run `ett grafana build --out {out}`" in err and "commit" not in err


def test_dashboards_parse_as_the_sdk_schema_types() -> None:
    files = render()
    dashboards = {k: v for k, v in files.items() if k.endswith(".json")}
    assert len(dashboards) == 4
    for path, text in dashboards.items():
        data = json.loads(text)
        model = Dashboard.from_json(data)
        again = json.loads(json.dumps(model.to_json(), default=lambda o: o.to_json()))
        again["schemaVersion"] = data["schemaVersion"]
        assert again == data, path
        assert data["uid"] == Path(path).stem
        ids = [p["id"] for p in data["panels"]]
        assert ids == list(range(1, len(ids) + 1))
        for panel in data["panels"]:
            for target in panel.get("targets", []):
                assert target["datasource"]["uid"] in (POSTGRES_UID, PROMETHEUS_UID)
                if target["datasource"]["uid"] == POSTGRES_UID:
                    assert "ett_v1_" in target["rawSql"]  # only the stable views


def test_only_a_job_id_links_to_the_job_drill_down() -> None:
    """The fleet's Jobs table linked every cell: a model cell opened the drill-down of job
    "dlrm-small", an ETT cell that of job "93.4"; the id was not percent-encoded."""
    fleet = json.loads(next(v for k, v in render().items() if k.endswith("ett-fleet.json")))
    (jobs,) = [p for p in fleet["panels"] if p["title"] == "Jobs"]
    assert "links" not in jobs["fieldConfig"]["defaults"]
    (override,) = jobs["fieldConfig"]["overrides"]
    assert override["matcher"] == {"id": "byName", "options": "job_id"}
    (links,) = [p["value"] for p in override["properties"] if p["id"] == "links"]
    assert "var-job_id=${__value.raw:percentencode}" in links[0]["url"]


def test_datasource_and_provider_files() -> None:
    files = render()
    ds = yaml.safe_load(files["datasources/ett.yaml"])
    assert {d["uid"] for d in ds["datasources"]} == {POSTGRES_UID, PROMETHEUS_UID}
    provider = yaml.safe_load(files["dashboards/ett.yaml"])["providers"][0]
    assert provider["folderUid"] == "ett" and provider["type"] == "file"
    assert all(text.endswith("\n") for text in files.values())


def test_macros_expand_as_grafana_does() -> None:
    sql = (
        "SELECT $__timeGroupAlias(bucket, $bucket), $__time(t) FROM v "
        "WHERE $__timeFilter(bucket) AND x >= $__unixEpochFrom() AND y < $__unixEpochTo() "
        "AND model IN ($model) AND job_id = '$job_id' AND $__unixEpochFilter(s) "
        "AND g = $__unixEpochGroup(s, '5m')"
    )
    out = expand(
        sql,
        1_700_000_000,
        1_700_003_600,
        {"bucket": "1d", "model": ["dlrm", "o'brien"], "job_id": "j-1"},
    )
    assert out == (
        'SELECT floor(extract(epoch from bucket)/86400)*86400 AS "time", t AS "time" FROM v '
        "WHERE bucket BETWEEN '2023-11-14T22:13:20Z' AND '2023-11-14T23:13:20Z' "
        "AND x >= 1700000000 AND y < 1700003600 AND model IN ('dlrm','o''brien') "
        "AND job_id = 'j-1' AND s >= 1700000000 AND s <= 1700003600 "
        "AND g = floor(s/300)*300"
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT $__nope(x)", "unknown macro"),
        ("SELECT $__timeGroup(x)", "interval"),
        ("SELECT $__timeGroup(x, soon)", "cannot read interval"),
        ("SELECT $missing", "no value"),
    ],
)
def test_macro_errors(sql: str, message: str) -> None:
    with pytest.raises(MacroError, match=message):
        expand(sql, 0, 1, {})
