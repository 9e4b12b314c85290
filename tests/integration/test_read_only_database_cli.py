"""Commands that write refuse a database they cannot write to, in one line and before they
touch it: a PostgreSQL whose sessions are read-only (as on a hot standby, or a read-only role),
a SQLite file this user may not write. ``ett serve --read-only`` is for a PostgreSQL standby:
on SQLite it is refused, on a primary it says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from ett_cli import main
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.errors import one_line
from tests.support.ports import free_port
from tests.support.worked_example import worked_example

READ_ONLY_SESSIONS = "-c default_transaction_read_only=on"


def _with_a_job(url: str) -> dict[str, object]:
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    pipeline.ingest(worked_example("job-1"))
    pipeline.recompute_dirty()
    job = store.get_job("job-1")
    store.close()
    assert job is not None
    return job


@pytest.mark.postgres
def test_writing_commands_refuse_read_only_sessions(
    fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    before = _with_a_job(fresh_postgres_url)
    monkeypatch.setenv("PGOPTIONS", READ_ONLY_SESSIONS)  # every new session starts read-only
    for argv, prefix, what in (
        (["recompute", "job-1"], "ett recompute:", "run `ett recompute` against the primary"),
        (["recompute"], "ett recompute:", "run `ett recompute` against the primary"),
        (["db", "prune"], "ett db prune:", "run `ett db prune` against the primary"),
    ):
        assert main([*argv, "--db", fresh_postgres_url]) == 1, argv
        line = one_line(capsys.readouterr().err)
        assert line.startswith(prefix) and what in line, line
        assert "is read-only: its sessions are read-only" in line
    assert main(["db", "prune", "--dry-run", "--db", fresh_postgres_url]) == 0  # reads only
    assert capsys.readouterr().out.startswith("would delete:")

    argv = ["serve", "--port", str(free_port()), "--db", fresh_postgres_url]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert "is read-only" in line and "serve its reads with --read-only" in line
    monkeypatch.delenv("PGOPTIONS")
    store = Store(fresh_postgres_url)
    assert store.get_job("job-1") == before and not store.is_dirty("job-1")
    store.close()


@pytest.mark.postgres
def test_read_only_on_a_primary_says_it_is_not_a_standby(fresh_postgres_url: str, capsys) -> None:
    import dataclasses

    from ett_collector.commands import _target
    from ett_collector.commands.serve_commands import _prepare_database
    from ett_collector.settings import Settings

    _with_a_job(fresh_postgres_url)
    settings = dataclasses.replace(Settings(db_url=fresh_postgres_url), read_only=True)
    _prepare_database(settings, _target.resolve(fresh_postgres_url))
    line = one_line(capsys.readouterr().err)
    assert "is not a hot standby but a database that takes writes" in line


def test_read_only_is_refused_on_sqlite_and_creates_nothing(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "none" / "c.db"
    argv = ["serve", "--read-only", "--port", str(free_port()), "--db", str(missing)]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("ett serve: --read-only serves the reads of a PostgreSQL hot standby")
    assert "SQLite file" in line and not (tmp_path / "none").exists()


def test_prune_of_a_missing_database_creates_nothing(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "typo" / "x.db"
    for argv in (["db", "prune", "--dry-run"], ["db", "prune"]):
        assert main([*argv, "--db", str(missing)]) == 1
        line = one_line(capsys.readouterr().err)
        assert line.startswith("ett db prune: database") and "does not exist" in line
        assert "check the path" in line
    assert not (tmp_path / "typo").exists()


def test_an_unwritable_sqlite_file_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from ett_collector.commands import _target

    path = tmp_path / "theirs.db"
    before = _with_a_job(f"sqlite:///{path}")
    # this suite may run as root, whom file modes do not stop: the check's own view of it
    monkeypatch.setattr(_target.os, "access", lambda p, mode: Path(p) != path)
    assert main(["recompute", "job-1", "--db", str(path)]) == 1
    line = one_line(capsys.readouterr().err)
    assert f"{path} is not writable by this user" in line and "`ett recompute`" in line
    assert Store(f"sqlite:///{path}").get_job("job-1") == before


@pytest.mark.postgres
def test_reads_of_a_read_only_database_never_recompute(
    fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    """On a database that refuses writes (a hot standby, read-only sessions) ``ett report`` of a
    job with spans newer than its figures once tried to recompute it and printed ~230 lines of
    ``ReadOnlySqlTransaction`` tracebacks; one with no figures yet said "try again shortly",
    which nothing there would ever make true. Now: the stored figures with one line of note,
    or one line saying the primary's collector computes them; ``ett serve --read-only``
    answers that job 404 with the same reason."""
    from tests.support.collector_process import start_collector

    before = _with_a_job(fresh_postgres_url)
    store = Store(fresh_postgres_url)
    Pipeline(store).ingest(worked_example("job-2"))  # spans, no figures: the collector is down
    with store.engine.begin() as conn:  # a span newer than job-1's figures
        conn.exec_driver_sql(
            "UPDATE jobs SET dirty = true, dirty_seq = dirty_seq + 1 WHERE job_id = 'job-1'"
        )
    store.close()
    monkeypatch.setenv("PGOPTIONS", READ_ONLY_SESSIONS)

    assert main(["report", "job-1", "--db", fresh_postgres_url]) == 0
    out, err = capsys.readouterr()
    line = one_line(err)
    assert line.startswith("ett report: note: the database is read-only"), line
    assert "newer spans are not included" in line and "primary's collector" in line
    assert "newer spans not included yet" in out

    assert main(["report", "job-1", "--json", "--db", fresh_postgres_url]) == 0
    out, err = capsys.readouterr()
    assert "note: the database is read-only" in one_line(err)
    assert '"fresh": false' in out

    assert main(["report", "job-2", "--db", fresh_postgres_url]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith("ett report: job 'job-2' has spans but no figures"), line
    assert "computed by the primary's collector" in line and "try again" not in line

    assert main(["jobs", "--db", fresh_postgres_url]) == 0
    line = one_line(capsys.readouterr().err)
    assert "have spans newer than their figures" in line and "read-only" in line
    assert "ett recompute" not in line

    reader = start_collector(
        tmp_path / "ro",
        db_url=fresh_postgres_url,
        env={"ETT_READ_ONLY": "1", "ETT_READ_WAIT_S": "5"},
    )
    try:
        r = reader.get("/api/v1/jobs/job-2")
        assert r.status_code == 404 and "computed by the primary's collector" in r.text, r.text
        r = reader.get("/api/v1/jobs/job-1")
        assert r.status_code == 200 and r.json()["fresh"] is False
    finally:
        reader.stop()
    log = "".join(p.read_text() for p in (tmp_path / "ro").glob("collector-*.log"))
    assert "Traceback" not in log, log
    monkeypatch.delenv("PGOPTIONS")
    store = Store(fresh_postgres_url)
    assert store.get_job("job-1") == before and store.get_job("job-2") is None
    store.close()


@pytest.mark.postgres
def test_a_read_only_database_at_another_schema_is_told_what_helps(
    fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """At an older schema, read-only sessions (as on a hot standby): ``ett db upgrade`` once
    failed with the driver's "cannot execute ALTER TABLE in a read-only transaction", and
    ``ett recompute`` said to run ``ett db upgrade --db`` on it. At a newer schema, ``ett serve
    --read-only`` said to run ``ett db upgrade`` against the primary, which cannot help."""
    from alembic import command

    from ett_collector.storage import _migrate, head_revision

    store = Store(fresh_postgres_url)
    store.upgrade()
    older = _migrate.applied_between(None, head_revision())[-2]
    with store.engine.begin() as conn:
        cfg = _migrate.alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, older)
    monkeypatch.setenv("PGOPTIONS", READ_ONLY_SESSIONS)
    for argv, what in (
        (["db", "upgrade"], "run `ett db upgrade` against the primary"),
        (["recompute"], "run `ett recompute` against the primary"),
        (["recompute", "job-1"], "run `ett recompute` against the primary"),
        (["db", "prune"], "run `ett db prune` against the primary"),
    ):
        assert main([*argv, "--db", fresh_postgres_url]) == 1, argv
        line = one_line(capsys.readouterr().err)
        assert "is read-only: its sessions are read-only" in line and what in line, line
        assert "upgrade --db" not in line, line
    assert main(["jobs", "--db", fresh_postgres_url]) == 1
    line = one_line(capsys.readouterr().err)
    assert f"is at schema {older}" in line and "it is read-only" in line, line
    assert "run `ett db upgrade` against the primary" in line and "upgrade --db" not in line
    monkeypatch.delenv("PGOPTIONS")
    assert store.revision() == older  # nothing was applied

    with store.engine.begin() as conn:  # a newer ett's schema
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0099'")
    store.close()
    argv = ["serve", "--read-only", "--port", str(free_port()), "--db", fresh_postgres_url]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert "at schema 0099, which is none of this ett's migrations" in line, line
    assert "serve it with the ett that made it" in line and "ett db upgrade" not in line
