"""``ETT_PRUNE_ON_LOW_DISK=1``: a disk short of space answers 503, the collector prunes the
oldest ended jobs' raw spans past retention until it is not, answers 200 again, and still
serves the pruned jobs' figures; off (the default), nothing is pruned
(``ett_collector.write._disk_prune``).

The disk is real: a 16 MiB tmpfs (root only; elsewhere the test skips and says so), filled by a
file of the test's own to below ``ETT_READY_MIN_FREE_BYTES``; the collector is a real ``ett
serve`` on SQLite."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ett_collector.api._readiness import DiskWatch
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from ett_collector.write.retention import RetentionLoop
from tests.integration.test_readiness_disk import _body
from tests.support.collector_process import Collector, start_collector
from tests.support.tmpfs import mounted_tmpfs
from tests.support.waits import wait_until

MIN_FREE = 1024 * 1024
OLD_JOBS = ("old-a", "old-b", "old-c")
VOLATILE = ("computed_at", "fresh", "now", "as_of", "age_s")
KEEP = {f"ETT_RETAIN_{k}": "keep" for k in ("SPANS", "RUNS", "FIGURES", "ALERTS")}


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs at ``tmp_path/disk`` for the test's length."""
    with mounted_tmpfs(tmp_path / "disk", "16m") as where:
        yield where


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill_to(disk: Path, free: int, name: str = "filler") -> Path:
    """A file on ``disk`` that leaves about ``free`` bytes free."""
    filler = disk / name
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, _free(disk) - free))
    return filler


def _spans(db: Path, job: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(
            conn.execute("SELECT count(*) FROM spans WHERE job_id = ?", (job,)).fetchone()[0]
        )


def _post(collector: Collector, job: str, spans: int) -> None:
    import httpx

    answer = httpx.post(
        collector.url + "/v1/traces",
        content=_body(job, spans, note_chars=700),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text


def _figures(job: dict[str, Any]) -> dict[str, Any]:
    """A job's read answer without what says when it was read."""
    return {k: v for k, v in job.items() if k not in VOLATILE}


def _tail(tmp_path: Path) -> str:
    """The collector's log, its last lines."""
    log = next((tmp_path / "home").glob("collector-*.log")).read_text()
    return "\n".join(log.splitlines()[-30:])


def _prune_state(collector: Collector) -> dict[str, Any]:
    """``/healthz``'s ``disk_prune``."""
    return dict(collector.get("/healthz").json()["disk_prune"])


def _done(collector: Collector, prunes: int) -> bool:
    """A prune since ``prunes`` that made the disk ready, or nothing left to prune."""
    ready = collector.get("/readyz").status_code == 200  # a probe short of space wakes it
    state = _prune_state(collector)
    return state["status"] == "nothing left to prune" or (state["prunes"] > prunes and ready)


def test_a_short_disk_prunes_the_oldest_ended_jobs_and_is_ready_again(
    disk: Path, tmp_path: Path
) -> None:
    db = disk / "ett.db"
    env = {**KEEP, "ETT_PRUNE_ON_LOW_DISK": "1", "ETT_READY_MIN_FREE_BYTES": str(MIN_FREE)}
    collector = start_collector(tmp_path / "home", f"sqlite:///{db}", env=env)
    try:
        for job in OLD_JOBS:
            _post(collector, job, 700)  # ~0.6 MB of raw spans each
        collector.wait_computed()
        figures = {job: collector.job(job) for job in OLD_JOBS}
        with sqlite3.connect(db) as conn:  # they were last heard of an hour ago
            conn.execute("UPDATE jobs SET last_seen = last_seen - 3600")
        _post(collector, "recent", 50)  # heard of just now: not to be pruned
        collector.wait_computed()
        assert collector.get("/readyz").status_code == 200

        with sqlite3.connect(db) as conn:  # the log's bytes back first: pruning must free it
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        filler = _fill_to(disk, MIN_FREE // 2)
        assert collector.get("/readyz").status_code == 503  # short; the probe wakes the prune
        wait_until(
            lambda: collector.get("/readyz").status_code == 200,
            what="ready again",
            detail=lambda: _tail(tmp_path),
        )
        assert _prune_state(collector)["status"] == "freed"
        assert _spans(db, "old-a") == 0  # the oldest first
        assert _spans(db, "recent") == 50 and _spans(db, "old-c") == 700  # only what it took
        for job, before in figures.items():  # the figures stay as they were
            now = collector.get(f"/api/v1/jobs/{job}")
            assert now.status_code == 200
            assert _figures(now.json()) == _figures(before), job

        fillers = [filler]
        for i in range(len(OLD_JOBS) + 1):  # short again and again, until nothing is left
            prunes = _prune_state(collector)["prunes"]
            fillers.append(_fill_to(disk, MIN_FREE // 4, f"more-{i}"))
            wait_until(
                lambda n=prunes: _done(collector, n),  # type: ignore[misc]
                what="a prune, or nothing left to prune",
                detail=lambda: _tail(tmp_path),
            )
            if _prune_state(collector)["status"] == "nothing left to prune":
                break
        assert _prune_state(collector)["status"] == "nothing left to prune"
        assert collector.get("/readyz").status_code == 503
        assert all(_spans(db, job) == 0 for job in OLD_JOBS)
        assert _spans(db, "recent") == 50  # never a job heard of in its last 3 windows
        for job in OLD_JOBS:
            assert collector.get(f"/api/v1/jobs/{job}").status_code == 200
        assert "nothing left to prune" in _tail(tmp_path)

        for f in fillers:
            f.unlink()
        wait_until(lambda: collector.get("/readyz").status_code == 200, what="space back")
    finally:
        collector.stop()


def test_off_by_default_nothing_is_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'ett.db'}"
    store = Store(url)
    store.upgrade()
    try:
        pipeline = Pipeline(store, settle_s=0)
        watch = DiskWatch(str(tmp_path / "ett.db"), min_free_bytes=2**62)  # always short
        monkeypatch.delenv("ETT_PRUNE_ON_LOW_DISK", raising=False)
        off = RetentionLoop(Settings(db_url=url), pipeline, disk=watch)
        assert off.disk_prune is None and watch.on_short is None
        assert watch.short_of_space() and watch.problem() is not None  # 503, nothing woken
        monkeypatch.setenv("ETT_PRUNE_ON_LOW_DISK", "1")
        on = RetentionLoop(Settings(db_url=url), pipeline, disk=watch)
        assert on.disk_prune is not None and watch.on_short is not None
        on_pg = RetentionLoop(Settings(db_url=url), pipeline, disk=DiskWatch(None, 2**62))
        assert on_pg.disk_prune is None  # a disk not watched (PostgreSQL): nothing to do
    finally:
        store.close()
