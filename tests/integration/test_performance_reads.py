"""The performance figures where users read them (issue 26): the job view
``GET /api/v1/jobs/{id}/performance?buckets=N`` and the ``ett report`` section, on a real store."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from ett import semconv as sc
from ett_cli import main
from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.served_app import get_all
from tests.support.spans import attempt_end, data_wait, failure, first_batch, window

T0 = 1_790_000_040.0


def _spans(job: str) -> list[object]:
    """Two ranks, 30 windows of 10 s and 100 steps; rank 1 computes 0.08 s a step, rank 0
    0.04 s (and waits the rest of each 0.1 s step)."""
    out: list[object] = []
    for rank in (0, 1):
        out.append(first_batch(T0, rank=rank, job=job))
        for i in range(30):
            wait = 10.0 - 100 * (0.08 if rank == 1 else 0.04)
            attrs = {sc.STEP_FIRST: 100 * i, sc.STEP_LAST: 100 * i + 99, sc.SAMPLES: 3200}
            attrs[sc.WINDOW_WAIT_S] = wait
            out.append(window(T0 + 10 * i, T0 + 10 * i + 10, rank=rank, job=job, **attrs))
        out.append(attempt_end(T0 - 5, T0 + 301, "completed", rank=rank, job=job))
    return out


def _restarted(job: str) -> list[object]:
    """Two ranks; attempt 0 trains 30 windows of 10 s and 100 steps, the last 8 at half pace
    (40 s slow in all), and fails with no checkpoint (all of it unsaved); attempt 1 trains 3
    clean windows."""
    out: list[object] = []
    for attempt, (t0, n) in enumerate(((T0, 30), (T0 + 400, 3))):
        for rank in (0, 1):
            kw: dict[str, object] = {"attempt": attempt, "rank": rank, "job": job}
            out.append(first_batch(t0, **kw))
            step = 0
            for i in range(n):
                steps = 50 if attempt == 0 and i >= n - 8 else 100
                attrs = {sc.STEP_FIRST: step, sc.STEP_LAST: step + steps - 1}
                attrs[sc.SAMPLES] = 32 * steps
                out.append(window(t0 + 10 * i, t0 + 10 * i + 10, **kw, **attrs))
                step += steps
            end = t0 + 10 * n
            if attempt == 0:
                out.append(failure(end, "unknown", **kw, **{sc.STEP: step}))
                out.append(attempt_end(t0 - 5, end, "failed", "unknown", **kw))
            else:
                out.append(attempt_end(t0 - 5, end + 1, "completed", **kw))
    return out


def _stalling(job: str, double: bool = False) -> list[object]:
    """Two ranks, 20 windows of 10 s of 100 steps of 0.1 s plus a 1 s data wait (the loader
    stalls: no window steady), windows 10 and 11 2 s slower. With ``double`` rank 1 counts
    every step twice (one ``step()`` per micro-batch)."""
    out: list[object] = []
    for rank in (0, 1):
        out.append(first_batch(T0, rank=rank, job=job))
        t, step = T0, 0
        for i in range(20):
            secs = 11.0 + (2.0 if i in (10, 11) else 0.0)
            steps = 200 if double and rank == 1 else 100
            attrs = {sc.STEP_FIRST: step, sc.STEP_LAST: step + steps - 1, sc.SAMPLES: 3200}
            attrs[sc.WINDOW_WAIT_S] = secs - 5.0  # both ranks compute 5 s a window
            out.append(window(t, t + secs, rank=rank, job=job, **attrs))
            if rank == 0:
                out.append(data_wait(t + 0.5, t + 1.5, rank=rank, job=job))
            t, step = t + secs, step + steps
        out.append(attempt_end(T0 - 5, t + 1, "completed", rank=rank, job=job))
    return out


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'perf.db'}"
    store = Store(url, raw_window_retention_s=60.0)  # some windows compacted, some raw
    store.upgrade()
    pipeline = Pipeline(store)
    pipeline.ingest(_spans("perf-job"))  # type: ignore[arg-type]
    pipeline.recompute_dirty()
    store.close()
    return url


@pytest.fixture
def loop_db(tmp_path: Path) -> str:
    """The restarted, stalling and double-counting jobs, every window raw."""
    url = f"sqlite:///{tmp_path / 'loop.db'}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    spans = _restarted("restart-job") + _stalling("stall-job")
    pipeline.ingest(spans + _stalling("double-job", double=True))  # type: ignore[arg-type]
    pipeline.recompute_dirty()
    store.close()
    return url


def _get(url: str, paths: list[str]) -> list[httpx.Response]:
    store = Store(url)
    try:
        return get_all(create_app(Settings(db_url=url), Pipeline(store)), paths)
    finally:
        store.close()


def test_the_performance_view_is_sized_by_buckets(db: str) -> None:
    ok, other, bad, missing = _get(
        db,
        [
            "/api/v1/jobs/perf-job/performance?buckets=12",
            "/api/v1/jobs/perf-job/performance",
            "/api/v1/jobs/perf-job/performance?buckets=0",
            "/api/v1/jobs/nope/performance",
        ],
    )
    assert ok.status_code == 200, ok.text
    perf = ok.json()
    assert len(perf["series"]) == 12 and len(other.json()["series"]) == 60
    assert perf["ideal_step_s"] == pytest.approx(0.1)
    assert perf["steps"] == 3000
    assert perf["straggler"]["rank"] == 1
    assert perf["straggler"]["score"] == pytest.approx(2.0)
    assert perf["straggler"]["others_wait_share"] == pytest.approx(0.6)
    assert perf["productive_s"] is not None and perf["slow_pct"] == pytest.approx(0.0)
    assert bad.status_code == 400 and "buckets" in bad.json()["error"]
    assert missing.status_code == 404


def test_the_job_object_embeds_the_views_figures(db: str) -> None:
    """``GET /api/v1/jobs/{id}`` carries the ``performance`` block (no series, no per-rank
    scores) with the same figures as the job's ``/performance`` view, for an ended job."""
    job, view = (
        r.json() for r in _get(db, ["/api/v1/jobs/perf-job", "/api/v1/jobs/perf-job/performance"])
    )
    block = job["performance"]
    assert "series" not in block and "stragglers" not in block and "loop_facts" not in job
    expected = {
        k: v for k, v in view.items() if k not in ("series", "stragglers", "job_id", "productive_s")
    }
    assert block == expected
    assert block["straggler"]["rank"] == 1 and block["ideal_step_s"] == pytest.approx(0.1)
    assert job["ett_pct"] > 0


def test_report_prints_the_performance_section(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "perf-job", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "Inside the loop" in out and "100.0 ms" in out
    assert "rank 1 (attempt 0): computes 2.00x" in out
    assert main(["report", "perf-job", "--json", "--db", db]) == 0
    job = json.loads(capsys.readouterr().out)
    assert job["performance"]["straggler"]["rank"] == 1 and "series" not in job["performance"]
    assert job["ett_pct"] > 0  # the ETT figures are still all there


def test_report_json_is_the_api_object(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``ett report --json`` printed the view's block (with ``job_id``, ``productive_s`` and
    every rank's ``stragglers``) where the API's job object has its own, smaller one."""
    assert main(["report", "perf-job", "--json", "--db", db]) == 0
    report = json.loads(capsys.readouterr().out)
    (api,) = (r.json() for r in _get(db, ["/api/v1/jobs/perf-job"]))
    assert report == api and "stragglers" not in report["performance"]


def test_report_of_a_job_without_windows_has_no_performance_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    pipeline.ingest([attempt_end(T0, T0 + 60, "completed", job="idle-job")])
    pipeline.recompute_dirty()
    store.close()
    assert main(["report", "idle-job", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "Job idle-job" in out and "Inside the loop" not in out


def test_a_failed_attempts_slow_time_is_a_share_of_its_own_stepping(
    loop_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slow time over every attempt was divided by ETT's productive seconds, which leave out
    the failed attempt's unsaved training: "(133.3% of productive)". Now a share of the same
    windows' stepping time."""
    (perf,) = (r.json() for r in _get(loop_db, ["/api/v1/jobs/restart-job/performance"]))
    assert perf["slow_s"] == pytest.approx(40.0)  # 8 windows x 5 s, median of the ranks
    assert perf["productive_s"] < perf["slow_s"]  # attempt 1's 30 s: the old base
    assert perf["slow_pct"] <= 100.0
    assert perf["stepping_s"] == pytest.approx(29 * 10.0 + 2 * 10.0)  # after each warm-up
    assert perf["slow_pct"] == pytest.approx(100 * 40.0 / 310.0, abs=1e-3)
    assert main(["report", "restart-job", "--db", loop_db]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "slow time 40.0s (12.9% of stepping time;" in out and "of productive" not in out


def test_a_stalling_loader_leaves_the_ideal_and_the_slow_time_true(loop_db: str) -> None:
    """Every window holds a 1 s data wait (9 %: none steady). The ideal took the stall in
    (0.11 s) and the slow time took it out again (2 s of the 4 s planted)."""
    (perf,) = (r.json() for r in _get(loop_db, ["/api/v1/jobs/stall-job/performance"]))
    assert perf["ideal_basis"] == "after_warmup"
    assert perf["ideal_step_s"] == pytest.approx(0.1)
    assert perf["slow_s"] == pytest.approx(4.0)


def test_ranks_counting_different_steps_name_no_straggler(
    loop_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 1 counts each step twice: rank 0 was named the straggler at 2.0, the ideal read
    0.075 s and the steps 4000. Now no straggler, the note, rank 0's steps."""
    job, perf = (
        r.json()
        for r in _get(loop_db, ["/api/v1/jobs/double-job", "/api/v1/jobs/double-job/performance"])
    )
    assert perf["straggler"] is None and perf["stragglers"] == []
    assert perf["straggler_note"].startswith("attempt 0: rank 1 counts 2.00x the steps")
    assert perf["step_counts_differ"][0]["basis_rank"] == 0
    assert perf["ideal_step_s"] == pytest.approx(0.1) and perf["steps"] == 2000
    assert job["performance"]["straggler_note"] == perf["straggler_note"]
    assert main(["report", "double-job", "--db", loop_db]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "straggler not named: the ranks count different steps (see step counts)" in out
    assert "step counts attempt 0: rank 1 counts 2.00x the steps per second of rank 0" in out
