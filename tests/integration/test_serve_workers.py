"""``ett serve --workers N`` under an operator's hands, with real processes: a ``kill -9`` of the
parent takes its workers with it (they served the port on, unwatched, and a supervisor's
restart failed with "port in use"); a worker that dies is replaced and the log says so (it said
nothing); SIGTERM logs one line that it stops and leaves no ``ett-metrics-*`` folder behind
(one stayed in /tmp per start)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.support.collector_process import Collector, start_collector, stop_process
from tests.support.waits import wait_until


def _children(pid: int) -> set[int]:
    """The worker processes of the ``ett serve`` process ``pid`` (not its resource tracker)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"spawn_main" in cmdline and not _ended(int(entry.name)):
            found.add(int(entry.name))
    return found


def _ended(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie no one reaped has exited too)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _log(c: Collector) -> str:
    return "".join(p.read_text() for p in c.home.glob("collector-*.log"))


def _start(tmp_path: Path, name: str, workers: int) -> Collector:
    tmp = tmp_path / f"{name}-tmp"  # the collector's TMPDIR: its Prometheus folder goes here
    tmp.mkdir()
    return start_collector(tmp_path / name, workers=workers, env={"TMPDIR": str(tmp)})


def test_workers_stop_when_the_parent_is_killed(tmp_path: Path) -> None:
    c = _start(tmp_path, "a", workers=2)
    try:
        workers = wait_until(lambda: _children(c.process.pid), what="the worker processes")
        assert len(workers) == 2
        c.process.send_signal(signal.SIGKILL)
        c.process.wait()
        wait_until(
            lambda: all(_ended(pid) for pid in workers),
            what=f"the orphaned workers {sorted(workers)} to stop",
            detail=lambda: _log(c),
        )
        assert "its parent ett serve" in _log(c) and "Traceback" not in _log(c)
        port = int(c.url.rsplit(":", 1)[1])
        again = start_collector(tmp_path / "b", port=port)  # the port is free again
        again.stop()
    finally:
        for pid in _children(c.process.pid):  # only should the test fail: ours, by pid
            os.kill(pid, signal.SIGKILL)
        stop_process(c.process)


def test_a_dead_worker_is_replaced_and_said(tmp_path: Path) -> None:
    c = _start(tmp_path, "a", workers=2)
    try:
        workers = wait_until(lambda: _children(c.process.pid), what="the worker processes")
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        line = f"WARNING serve: worker {victim} died (killed by SIGKILL); started worker "
        wait_until(lambda: line in _log(c), what="the death in the log", detail=lambda: _log(c))
        new = int(_log(c).split(line, 1)[1].split()[0])
        assert new in _children(c.process.pid) and victim not in _children(c.process.pid)
        wait_until(  # the replacement serves
            lambda: c.get("/healthz").json()["pid"] == new, what=f"worker {new} to answer"
        )
    finally:
        c.stop()


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_says_it_stops_and_leaves_no_metrics_folder(tmp_path: Path, workers: int) -> None:
    c = _start(tmp_path, "a", workers=workers)
    tmp = tmp_path / "a-tmp"
    if workers > 1:
        assert list(tmp.glob("ett-metrics-*")), list(tmp.iterdir())
    c.process.send_signal(signal.SIGTERM)
    c.process.wait(timeout=60)
    stops = [line for line in _log(c).splitlines() if "serve: stopping" in line]
    assert len(stops) == 1, _log(c)
    assert " INFO serve: stopping on SIGTERM" in stops[0]
    assert not list(tmp.glob("ett-metrics-*"))
