"""Every dashboard page under Streamlit's AppTest, against a real `ett serve` and its API."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("streamlit", reason="the dashboard extra: pip install -e '.[dashboard]'")
from streamlit.testing.v1 import AppTest

from ett_dashboard import _format as fmt

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
pytestmark = pytest.mark.e2e


def point_at(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the pages at the collector at ``url``, with no token and no cached answer."""
    monkeypatch.setenv("ETT_API_URL", url)
    monkeypatch.delenv("ETT_TOKEN", raising=False)
    import streamlit as st

    st.cache_data.clear()


@pytest.fixture
def api(fleet: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    c, ids = fleet
    point_at(c.url, monkeypatch)
    yield c, ids


def run(page: str | None = None, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_fleet_page_matches_the_fleet_api(api: Any) -> None:
    c, _ = api
    at = run()
    data = c.get("/api/v1/fleet", since="7d").json()
    prod = sum(r["productive_s"] for r in data["series"])
    wall = sum(r["wall_s"] for r in data["series"])
    assert metrics(at)["Fleet ETT"] == f"{100 * prod / wall:.1f} %"
    assert any("GPU-hours = seconds × ranks" in c.value for c in at.caption)
    assert [t.value for t in at.title] == ["Fleet"]


def test_fleet_api_adds_up_to_the_jobs(api: Any) -> None:
    c, ids = api
    # a window holding every job whole (simulated history may end a little after now)
    data = c.get(
        "/api/v1/fleet", since="30d", until=str(time.time() + 10 * 86400), limit=1000
    ).json()
    rows = c.get("/api/v1/jobs").json()
    for cat in ("ett", "idle", "failure"):
        got = sum(r["productive_s" if cat == "ett" else f"{cat}_s"] for r in data["series"])
        want = sum(r["wall_s"] * r[f"{cat}_pct"] / 100 for r in rows)
        assert got == pytest.approx(want, rel=1e-6)
    worst = {w["job_id"]: w for w in data["worst_jobs"]}
    two = c.job(ids["two_rank"])
    lost_s = two["idle_s"] + two["failure_s"]
    assert worst[ids["two_rank"]]["lost_gpu_h"] == pytest.approx(2 * lost_s / 3600)


def test_jobs_page_lists_every_job_and_filters_from_the_url(api: Any) -> None:
    c, ids = api
    at = run("views/jobs.py")
    shown = at.dataframe[0].value
    assert sorted(s.split("job=")[1] for s in shown["job"]) == sorted(
        r["job_id"] for r in c.get("/api/v1/jobs").json()
    )
    assert list(shown.columns[:6]) == [  # the figures first, beside the id
        "job",
        "state",
        "ett_pct",
        "idle_pct",
        "failure_pct",
        "failures",
    ]
    at = run("views/jobs.py", state="failed")
    shown = at.dataframe[0].value
    assert set(shown["state"]) == {"failed"}
    assert ids["failed"] in "".join(shown["job"])


def test_job_page_shows_the_api_figures(api: Any) -> None:
    c, ids = api
    job = c.job(ids["example"])
    at = run("views/job.py", job=ids["example"])
    m = metrics(at)
    assert m["ETT"] == f"{job['ett_pct']:.1f} %" == "60.0 %"
    assert m["Failure"] == f"{job['failure_pct']:.1f} %"
    assert m["Failures"] == str(job["failures"])
    assert at.title[0].value == f"Job {ids['example']}"
    (blocking,) = [x for x in at.metric if x.label == "Checkpoint blocking"]
    assert "final one" in blocking.proto.help  # why it is less than the checkpoint row
    lost = [d.value for d in at.dataframe if "component" in d.value.columns][-1]
    assert list(lost.columns) == ["component", "lost", "share"]


def test_job_activity_shows_ranks_checkpoints_and_compiles(api: Any) -> None:
    c, ids = api
    act = c.get(f"/api/v1/jobs/{ids['two_rank']}/activity").json()
    steps = {ck["step"]: ck for ck in act["checkpoints"]}
    assert steps[100]["blocking_s"] == pytest.approx(4.0)  # rank 1's save ends a second later
    assert steps[100]["persist_s"] == pytest.approx(16.0)
    assert {x["cache"] for x in act["compiles"]} == {"hit"}
    assert all(x["in_startup"] for x in act["compiles"])
    at = run("views/job.py", job=ids["two_rank"])
    attempts = at.dataframe[0].value
    assert list(attempts["critical rank"]) == [1]
    assert list(attempts["compile cache"]) == ["hit"]
    # the wall time some rank compiled (the ranks compile at once), not the ranks' sum
    spans = sorted((x["start"], x["end"]) for x in act["compiles"])
    assert len(spans) >= 2 and spans[0][1] > spans[1][0], spans  # they overlap: sums differ
    wall = max(e for _, e in spans) - spans[0][0]
    assert all(b[0] <= a[1] for a, b in itertools.pairwise(spans))  # one covered stretch
    assert list(attempts["compile"]) == [fmt.duration(wall)]


def _chart_frames(at: AppTest) -> list[Any]:
    """The data frames behind the page's Vega-Lite charts (Arrow bytes in the element's proto)."""
    from streamlit import dataframe_util

    return [
        dataframe_util.convert_arrow_bytes_to_pandas_df(d.data.data)
        for chart in at.get("vega_lite_chart")
        for d in chart.proto.datasets
    ]


def test_every_attempts_start_up_chart_has_its_phases_and_first_batches(api: Any) -> None:
    """The worked example's attempt 1 (its phases come after attempt 0's in the API's list) is
    drawn at the API's times: no empty times, nothing of another attempt."""
    c, ids = api
    act = c.get(f"/api/v1/jobs/{ids['example']}/activity").json()
    assert {p["attempt"] for p in act["startup"]} == {0, 1}
    at = run("views/job.py", job=ids["example"])
    frames = [f for f in _chart_frames(at) if "rank_label" in f.columns]
    phases = [f for f in frames if "phase" in f.columns]
    firsts = [f for f in frames if "at" in f.columns]
    drawn = {
        (int(r.attempt), int(r.rank), r.phase, r.start.timestamp(), r.end.timestamp())
        for f in phases
        for r in f.itertuples()
    }
    want = {(p["attempt"], p["rank"], p["phase"], p["start"], p["end"]) for p in act["startup"]}
    assert {d[:3] for d in drawn} == {w[:3] for w in want}
    for d in drawn:
        (w,) = [w for w in want if w[:3] == d[:3]]
        assert d[3:] == pytest.approx(w[3:], abs=1e-3)
    drawn_firsts = {
        (int(r.attempt), int(r.rank)): r.at.timestamp() for f in firsts for r in f.itertuples()
    }
    want_firsts = {(b["attempt"], b["rank"]): b["at"] for b in act["first_batches"]}
    assert drawn_firsts == pytest.approx(want_firsts, abs=1e-3)


def test_every_job_link_opens_the_job_page(api: Any) -> None:
    """The dashboard's own links and the alerts' links name a job the same way:
    ``/job?job=<job_id>`` (issue 14), and that address opens the job."""
    from urllib.parse import parse_qs, urlsplit

    from ett_collector.alerts._state import job_link
    from ett_dashboard._page import job_url

    _, ids = api
    job_id = ids["example"]
    for link in (job_link("http://dash:8501/", job_id), job_url(job_id)):
        parts = urlsplit(link)
        params = parse_qs(parts.query)
        assert (parts.path, params) == ("/job", {"job": [job_id]}), link
        at = run("views/job.py", job=params["job"][0])
        assert at.title[0].value == f"Job {job_id}"


def test_unknown_and_missing_job_are_plain_messages(api: Any) -> None:
    at = run("views/job.py", job="no-such-job")
    assert "No job 'no-such-job'" in at.error[0].value
    # a crafted link's Markdown put a working link to another site on the page
    at = run("views/job.py", job="**bold** [link](http://evil)" + "x" * 5000)
    shown = at.error[0].value
    assert "[link](" not in shown and "http://" not in shown and "**" not in shown
    assert len(shown) < 300  # a 5,000-character id filled the screen
    at = run("views/job.py")
    assert "No job chosen" in at.info[0].value


def test_advisor_page(api: Any) -> None:
    c, _ = api
    advice = c.get("/api/v1/checkpoint-advice").json()
    at = run("views/advisor.py", model="dlrm")
    m = metrics(at)
    assert m["Young's optimum"].endswith(" s") or m["Young's optimum"].endswith(" min")
    assert "GPU-h/day" in m["Lost at this interval"]
    per_model = at.dataframe[0].value
    needed = advice["min_failures"]
    for api_row in advice["models"]:
        shown = per_model[per_model["model"] == api_row["model"]].iloc[0]["Young's optimum"]
        if api_row["optimal_interval_s"] is None:
            assert shown == "—"
        elif api_row["failures"] < needed:  # the rule of `ett report`, answered by the API
            assert api_row["advice_ok"] is False
            assert shown == f"not enough failures yet ({api_row['failures']} of {needed})"
        else:
            assert api_row["advice_ok"] is True
            assert shown == f"{api_row['optimal_interval_s']:.1f} s"


def test_advisor_withholds_an_optimum_resting_on_too_few_failures(api: Any) -> None:
    c, ids = api
    job = c.job(ids["example"])  # the spec's worked example: one failure
    advice = c.get("/api/v1/checkpoint-advice", model="dlrm").json()
    assert 0 < job["failures"] < advice["min_failures"]
    assert [m["advice_ok"] for m in advice["models"]] == [False]
    at = run("views/advisor.py", model="dlrm")
    assert any(
        f"Not enough failures yet ({job['failures']} of {advice['min_failures']})" in i.value
        for i in at.info
    )
    per_job = at.dataframe[1].value
    assert list(per_job["Young's optimum"]) == [
        f"not enough failures yet ({job['failures']} of {advice['min_failures']})"
    ]
    at = run("views/job.py", job=ids["example"])
    (interval,) = [m for m in at.metric if m.label == "Checkpoint interval"]
    expected = f"not enough failures yet ({job['failures']} of {advice['min_failures']})"
    assert expected in interval.proto.help


def test_checkpoint_table_shows_every_column_at_full_width(api: Any) -> None:
    _, ids = api
    at = run("views/job.py", job=ids["two_rank"])
    tables = [d for d in at.dataframe if "committed" in d.value.columns]
    assert len(tables) == 1
    assert list(tables[0].value.columns) == [
        "attempt",
        "step",
        "mode",
        "blocking",
        "persist",
        "committed",
        "restored by next attempt",
    ]
    # not squeezed into a column beside its chart
    assert not any("committed" in d.value.columns for col in at.columns for d in col.dataframe)


def test_alerts_page_without_alerting(api: Any) -> None:
    c, _ = api
    at = run("views/alerts.py")
    if c.get("/api/v1/alerts").status_code == 404:
        assert "Alerting is not configured" in at.info[0].value
    else:
        assert any(s.value.startswith("Firing") for s in at.subheader)


def test_collector_down_is_a_plain_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ETT_API_URL", f"http://127.0.0.1:{port}")
    for page in (None, "views/jobs.py", "views/advisor.py", "views/alerts.py"):
        at = run(page)
        assert "does not answer" in at.error[0].value
    at = run("views/job.py", job="x")
    assert "does not answer" in at.error[0].value


def test_wrong_token_is_a_plain_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.collector_process import start_collector

    c = start_collector(tmp_path / "home", token="right")
    try:
        monkeypatch.setenv("ETT_API_URL", c.url)
        monkeypatch.setenv("ETT_TOKEN", "wrong")
        at = run("views/jobs.py")
        assert "refused the token" in at.error[0].value
        monkeypatch.setenv("ETT_TOKEN", "right")
        at = run("views/jobs.py")
        assert not at.error
        assert "No jobs yet" in at.info[0].value  # the empty state says what to do
    finally:
        c.stop()


def test_stopping_ett_dashboard_stops_streamlit(tmp_path: Path) -> None:
    """`ett dashboard` becomes the Streamlit server: stopping it leaves no orphan serving."""
    import httpx

    from tests.dashboard.dashboard_process import start_dashboard

    dash = start_dashboard("http://127.0.0.1:9", tmp_path / "dash")
    assert httpx.get(dash.url + "/_stcore/health", timeout=5).status_code == 200
    dash.stop()
    with pytest.raises(httpx.HTTPError):
        httpx.get(dash.url + "/_stcore/health", timeout=2)


def test_the_advisors_unreadable_since_is_named_and_the_default_shown(api: Any) -> None:
    """/advisor?since=banana showed the API's raw 400 text and stopped the page."""
    at = run("views/advisor.py", since="banana")
    assert any("since 'banana' cannot be read" in w.value for w in at.warning)
    assert not at.error
    assert "since" not in at.query_params


@pytest.mark.parametrize(
    ("page", "params", "shown"),
    [
        (None, {"window": "banana"}, "last 7 days"),
        (None, {"by": "banana"}, "whole fleet"),
        (None, {"state": "banana"}, "all"),
        ("views/jobs.py", {"since": "banana"}, "any time"),
        ("views/jobs.py", {"state": "banana"}, "all"),
        ("views/advisor.py", {"model": "banana"}, None),
    ],
)
def test_a_links_unknown_value_is_named_and_the_default_shown(
    api: Any, page: str | None, params: dict[str, str], shown: str | None
) -> None:
    """A value a link's parameter cannot take (a typo, an old link) is said on the page, and
    the default is shown: no traceback (``run`` asserts none), no collector error text."""
    at = run(page, **params)
    ((name, value),) = params.items()
    warnings = [w.value for w in at.warning]
    assert any(f"{value!r} is none of the choices" in w for w in warnings), warnings
    if shown is not None:
        assert shown in warnings[0]
    assert not any("answered 400" in e.value for e in at.error)
    assert name not in at.query_params  # the link now says what the page shows


def test_fleet_lists_firing_alerts_with_links_to_their_jobs(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Fleet page's alerts firing now name their jobs, each a link to its page, as the
    Alerts page does, and link to the Alerts page."""
    from ett_dashboard.client import Client

    firing = {
        "rule": "regression_by_model",
        "state": "firing",
        "labels": {"model": "dlrm-small", "component": "checkpoint"},
        "annotations": {"summary": "checkpoint of model dlrm-small: 4.6× since 09:39"},
        "jobs": ["sim0-00081", "sim0-00090"],
    }
    resolved = {**firing, "state": "resolved", "jobs": ["sim0-00001"]}
    monkeypatch.setattr(Client, "alerts", lambda self: [firing, resolved])
    at = run()
    (shown,) = [w.value for w in at.warning]
    assert "checkpoint of model dlrm-small\\: 4.6×" in shown and "component checkpoint" in shown
    assert "[sim0-00081](/job?job=sim0-00081)" in shown and "sim0-00001" not in shown
    assert any("(/alerts)" in m.value for m in at.markdown)


def test_an_alert_line_shows_the_fleets_words_as_text() -> None:
    """Model, team, component, rule and summary are the fleet's words: a model named as a
    Markdown link was a working link on the Fleet and Alerts pages, a backtick left its code
    span."""
    from ett_dashboard import _page

    evil = "[click](http://evil.example)"
    line = _page.alert_line(
        {
            "rule": "**loud**",
            "labels": {"model": evil, "team": "a`b` <img src=x>", "component": "_x_"},
            "annotations": {"summary": f"checkpoint of {evil} +4.1x"},
            "jobs": ["job-1"],
        }
    )
    assert "](http" not in line.replace("\\](http", "")  # no link but the job's own
    assert "<img" not in line.replace("\\<", "") and "`" not in line.replace("\\`", "")
    assert "\\*\\*loud\\*\\*" in line and "\\_x\\_" in line
    assert "[job-1](" in line  # the job link still works
