"""The built-in evaluator over a fleet with a planted regression: it fires within one
evaluation interval of the first regressed job's end, names the model and the component, keeps
its state in SQL, resolves after the regression stops; the backtest finds the same firing; a
stable fleet fires nothing."""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import data_rules
from fleet_builder import Regress, fleet, load

from ett_cli import main
from ett_collector.alerts import AlertService, AlertState, backtest, load_rules
from ett_collector.alerts._routes import alerts_answer
from ett_collector.alerts.rules import parse_rules
from ett_collector.storage import Store

INTERVAL = 300.0
HOUR = 3600.0


def _rules(tmp_path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "rules.yml"
    path.write_text(text)
    return load_rules(path), path


def test_regression_fires_names_model_and_component_resolves_and_backtest_agrees(
    store: Store, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    start = 1_800_000_000.0
    onset, stop = start + 48 * HOUR, start + 54 * HOUR
    jobs = list(fleet(start, 62, regress=Regress("dlrm", onset, stop)))
    load(store, jobs)
    regressed = [j for j in jobs if j[1] == "dlrm" and onset <= j[2] < stop]
    first_end = min(j[3] for j in regressed)
    rules, _ = _rules(tmp_path, data_rules())
    service = AlertService(store.engine, rules, INTERVAL, dashboard_url="http://dash:8501")

    t = onset - 2 * HOUR
    fired_at = resolved_at = None
    while t < stop + 4 * HOUR:
        for a in service.evaluate_once(t):
            if a.state is AlertState.FIRING and fired_at is None:
                fired_at, firing = t, a
            if a.state is AlertState.RESOLVED:
                resolved_at = t
        t += INTERVAL
    assert fired_at is not None, "the regression did not fire"
    assert first_end <= fired_at <= first_end + INTERVAL
    assert firing.labels["model"] == "dlrm" and firing.labels["component"] == "data"
    assert firing.labels["rule"] == "data_regression"
    assert regressed[0][0] in firing.jobs
    link = urlsplit(firing.annotations["dashboard"])  # the dashboard's job page: /job?job=<id>
    assert (link.netloc, link.path) == ("dash:8501", "/job")
    assert parse_qs(link.query) == {"job": [firing.jobs[0]]}
    assert firing.baseline is not None and firing.value > 2 * firing.baseline
    assert resolved_at is not None and stop < resolved_at < stop + 3 * HOUR

    stored = service.store.alerts()
    assert [a.state for a in stored] == [AlertState.RESOLVED]  # one alert, kept as history
    assert stored[0].fired_at == fired_at and stored[0].resolved_at == resolved_at

    replayed = backtest(store.engine, rules, start, stop + 4 * HOUR)
    assert [(f.rule, f.labels["model"], f.labels["component"]) for f in replayed] == [
        ("data_regression", "dlrm", "data")
    ]
    assert replayed[0].fired_at == pytest.approx(first_end)
    assert abs(replayed[0].fired_at - fired_at) <= INTERVAL
    assert replayed[0].resolved_at is not None
    assert abs(replayed[0].resolved_at - resolved_at) <= INTERVAL


def test_for_duration_keeps_an_alert_pending_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    store.upgrade()
    start = 1_800_000_000.0
    onset = start + 30 * HOUR
    jobs = list(fleet(start, 36, regress=Regress("ranker", onset, onset + 10 * HOUR)))
    load(store, jobs)
    rules, _ = _rules(tmp_path, data_rules(for_="20m"))
    service = AlertService(store.engine, rules, INTERVAL)
    first_end = min(j[3] for j in jobs if j[1] == "ranker" and j[2] >= onset)
    t = first_end + 1
    states = []
    for _ in range(6):
        service.evaluate_once(t)
        states.append([a.state for a in service.store.alerts()])
        t += INTERVAL
    assert states[0] == [AlertState.PENDING]
    assert states[3] == [AlertState.PENDING]
    assert states[4] == [AlertState.FIRING]  # 20 minutes = 4 intervals after it first held
    assert service.store.alerts()[0].labels["model"] == "ranker"


def test_stable_fleet_over_30_days_fires_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    store.upgrade()
    start = 1_800_000_000.0
    load(store, list(fleet(start, 30 * 24, seed=7, noise=0.3, every_s=3600.0)))  # 1,440 jobs
    rules, _ = _rules(tmp_path, data_rules(defaults=True))
    assert len(rules.enabled()) == len(load_rules().enabled()) + 1  # the defaults and one
    assert backtest(store.engine, rules, start, start + 30 * 24 * HOUR) == []
    service = AlertService(store.engine, rules, INTERVAL)
    assert service.evaluate_once(start + 30 * 24 * HOUR) == []


def test_api_and_cli_list_the_alerts(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store(url)
    store.upgrade()
    now = time.time()
    onset = now - 3 * HOUR
    load(store, list(fleet(now - 40 * HOUR, 40, regress=Regress("dlrm", onset, now + HOUR))))
    rules, path = _rules(tmp_path, data_rules())
    AlertService(store.engine, rules, INTERVAL).evaluate_once(now)

    status, body = alerts_answer(AlertStore(store.engine), "firing", None)
    assert status == 200 and len(body) == 1
    assert body[0]["labels"]["model"] == "dlrm" and body[0]["labels"]["component"] == "data"
    assert body[0]["state"] == "firing" and body[0]["fired_at"] == now
    assert alerts_answer(AlertStore(store.engine), "burning", None)[0] == 400

    assert main(["alerts", "--db", url, "--state", "firing", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [a["rule"] for a in listed] == ["data_regression"]
    assert main(["alerts", "--db", url, "--state", "resolved", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []

    code = main(
        ["alerts", "backtest", "--db", url, "--since", "2d", "--rules", str(path), "--json"]
    )
    assert code == 0
    firings = json.loads(capsys.readouterr().out)
    assert [(f["rule"], f["labels"]["model"], f["labels"]["component"]) for f in firings] == [
        ("data_regression", "dlrm", "data")
    ]
    assert set(firings[0]) >= {"rule", "labels", "fired_at", "resolved_at"}
    assert firings[0]["resolved_at"] is None


def test_rules_validated_before_use() -> None:
    rules = parse_rules(data_rules())
    assert [r.name for r in rules.enabled()] == ["data_regression"]


from ett_collector.alerts import AlertStore  # noqa: E402  (kept last: used by the API test only)


def test_a_service_started_on_history_catches_up_with_the_backtest(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A collector started on history it never evaluated (a loaded database, a collector that
    was down) walks it before its first live evaluation: its alerts are the backtest's. Without
    the walk, the first evaluation judges a change that began hours before on its own."""
    from ett_collector.alerts.rules import WINDOWS

    start = 1_800_000_000.0
    onset = start + 30 * HOUR
    now = onset + 6 * HOUR  # the regression goes on; it began 6 windows before now
    planted = Regress("dlrm", onset, now + 10 * HOUR)
    load(store, [j for j in fleet(start, 40, regress=planted) if j[3] <= now])
    rules, _ = _rules(tmp_path, data_rules())
    replayed = backtest(store.engine, rules, now - max(WINDOWS.values()), now)
    assert [f.labels["model"] for f in replayed] == ["dlrm"]
    assert onset <= replayed[0].fired_at <= onset + 2 * HOUR

    service = AlertService(store.engine, rules, INTERVAL, clock=lambda: now)
    service._evaluate_tick()  # the first tick of a process: the walk, then the evaluation

    def kept(a):  # type: ignore[no-untyped-def]
        return (a.rule, a.labels["model"], a.fired_at, a.resolved_at)

    assert sorted(map(kept, service.store.alerts())) == sorted(map(kept, replayed))
    assert service.store.last_evaluation() == now and service.catch_up(now) == 0  # walked once


def test_a_restart_walks_only_what_came_after_the_last_evaluation(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A flat fleet keeps no alert; the evaluator's clock still says when it last evaluated, so
    a collector started again walks only the time since, not the rules' whole reach again."""
    start = 1_800_000_000.0
    now = start + 40 * HOUR
    load(store, [j for j in fleet(start, 40) if j[3] <= now])
    rules, _ = _rules(tmp_path, data_rules())
    first = AlertService(store.engine, rules, INTERVAL, clock=lambda: now)
    assert first.store.last_evaluation() is None
    walked = first.catch_up()  # a database never evaluated: the rules' whole reach
    assert first.evaluate_once() == [] and first.store.alerts() == []
    assert first.store.last_evaluation() == now
    again = AlertService(store.engine, rules, INTERVAL, clock=lambda: now + 2 * INTERVAL)
    assert again.catch_up() < walked / 20  # the instants of the last 10 minutes, not of 8 days


def test_history_that_arrives_late_is_judged_from_its_own_onset(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A running evaluator judged history sent days after it ran at its arrival, against a
    baseline that already held part of the change: a probe sent a week with checkpoints x4
    planted 3 days back, the backtest said firing (3.9x, p = 1.9e-22) and the live evaluator
    never fired. Late history is now replayed over the rules' reach and the evaluator opens
    what the backtest holds open, with the backtest's onset."""
    from ett_collector.alerts.rules import WINDOWS

    start = 1_800_000_000.0
    onset = start + 9 * 24 * HOUR
    now = onset + 3 * 24 * HOUR
    planted = Regress("dlrm", onset, now + 24 * HOUR)
    jobs = [j for j in fleet(start, 12 * 24, regress=planted, every_s=4 * HOUR) if j[3] <= now]
    load(store, [j for j in jobs if j[3] <= onset])  # what had arrived while it evaluated
    rules = load_rules()  # the shipped regression rule
    clock = [now]
    service = AlertService(store.engine, rules, INTERVAL, clock=lambda: clock[0])
    service._evaluate_tick()
    assert service.store.alerts() == []
    load(store, [j for j in jobs if j[3] > onset])  # three days of it, sent at once
    clock[0] = now + INTERVAL
    service._evaluate_tick()  # late history seen: it may still be arriving
    clock[0] = now + 2 * INTERVAL
    service._evaluate_tick()  # no more of it: replayed once

    t = clock[0]
    replayed = backtest(store.engine, rules, t - max(WINDOWS.values()), t)
    still = [(f.rule, f.labels["model"], f.fired_at) for f in replayed if f.resolved_at is None]
    assert [m for _, m, _ in still] == ["dlrm"]
    assert still[0][2] < now - 24 * HOUR  # the backtest found it within days of the onset
    firing = service.store.alerts("firing")
    assert [(a.rule, a.labels["model"], a.fired_at) for a in firing] == still
    service._evaluate_tick()  # a later tick: no second replay, the same alert
    assert [a.fired_at for a in service.store.alerts("firing")] == [still[0][2]]


def test_history_sent_to_an_empty_collector_is_replayed_with_its_own_baselines(
    store: Store, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """A probe started `ett serve` on an empty database and sent it 14 days with checkpoints x4
    from 5.5 days before the end: the backtest held the incident open, the live evaluator
    replayed the late history and opened nothing. The replay walked the last week over the jobs
    of that week only, so its instants near the onset had little or no baseline (the backtest
    reads a week before its start too); by the time they had one, it held the change."""
    from ett_collector.alerts.rules import WINDOWS

    day = 24 * HOUR
    start = 1_800_000_000.0
    now = start + 14 * day
    onset = now - 5.5 * day
    planted = Regress("dlrm", onset, now + day)
    jobs = [j for j in fleet(start, 14 * 24, regress=planted, every_s=4 * HOUR) if j[3] <= now]
    rules = load_rules()
    clock = [now]
    service = AlertService(store.engine, rules, INTERVAL, clock=lambda: clock[0])
    service._evaluate_tick()  # an empty database
    load(store, jobs)  # 14 days, sent at once
    for k in (1, 2):  # seen arriving, then replayed once it stopped
        clock[0] = now + k * INTERVAL
        service._evaluate_tick()
    t = clock[0]
    replayed = backtest(store.engine, rules, t - max(WINDOWS.values()), t)
    still = [(f.rule, f.labels["model"], f.fired_at) for f in replayed if f.resolved_at is None]
    assert [m for _, m, _ in still] == ["dlrm"]
    firing = service.store.alerts("firing")
    assert [(a.rule, a.labels["model"], a.fired_at) for a in firing] == still


def test_late_history_the_arrival_would_fire_on_fires_at_the_backtests_instant(
    store: Store, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """`make demo` sends its week to a running collector: the evaluation at the arrival fired
    the planted regression at the arrival's instant, before the replay could open it at its
    own (the backtest's). While late history arrives nothing new is opened."""
    from ett_collector.alerts.rules import WINDOWS

    start = 1_800_000_000.0
    onset = start + 40 * HOUR
    now = onset + 12 * HOUR
    planted = Regress("dlrm", onset, now + 24 * HOUR)
    jobs = [j for j in fleet(start, 60, regress=planted) if j[3] <= now]
    load(store, [j for j in jobs if j[3] <= onset])
    rules = load_rules()
    clock = [now]
    service = AlertService(store.engine, rules, INTERVAL, clock=lambda: clock[0])
    service._evaluate_tick()
    load(store, [j for j in jobs if j[3] > onset])
    clock[0] = now + INTERVAL
    service._evaluate_tick()
    assert service.store.alerts() == []  # late history arriving: nothing opened at arrival
    clock[0] = now + 2 * INTERVAL
    service._evaluate_tick()
    t = clock[0]
    replayed = backtest(store.engine, rules, t - max(WINDOWS.values()), t)
    still = [(f.labels["model"], f.fired_at) for f in replayed if f.resolved_at is None]
    assert still and all(fired < now for _, fired in still)
    assert [(a.labels["model"], a.fired_at) for a in service.store.alerts("firing")] == still


def test_an_incident_open_for_days_resolves_live_as_in_the_backtest(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An open incident keeps the baseline it was found against. The live evaluator read only
    the last week of jobs, so that frozen baseline lost its oldest jobs at every evaluation;
    after days too few were left to test, and a regression that was fixed kept firing (a probe:
    still firing two days after the fix, where the backtest resolved it). It now reads back to
    the frozen baseline's start and resolves where the backtest does."""
    day = 24 * HOUR
    start = 1_800_000_000.0
    onset, stop, end = start + 8 * day, start + 15 * day, start + 18 * day
    planted = Regress("dlrm", onset, stop)
    load(store, list(fleet(start, 18 * 24, regress=planted, every_s=4 * HOUR)))
    rules = load_rules()  # the shipped regression rule: 24 h against the 7 days before
    service = AlertService(store.engine, rules, INTERVAL)
    step = 2 * HOUR
    t = onset - step
    states: dict[str, list[float]] = {"firing": [], "resolved": []}
    while t <= end:
        for a in service.evaluate_once(t):
            if a.labels.get("model") == "dlrm" and a.state.value in states:
                states[a.state.value].append(t)
        t += step
    replayed = [
        f for f in backtest(store.engine, rules, onset - day, end) if f.labels["model"] == "dlrm"
    ]
    assert len(replayed) == 1 and replayed[0].resolved_at is not None
    assert stop < replayed[0].resolved_at < end
    assert states["firing"] and abs(states["firing"][0] - replayed[0].fired_at) <= step
    assert states["resolved"], "the fixed regression kept firing"
    assert states["resolved"] == [states["resolved"][0]]  # once, and not opened again
    assert abs(states["resolved"][0] - replayed[0].resolved_at) <= step
