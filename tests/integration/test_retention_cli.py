"""``ett db prune`` and ``ett recompute`` of a pruned job, in-process; a prune killed by SIGKILL
in a real subprocess leaves a consistent database that the next prune finishes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ett_cli import main
from ett_collector.storage import Store
from ett_collector.storage._retention import SPANS_GOING, SPANS_GONE, Policy, Retention
from ett_collector.write.pipeline import Outcome, Pipeline
from tests.support.layout import ROOT
from tests.support.spans import first_batch, window
from tests.support.waits import wait_until
from tests.support.worked_example import worked_example

DAY = 86400.0
OLD = time.time() - 40 * DAY


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A database with a job 40 days old and one from an hour ago; windows 10 ms long, so the
    jobs are quiet (3 windows without a span) at once."""
    monkeypatch.setenv("ETT_WINDOW_S", "0.01")
    for name in ("ETT_RETAIN_SPANS", "ETT_RETAIN_RUNS", "ETT_RETAIN_FIGURES", "ETT_DB_URL"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    pipeline.ingest(worked_example("old-job", base=OLD))
    pipeline.ingest(worked_example("new-job", base=time.time() - 3600))
    pipeline.recompute_dirty()
    store.close()
    time.sleep(0.05)  # elapsed time, not a wait: the 3 windows of quiet (30 ms) of an ended job
    return url


def test_dry_run_says_what_would_go_and_deletes_nothing(db: str, capsys) -> None:
    assert main(["db", "prune", "--dry-run", "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("would delete: raw spans of 1 job(s) (44 spans)")
    assert "figures of 0 job(s)" in out
    assert len(Store(db).load_spans("old-job", raw=True)) == 44


def test_prune_then_recompute_refuses_and_keeps_the_figures(db: str, capsys) -> None:
    store = Store(db)
    before = store.get_job("old-job")
    assert main(["db", "prune", "--db", db]) == 0
    assert capsys.readouterr().out.startswith("deleted: raw spans of 1 job(s) (44 spans)")
    assert store.load_spans("old-job", raw=True) == []
    assert len(store.load_spans("new-job", raw=True)) == 44

    assert main(["recompute", "old-job", "--db", db]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "ett recompute: job 'old-job' cannot be recomputed: its raw spans were pruned"
    )
    assert "stored figures are kept as they are" in err and "\n" not in err
    assert main(["recompute", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "recomputed 1 job(s)" in out and "1 job(s) kept their stored figures" in out
    assert store.get_job("old-job") == before
    assert main(["report", "old-job", "--json", "--db", db]) == 0
    note = capsys.readouterr().err.strip()
    assert note.startswith("ett report: note: the job's raw spans were pruned at ")
    assert "stored figures are kept as they are" in note and "\n" not in note
    assert main(["report", "new-job", "--json", "--db", db]) == 0
    assert capsys.readouterr().err == ""
    store.close()


def test_bad_retention_is_one_line(db: str, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ETT_RETAIN_SPANS", "soon")
    assert main(["db", "prune", "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert "ETT_RETAIN_SPANS='soon' is not a retention period" in err and "\n" not in err


PRUNER = textwrap.dedent(
    """
    import sys
    from ett_collector.storage import Store
    from ett_collector.storage._retention import Policy, Retention
    store = Store(sys.argv[1])
    policy = Policy(spans_s=30 * 86400.0, runs_s=None, figures_s=None, alerts_s=None, quiet_s=0)
    Retention(store.engine, policy, batch_rows=50, pause_s=0.01).run()
    print("finished", flush=True)
    """
)


def _count(path: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def test_a_prune_killed_by_sigkill_leaves_it_consistent(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    url = f"sqlite:///{path}"
    store = Store(url, raw_window_retention_s=None)
    store.upgrade()
    pipeline = Pipeline(store)
    spans = [first_batch(OLD, job="big")]
    spans += [window(OLD + i, OLD + i + 1, job="big") for i in range(20_000)]
    pipeline.ingest(spans)
    pipeline.recompute_dirty()
    before, segments = store.get_job("big"), store.get_segments("big")
    store.close()

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", PRUNER, url],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    try:
        while _count(path, "SELECT count(*) FROM spans") > 20_001 - 500:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the prune never started deleting"
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    left = _count(path, "SELECT count(*) FROM spans")
    assert 0 < left < 20_001  # killed part-way
    assert _count(path, "SELECT pruned FROM jobs") == SPANS_GOING
    store = Store(url)
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    assert store.get_job("big") == before and store.get_segments("big") == segments
    assert Pipeline(store).recompute_job("big") is Outcome.PRUNED  # no figures from a part

    policy = Policy(spans_s=30 * DAY, runs_s=None, figures_s=None, alerts_s=None, quiet_s=0)
    done = Retention(store.engine, policy).run()  # the next pass finishes the job
    assert done.spans == left and store.load_spans("big", raw=True) == []
    assert _count(path, "SELECT pruned FROM jobs") == SPANS_GONE
    assert store.get_job("big") == before
    store.close()


def test_the_service_prunes_by_itself(db: str) -> None:
    from ett_collector.settings import Settings
    from ett_collector.write.retention import RetentionLoop

    store = Store(db)
    pipeline = Pipeline(store)
    loop = RetentionLoop(Settings(db_url=db), pipeline, every_s=3600)
    loop.start()  # a pass runs at once, then every hour
    try:
        wait_until(lambda: not store.load_spans("old-job", raw=True), 30, "the old job's prune")
    finally:
        loop.stop()
    assert loop.last is not None and loop.last.spans == 44
    assert len(store.load_spans("new-job", raw=True)) == 44
    store.close()
