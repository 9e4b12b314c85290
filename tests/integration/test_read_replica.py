"""A read-only collector on a real PostgreSQL hot standby: a primary and a streaming replica
(``pg_basebackup`` on 127.0.0.1), spans ingested through the primary's collector, the same
figures read through ``ett serve --read-only`` on the replica, ingest there refused."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.exc import OperationalError

from ett_cli import main
from ett_collector.storage import Store, head_revision
from ett_collector.storage._replica import replication
from tests.conftest import PG_SUPERUSER, PostgresServer, throwaway_postgres
from tests.support.collector_process import start_collector
from tests.support.ports import free_port
from tests.support.replay import encode_request, send_spans
from tests.support.waits import wait_until
from tests.support.worked_example import worked_example

pytestmark = pytest.mark.postgres

WAIT_S = 60.0


@pytest.fixture
def primary_and_replica() -> Iterator[tuple[PostgresServer, PostgresServer]]:
    """A throwaway primary and a hot standby streaming from it."""
    with throwaway_postgres(prefix="ett-primary-") as primary:
        root = Path(tempfile.mkdtemp(prefix="ett-replica-"))
        if primary.prefix:
            shutil.chown(root, user=PG_SUPERUSER, group=None)
        replica = PostgresServer(primary.bindir, root, free_port(), primary.prefix)
        try:
            subprocess_args = [
                "-h",
                "127.0.0.1",
                "-p",
                str(primary.port),
                "-U",
                primary.user,
                "-D",
                str(replica.datadir),
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ]
            replica._run(str(primary.bindir / "pg_basebackup"), *subprocess_args)
            replica.launch()
            yield primary, replica
        finally:
            replica.stop()
            shutil.rmtree(root, ignore_errors=True)


def test_read_only_collector_serves_the_primarys_figures(
    primary_and_replica: tuple[PostgresServer, PostgresServer], tmp_path: Path
) -> None:
    primary, replica = primary_and_replica
    url = primary.create_database("ett")
    writer = start_collector(tmp_path / "primary", db_url=url)
    reader = None
    try:
        assert send_spans(worked_example("rep-job", base=time.time() - 1000), writer.url) == 44
        figures = writer.wait_ended("rep-job")
        lost = writer.get("/api/v1/lost-time", group_by="team").json()

        standby = Store(replica.url("ett"))  # the schema reaches the standby, then the figures
        wait_until(lambda: standby.revision() == head_revision(), what="the standby's schema")
        reader = start_collector(
            tmp_path / "replica", db_url=replica.url("ett"), env={"ETT_READ_ONLY": "1"}
        )
        got = wait_until(
            lambda: (r := reader.get("/api/v1/jobs/rep-job")).status_code == 200 and r.json(),
            what="the figures on the standby",
        )
        assert got == figures  # the same stored figures, computed_at and all
        assert got["ett_pct"] == pytest.approx(60.0)
        assert reader.get("/api/v1/lost-time", group_by="team").json() == lost
        assert reader.get("/api/v1/jobs/rep-job/segments").json() == (
            writer.get("/api/v1/jobs/rep-job/segments").json()
        )
        assert reader.get("/api/v1/fleet", since="1d").status_code == 200
        assert b"ett_" in reader.get("/metrics").content

        health = reader.get("/healthz").json()
        assert health["read_only"] is True and health["standby"] is True
        assert health["jobs"] == 1 and 0 <= health["replication_lag_s"] < WAIT_S
        assert writer.get("/healthz").json().get("read_only") is None
        assert reader.get("/readyz").json() == {"status": "ready", "read_only": True}

        body = encode_request(worked_example("refused", base=time.time()))
        r = httpx.post(
            reader.url + "/v1/traces",
            content=body,
            timeout=30,
            headers={"Content-Type": "application/x-protobuf"},
        )
        assert r.status_code == 403 and b"read-only" in r.content
        assert "refused" not in [j["job_id"] for j in reader.get("/api/v1/jobs").json()]
        standby.close()
    finally:
        writer.stop()
        if reader is not None:
            reader.stop()


def test_a_restarted_standby_of_an_idle_primary_is_not_behind(
    primary_and_replica: tuple[PostgresServer, PostgresServer],
) -> None:
    """After a restart the standby's WAL receiver reports the start of the segment it streams
    from, behind what the standby has replayed, until the primary writes again: that is caught
    up (the lag once grew by the second there, as the age of the last commit)."""
    primary, replica = primary_and_replica
    writer = Store(primary.create_database("ett"))
    writer.upgrade()  # some commits: then the primary stays idle
    standby = Store(replica.url("ett"))
    wait_until(lambda: replication(standby.engine)["replication_lag_s"] == 0.0, what="catch-up")
    wait_until(lambda: standby.revision() == head_revision(), what="the standby's schema")
    standby.engine.dispose()
    replica.restart()

    def streaming() -> tuple[Any, ...] | None:
        with standby.engine.connect() as conn:
            row = conn.exec_driver_sql(
                "SELECT status, pg_last_wal_receive_lsn() < pg_last_wal_replay_lsn()"
                " FROM pg_stat_wal_receiver"
            ).first()
        return tuple(row) if row is not None and row[0] == "streaming" else None

    status, receive_behind_replay = wait_until(
        streaming, what="the restarted standby to stream", ignore=(OperationalError,)
    )
    state = replication(standby.engine)
    expected = {"standby": True, "replication_lag_s": 0.0, "replication_streaming": True}
    assert state == expected, (status, receive_behind_replay)
    writer.close()
    standby.close()


def test_a_standby_whose_primary_is_gone_says_so_and_is_not_ready(
    primary_and_replica: tuple[PostgresServer, PostgresServer], tmp_path: Path
) -> None:
    """With its primary stopped, the standby's WAL receiver is gone but its receive position
    keeps its last value: the lag once read 0.0 (and /readyz 200) for as long as the primary was
    away. Now /healthz says it is not streaming and the lag grows (the age of the newest
    replayed commit), /readyz is 503 past ETT_READY_MAX_LAG_S, /metrics has the gauges, and the
    log says once that streaming stopped and once that it resumed."""
    primary, replica = primary_and_replica
    writer = Store(primary.create_database("ett"))
    writer.upgrade()  # commits, replayed on the standby: its newest commit has a time
    standby = Store(replica.url("ett"))
    wait_until(lambda: standby.revision() == head_revision(), what="the standby's schema")
    standby.close()
    writer.close()
    reader = start_collector(
        tmp_path / "replica",
        db_url=replica.url("ett"),
        env={"ETT_READ_ONLY": "1", "ETT_READY_MAX_LAG_S": "2"},
    )
    try:
        health = wait_until(
            lambda: (h := reader.get("/healthz").json())["replication_streaming"] and h,
            what="the standby to stream",
        )
        assert health["replication_lag_s"] == 0.0
        assert reader.get("/readyz").status_code == 200
        metrics = reader.get("/metrics").text
        assert "ett_replication_lag_seconds 0.0" in metrics
        assert "ett_replication_streaming 1.0" in metrics

        primary.halt()
        first = wait_until(
            lambda: (h := reader.get("/healthz").json())["replication_streaming"] is False and h,
            what="/healthz to say the standby is not streaming",
        )
        assert first["replication_lag_s"] is not None
        later = wait_until(
            lambda: (
                (h := reader.get("/healthz").json())["replication_lag_s"]
                > first["replication_lag_s"] + 1
                and h
            ),
            what="the lag to grow",
        )
        assert later["replication_streaming"] is False and later["status"] == "ok"
        ready = wait_until(
            lambda: (r := reader.get("/readyz")).status_code == 503 and r, what="not ready"
        )
        error = ready.json()["error"]
        assert "not streaming from its primary" in error and "ETT_READY_MAX_LAG_S=2" in error
        metrics = reader.get("/metrics").text
        assert "ett_replication_streaming 0.0" in metrics
        assert "ett_replication_lag_seconds " in metrics
        assert reader.get("/api/v1/jobs").status_code == 200  # reads are still answered

        primary.launch()
        wait_until(
            lambda: reader.get("/healthz").json()["replication_streaming"],
            what="streaming again",
        )
        wait_until(lambda: reader.get("/readyz").status_code == 200, what="ready again")
        log = "".join(p.read_text() for p in (tmp_path / "replica").glob("collector-*.log"))
        assert log.count("the standby is not streaming from its primary") == 1, log
        assert log.count("the standby streams from its primary again") == 1, log
        assert "Traceback" not in log
    finally:
        reader.stop()


def test_simulate_refuses_a_standby_in_one_line(
    primary_and_replica: tuple[PostgresServer, PostgresServer], capsys: pytest.CaptureFixture[str]
) -> None:
    """``ett simulate --db`` refuses a hot standby before writing, as ``ett db prune`` does
    (it once failed at its first INSERT: ``ReadOnlySqlTransaction: cannot execute INSERT in a
    read-only transaction``)."""
    primary, replica = primary_and_replica
    writer = Store(primary.create_database("ett"))
    writer.upgrade()
    standby = Store(replica.url("ett"))
    wait_until(lambda: standby.revision() == head_revision(), what="the standby's schema")
    standby.close()
    argv = ["simulate", "--jobs", "2", "--days", "1", "--db", replica.url("ett")]
    assert main(argv) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert (
        lines[0].startswith("ett simulate: database ")
        and "is read-only: it is a hot standby" in lines[0]
    )
    assert "run `ett simulate --db` against the primary" in lines[0]
    with writer.engine.connect() as conn:  # nothing reached the primary either
        assert conn.exec_driver_sql("SELECT count(*) FROM jobs").scalar() == 0
    writer.close()


def test_read_only_refuses_a_database_behind_the_schema(
    primary_and_replica: tuple[PostgresServer, PostgresServer], tmp_path: Path
) -> None:
    primary, replica = primary_and_replica
    primary.create_database("empty")
    standby = Store(replica.url("empty"))
    wait_until(lambda: _exists(standby), what="the database on the standby")
    with pytest.raises(RuntimeError, match=r"--read-only: the database .* is at schema none"):
        start_collector(tmp_path / "r", db_url=replica.url("empty"), env={"ETT_READ_ONLY": "1"})
    standby.close()


def _exists(store: Store) -> bool:
    try:
        store.revision()
    except Exception:
        return False
    return True
