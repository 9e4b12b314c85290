"""The instrument library against a real `ett serve`: a scripted timeline's figures, a token,
and a collector outage of 20 s in the middle of training."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

import instrument as ett
from tests.support.collector_process import Collector, start_collector

pytestmark = pytest.mark.e2e

TOL = 0.15  # seconds: the window thread sees progress to within a poll (window_s / 10)


def train(sess: ett.Session, seconds: float, step_s: float = 0.01) -> float:
    """A loop of ``step_s`` steps for ``seconds``; returns the longest gap between two steps."""
    worst = 0.0
    last = time.monotonic()
    end = last + seconds
    while time.monotonic() < end:
        time.sleep(step_s)
        sess.step(samples=32)
        now = time.monotonic()
        worst, last = max(worst, now - last), now
    return worst


def test_scripted_timeline_figures(collector: Collector) -> None:
    job_id = f"instr-{uuid.uuid4().hex[:8]}"
    t0 = time.time()
    sess = ett.init(
        job_id=job_id,
        model="tiny",
        endpoint=collector.url,
        window_s=0.2,
        allocated_at=t0,
        install_handlers=False,
    )
    t_ready = time.time()  # init names [allocation, init] itself: phase imports, "runtime"
    with sess.startup("pg_init"):
        time.sleep(0.3)
    with sess.startup("model_init"):
        time.sleep(0.3)
    time.sleep(0.2)  # in no phase: "other"
    sess.first_batch(step=0)
    t_first = time.time()
    train(sess, 1.0)
    with sess.checkpoint_save(100, nbytes=1 << 20):
        time.sleep(0.3)
    train(sess, 1.0)
    with sess.eval():
        time.sleep(0.2)
    train(sess, 0.5)
    t_end = time.time()
    sess.end()  # its exporter flush is in the attempt (ett.shutdown.exporter_flush, "runtime")
    t_ended = time.time()

    job = collector.wait_for_job(job_id, lambda j: j["state"] == "completed")
    wall = job["wall_s"]
    assert t_end - t0 - TOL <= wall <= t_ended - t0 + TOL
    assert job["tts_s"] == pytest.approx(t_first - t0, abs=0.05)
    assert job["checkpoint_blocking_s"] == pytest.approx(0.3, abs=0.05)
    assert job["failures"] == 0 and job["ttr_s"] == []
    lost = job["lost_by_component"]
    assert lost["comms"] == pytest.approx(0.3, abs=0.05)
    assert lost["model"] == pytest.approx(0.3, abs=0.05)
    assert lost["checkpoint"] == pytest.approx(0.3, abs=0.05)
    assert lost["eval"] == pytest.approx(0.2, abs=0.05)
    assert lost["other"] == pytest.approx(0.2, abs=0.05)
    flush_s = wall - (t_end - t0)  # the shutdown: the exporter's flush inside end()
    assert lost["runtime"] == pytest.approx((t_ready - t0) + flush_s, abs=0.05)
    productive = (t_end - t_first) - 0.3 - 0.2
    assert job["productive_s"] == pytest.approx(productive, abs=TOL)
    assert job["ett_pct"] == pytest.approx(100 * productive / wall, abs=100 * TOL / wall)
    assert job["attempts"][0]["end_reason"] == "completed"
    assert sess.dropped_spans == 0


def test_bearer_token_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = start_collector(tmp_path / "home", token="s3cret")
    try:
        monkeypatch.setenv("ETT_TOKEN", "s3cret")
        job_id = f"instr-token-{uuid.uuid4().hex[:8]}"
        sess = ett.init(job_id=job_id, endpoint=c.url, install_handlers=False)
        sess.first_batch()
        sess.step()
        sess.end()
        job = c.wait_for_job(job_id, lambda j: j["state"] == "completed")
        assert job["failures"] == 0
    finally:
        c.stop()


def test_collector_outage_costs_training_nothing_and_spans_arrive_later(tmp_path: Path) -> None:
    home = tmp_path / "home"
    c = start_collector(home)
    port = int(c.url.rsplit(":", 1)[1])
    job_id = f"instr-outage-{uuid.uuid4().hex[:8]}"
    t0 = time.time()
    sess = ett.init(
        job_id=job_id, endpoint=c.url, window_s=0.5, allocated_at=t0, install_handlers=False
    )
    try:
        sess.first_batch()
        gaps = [train(sess, 3.0)]
        c.wait_for_job(job_id, lambda j: j["state"] == "running")
        c.stop()  # the collector goes away for 20 s
        down_at = time.monotonic()
        gaps.append(train(sess, 2.0))
        with sess.checkpoint_save(50):  # spans made while it is down
            time.sleep(0.3)
        with sess.eval():
            time.sleep(0.2)
        gaps.append(train(sess, max(0.0, 20.0 - (time.monotonic() - down_at))))
        c = start_collector(home, db_url=c.db_url, port=port)
        gaps.append(train(sess, 3.0))
        t_end = time.time()
        sess.end()  # its flush (the backlog included) is the attempt's shutdown, inside its wall
        t_ended = time.time()
        assert max(gaps) < 0.25  # no step waited on the collector (steps are 10 ms)
        job = c.wait_for_job(
            job_id,
            lambda j: j["state"] == "completed" and j["checkpoint_blocking_s"] > 0,
            timeout=60,
        )
        assert job["checkpoint_blocking_s"] == pytest.approx(0.3, abs=0.05)
        assert job["lost_by_component"]["eval"] == pytest.approx(0.2, abs=0.05)
        assert t_end - t0 - TOL <= job["wall_s"] <= t_ended - t0 + TOL
        assert sess.dropped_spans == 0
    finally:
        c.stop()
