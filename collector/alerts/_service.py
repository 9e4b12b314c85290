"""The built-in evaluator: every ``interval_s``, in the process that runs the background
recompute, evaluate the rules over the stored figures, keep the alert state in SQL, and hand
firing and resolved alerts to Alertmanager from a thread of its own (a slow or dead
Alertmanager delays nothing else: ingest, reads and evaluation go on, and the alerts wait in the
``alerts`` table until it accepts them)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import Engine

from ..schemas import LIVE_STATES
from ..write.periodic import Periodic
from ._backtest import held_open, instants, reach, replay_from, walk
from ._conditions import evaluate
from ._delivery import Backoff, DeliveryError, payload, post_alerts
from ._fleet import Fleet, JobFacts
from ._reads import load_facts
from ._state import Alert, advance
from ._store import AlertStore
from .rules import WINDOWS, RuleSet

log = logging.getLogger("ett_collector.alerts")

DEFAULT_INTERVAL_S = 30.0
DEFAULT_DASHBOARD_URL = "http://127.0.0.1:8501"
LATE_S = 3600.0
"""History is late when it lies this long before the evaluation that did not see it: a job
sent days after it ran, or spooled through an outage (recompute lag is seconds)."""
REWALK_EVERY_S = 300.0
"""Late history is replayed at the first evaluation that sees no more of it arrive, or after
this long while it keeps arriving (a long import)."""


class AlertService:
    """Evaluation and delivery of one rule set over one database."""

    def __init__(
        self,
        engine: Engine,
        rules: RuleSet,
        interval_s: float = DEFAULT_INTERVAL_S,
        alertmanager_url: str | None = None,
        dashboard_url: str = DEFAULT_DASHBOARD_URL,
        leader: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = AlertStore(engine)
        self.engine = engine
        self.rules = rules
        self.clock = clock
        self.interval_s = interval_s
        self._eval = Periodic("ett-alerts-eval", self._evaluate_tick, interval_s, log, leader)
        self.dashboard_url = dashboard_url
        self.alertmanager_url = alertmanager_url
        self._send = Periodic("ett-alerts-send", self._send_tick, min(interval_s, 5.0), log, leader)
        """Delivery, every few seconds and at once when alerts change (:meth:`Periodic.wake`)."""
        self.backoff = Backoff()
        self._caught_up = False
        """Whether this process has walked the history before its first evaluation."""
        self._seen: dict[str, frozenset[float]] = {}
        """Each job's instants at the last evaluation (:meth:`_late`)."""
        self._seen_at: float | None = None
        self._late_jobs = 0
        """Jobs that brought late history since the last replay for it."""
        self._late_since: float | None = None
        """When late history was first seen since the last replay for it (None: none)."""

    def evaluate_once(self, t: float | None = None) -> list[Alert]:
        """Evaluate every enabled rule at ``t`` (default: now); returns the changed alerts."""
        t = self.clock() if t is None else t
        active = self.store.active()
        jobs = load_facts(self.engine, reach(t, active))
        fleet = Fleet(jobs)
        horizon = max(WINDOWS.values())  # jobs read further back for a frozen baseline are
        late = self._late([j for j in jobs if j.end > t - horizon], t)  # not late history
        if late:
            self._late_jobs += late
            self._late_since = t if self._late_since is None else self._late_since
        since = self._late_since
        if since is not None and (not late or t - since >= REWALK_EVERY_S):
            # the history stopped arriving (or has streamed in for minutes): replay it once
            if self._adopt_replay(t, active, self._late_jobs):
                active = self.store.active()
            self._late_jobs, self._late_since = 0, None
        findings = [
            f for rule in self.rules.enabled() for f in evaluate(rule, fleet, t, True, active)
        ]
        if self._late_since is not None:  # while late history arrives, open nothing new: the
            # replay opens it from its own onset (the demo's alert fired at its arrival before)
            findings = [f for f in findings if (f.rule.name, f.key) in active]
        changed = advance(active, findings, t, self.dashboard_url)
        self.store.save(changed, evaluated_at=t)
        if any(a.state.value in ("firing", "resolved") for a in changed):
            self._send.wake()
        return changed

    def catch_up(self, t: float | None = None) -> int:
        """Walk the replayable rules over the instants between the evaluator's last evaluation
        and ``t`` (default: now), at most the rules' longest window back, as the backtest walks
        them (:func:`~._backtest.instants`), keeping the state in SQL: a collector started on
        history it never evaluated (a loaded database, a collector that was down) then holds
        the incidents the evaluator would have opened, with their baselines and onsets, before
        its first live evaluation. Returns the instants walked."""
        t = self.clock() if t is None else t
        last = self.store.last_evaluation()
        since = replay_from(t) if last is None else max(last, replay_from(t))
        loaded = reach(since, self.store.active())
        jobs = [j for j in load_facts(self.engine, loaded) if j.end <= t]
        names = {r.name for r in self.rules.enabled() if r.replayable}
        points = [p for p in instants(jobs, self.rules, since, t) if p < t]

        def mine() -> dict[tuple[str, str], Alert]:  # live-only rules' alerts are left alone
            return {k: a for k, a in self.store.active().items() if a.rule in names}

        active = mine()
        for p, _, changed in walk(Fleet(jobs), self.rules, points, active, self.dashboard_url):
            if changed:  # stored, then read back: the next instant updates them by their ids
                self.store.save(changed, evaluated_at=p)
                active.clear()
                active.update(mine())
        return len(points)

    def deliver_once(self, now: float | None = None) -> int:
        """Send what Alertmanager has not accepted yet; returns how many were sent.

        Raises:
            DeliveryError: when Alertmanager did not take them (they stay in the outbox).
        """
        if not self.alertmanager_url:
            return 0
        now = self.clock() if now is None else now
        resend_s = max(self.interval_s, 1.0)
        pending = self.store.outbox(now, resend_s)
        if not pending:
            return 0
        post_alerts(self.alertmanager_url, payload(pending, now, 4 * resend_s))
        self.store.mark_sent(pending, now)
        return len(pending)

    def start(self) -> None:
        """Start the evaluation thread (and the delivery thread with an Alertmanager URL)."""
        self._eval.start()
        if self.alertmanager_url:
            self._send.start()

    def stop(self) -> None:
        """Stop both threads and wait for them."""
        self._eval.stop()
        self._send.stop()

    def _late(self, jobs: list[JobFacts], t: float) -> int:
        """How many jobs hold instants (a first batch, a restart, a save's end, an ended job's
        end) that the last evaluation did not see although they lie :data:`LATE_S` or more
        before it: late history, which an evaluation at its arrival judges against a baseline
        that already holds part of it. A live job's moving end, and a presumed-dead job's end
        going back to its last span, are not late history."""
        seen, before = self._seen, self._seen_at
        now: dict[str, frozenset[float]] = {}
        late = 0
        for j in jobs:
            points = frozenset(_instants_of(j))
            now[j.job_id] = points
            if before is not None and any(
                p <= before - LATE_S for p in points - seen.get(j.job_id, frozenset())
            ):
                late += 1
        self._seen, self._seen_at = now, t
        return late

    def _adopt_replay(self, t: float, active: dict[tuple[str, str], Alert], late: int) -> int:
        """Replay the rules' reach up to ``t`` (what ``ett alerts backtest`` walks) and open the
        alerts it holds open at ``t`` that are not open here: a change the late history shows
        since its own onset, with the baseline from before it. Alerts already open or delivered
        are left as they are. Returns how many were opened.

        The replay reads the jobs a week before its first instant too, as the backtest does:
        over the evaluation's jobs alone (a week back from ``t``), its instants near an onset
        days old had little or no baseline, and by the time they had one it held the change (a
        probe's 14 days sent to an empty collector, x4 from 5.5 days back: never opened)."""
        started = time.monotonic()
        start = replay_from(t)
        jobs = [j for j in load_facts(self.engine, reach(start, active)) if j.end <= t]
        held = held_open(jobs, self.rules, start, t, self.dashboard_url)
        opened = [a for ident, a in held.items() if ident not in active]
        if opened:
            self.store.save(opened)
        log.info(
            "alerts: %d job(s) brought history older than %.0f min; replayed the rules over it in "
            "%.1f s and opened %d alert(s) it holds open%s",
            late,
            LATE_S / 60,
            time.monotonic() - started,
            len(opened),
            "".join(f"; {a.rule} {a.key}" for a in opened),
        )
        return len(opened)

    def _evaluate_tick(self) -> None:
        if not self._caught_up:  # this process's first evaluation: the history before it first
            started = time.monotonic()
            walked = self.catch_up()
            self._caught_up = True
            log.info(
                "alerts: caught up over %d instants in %.1f s", walked, time.monotonic() - started
            )
        self.evaluate_once()

    def _send_tick(self) -> None:
        """One delivery after the backoff's delay; a failure makes the next tick come at once
        (it waits the longer delay in turn)."""
        if self._send.stopping.wait(self.backoff.delay()):
            return
        try:
            self.deliver_once()
            self.backoff.succeeded()
        except DeliveryError as exc:
            self.backoff.failed()
            delay = self.backoff.delay()
            log.warning("alert delivery failed (retry in %.0f s): %s", delay, exc)
            self._send.wake()
        except Exception:
            self.backoff.failed()
            log.exception("alert delivery failed")


def _instants_of(j: JobFacts) -> tuple[float, ...]:
    """The instants of ``j`` the rules change at (:func:`~._backtest.instants`), its end only
    once it ended (a live job's end is its last report, and moves)."""
    ended = () if j.state in LIVE_STATES else (j.end,)
    first = () if j.first_batch is None else (j.first_batch,)
    return (*ended, *j.restarts, *first, *(end for end, _ in j.saves))
