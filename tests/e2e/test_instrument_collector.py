"""The instrument library against a real `ett serve`: a scripted timeline's figures, a token,
and a collector outage of 20 s in the middle of training."""

from __future__ import annotations

import time
import uuid
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

import ett
from tests.support.collector_process import Collector, start_collector

pytestmark = pytest.mark.e2e

TOL = 0.15  # seconds: the window thread sees progress to within a poll (window_s / 10)
STALL_S = 1.0  # seconds: the exporter's first back-off; a step held by an export lasts longer
EPS = 0.005  # seconds: a figure against instants the test read around what it bounds


class Steps:
    """What :func:`train` saw: the longest gap between two steps, and the instant (unix
    seconds) just before its last ``step()`` call: the last step is no earlier."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.last_call = 0.0


def train(sess: ett.Session, seconds: float, step_s: float = 0.01) -> Steps:
    """A loop of ``step_s`` steps for ``seconds``."""
    seen = Steps()
    last = time.monotonic()
    end = last + seconds
    while time.monotonic() < end:
        time.sleep(step_s)
        seen.last_call = time.time()
        sess.step(samples=32)
        now = time.monotonic()
        seen.worst, last = max(seen.worst, now - last), now
    return seen


def hold(block: AbstractContextManager[object], seconds: float) -> float:
    """Sleep ``seconds`` inside ``block``; returns the seconds from entering it to leaving it as
    the test saw them. The span the block records lies inside those: at least ``seconds`` (a
    sleep never returns early), at most the returned value, however loaded the machine is."""
    entered = time.time()
    with block:
        time.sleep(seconds)
    return time.time() - entered


def within(value: float, lo: float, hi: float) -> bool:
    """``lo <= value <= hi``, give or take :data:`EPS`."""
    return lo - EPS <= value <= hi + EPS


def test_scripted_timeline_figures(collector: Collector) -> None:
    """Each figure against the instants the test read around what it names: a loaded machine
    stretches the sleeps, never the bounds."""
    job_id = f"instr-{uuid.uuid4().hex[:8]}"
    t0 = time.time()
    sess = ett.init(
        job_id=job_id,
        model="tiny",
        endpoint=collector.url,
        window_s=0.2,
        allocated_at=t0,
        install_handlers=False,
    )  # init names [allocation, init] itself: phase imports, "runtime"
    comms = hold(sess.startup("pg_init"), 0.3)
    model = hold(sess.startup("model_init"), 0.3)
    time.sleep(0.2)  # in no phase: "other"
    t_batch = time.time()
    sess.first_batch(step=0)
    t_first = time.time()
    train(sess, 1.0)
    saving = hold(sess.checkpoint_save(100, nbytes=1 << 20), 0.3)
    train(sess, 1.0)
    evaluating = hold(sess.eval(), 0.2)
    t_last = train(sess, 0.5).last_call
    t_end = time.time()
    sess.end()  # its exporter flush is in the attempt (ett.shutdown.exporter_flush, "runtime")
    t_ended = time.time()

    job = collector.wait_for_job(job_id, lambda j: j["state"] == "completed")
    wall = job["wall_s"]
    assert t_end - t0 - TOL <= wall <= t_ended - t0 + TOL
    assert within(job["tts_s"], t_batch - t0, t_first - t0)
    assert within(job["checkpoint_blocking_s"], 0.3, saving)
    assert job["failures"] == 0 and job["ttr_s"] == []
    lost = job["lost_by_component"]
    assert within(lost["comms"], 0.3, comms)
    assert within(lost["model"], 0.3, model)
    assert within(lost["checkpoint"], 0.3, saving)
    assert within(lost["eval"], 0.2, evaluating)
    # the rest of the start-up (init's imports, the 0.2 s in no phase) and the shutdown after
    # the last step (the exporter's flush) are "runtime" and "other"; the shutdown runs from
    # the last step (in [t_last, t_end]) to the wall's end
    assert lost["other"] >= 0.2 - EPS and lost["runtime"] > 0
    rest_lo = 0.2 + (wall - (t_end - t0))
    rest_hi = (t_first - t0 - 0.6) + (wall - (t_last - t0))
    assert within(lost["runtime"] + lost["other"], rest_lo, rest_hi)
    # productive: first batch to last step, less the save and the eval
    productive_lo = (t_last - t_first) - saving - evaluating
    productive_hi = (t_end - t_batch) - 0.3 - 0.2
    assert within(job["productive_s"], productive_lo, productive_hi)
    assert job["ett_pct"] == pytest.approx(100 * job["productive_s"] / wall, abs=0.01)
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
        seen = [train(sess, 3.0)]
        c.wait_for_job(job_id, lambda j: j["state"] == "running")
        c.stop()  # the collector goes away for 20 s
        down_at = time.monotonic()
        seen.append(train(sess, 2.0))
        saving = hold(sess.checkpoint_save(50), 0.3)  # spans made while it is down
        evaluating = hold(sess.eval(), 0.2)
        seen.append(train(sess, max(0.0, 20.0 - (time.monotonic() - down_at))))
        c = start_collector(home, db_url=c.db_url, port=port)
        seen.append(train(sess, 3.0))
        t_end = time.time()
        sess.end()  # its flush (the backlog included) is the attempt's shutdown, inside its wall
        t_ended = time.time()
        # no step waited on the collector: an export on the training thread would hold a step
        # for the exporter's back-off (1 s, doubling) while the collector is down; steps are
        # 10 ms, and a loaded machine delays one by far less than a second
        worst = max(s.worst for s in seen)
        assert worst < STALL_S, f"a step waited {worst:.3f} s"
        job = c.wait_for_job(
            job_id,
            lambda j: j["state"] == "completed" and j["checkpoint_blocking_s"] > 0,
            timeout=120,
        )
        assert within(job["checkpoint_blocking_s"], 0.3, saving)
        assert within(job["lost_by_component"]["eval"], 0.2, evaluating)
        assert t_end - t0 - TOL <= job["wall_s"] <= t_ended - t0 + TOL
        assert sess.dropped_spans == 0
    finally:
        c.stop()
