"""The collector's Store on real SQLite and real PostgreSQL (the ``store`` fixture runs both)."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, inspect

from ett import semconv
from ett_collector.domain.model import (
    AttemptSummary,
    AttrValue,
    Category,
    CheckpointAdvice,
    JobState,
    JobSummary,
    Segment,
    SegmentKind,
    SpanRecord,
)
from ett_collector.schemas import job_json, segment_json
from ett_collector.storage import Store, head_revision
from ett_collector.storage._engine import normalize_url
from ett_collector.storage._lost_time import lost_time_query
from ett_collector.storage._partitions import include_name
from ett_collector.storage._tables import metadata
from tests.support import spans

REPO_ROOT = Path(__file__).resolve().parents[2]
IDLE, FAILURE, PRODUCTIVE = Category.IDLE, Category.FAILURE, Category.PRODUCTIVE


def span(
    job: str,
    i: int,
    start: float = 0.0,
    end: float = 1.0,
    name: str = semconv.SPAN_TRAIN_WINDOW,
    **attrs: AttrValue,
) -> SpanRecord:
    """A span of ``job`` with id ``i``; ``model``, ``team`` and ``step`` name their semconv keys."""
    keys = {"model": semconv.MODEL, "team": semconv.TEAM, "step": semconv.STEP}
    real = {keys.get(k, k): v for k, v in attrs.items()}
    return spans.span(name, start, end, job=job, span_id=i, trace_id=f"{job:0>32}"[-32:], **real)


def seg(
    start: float, end: float, category: Category, *components: str, attempt: int = 0
) -> Segment:
    """A segment; its kind does not matter to storage."""
    kind = SegmentKind.TRAINING if category is PRODUCTIVE else SegmentKind.CUTOUT
    return Segment(attempt, start, end, category, kind, tuple(components))


def summary(
    job_id: str,
    segments: list[Segment],
    state: JobState = JobState.COMPLETED,
    model: str | None = "dlrm",
    team: str | None = "ads",
) -> JobSummary:
    """A JobSummary built directly from ``segments`` (figures consistent with them)."""
    alloc = segments[0].start if segments else 0.0
    end = segments[-1].end if segments else 0.0
    wall = end - alloc
    total = {c: sum(s.duration for s in segments if s.category is c) for c in Category}
    lost: dict[str, float] = {}
    for s in segments:
        for comp, secs in s.shares().items():
            lost[comp] = lost.get(comp, 0.0) + secs

    def pct(x: float) -> float:
        return 100.0 * x / wall if wall else 0.0

    return JobSummary(
        job_id=job_id,
        state=state,
        model=model,
        team=team,
        alloc=alloc,
        end=end,
        wall_s=wall,
        productive_s=total[PRODUCTIVE],
        idle_s=total[IDLE],
        failure_s=total[FAILURE],
        ett_pct=pct(total[PRODUCTIVE]),
        idle_pct=pct(total[IDLE]),
        failure_pct=pct(total[FAILURE]),
        tts_s=10.0,
        ttr_s=(None, 100.0),
        failures=1 if state is JobState.FAILED else 0,
        failure_causes={"killed": 1} if state is JobState.FAILED else {},
        unsaved_s=0.0,
        expected_unsaved_s=None,
        at_risk_s=0.0,
        checkpoint_blocking_s=0.0,
        lost_by_component=lost,
        checkpoint_advice=CheckpointAdvice(None, None, None, None, 0),
        attempts=(
            AttemptSummary(0, alloc, alloc + 10, end, end, "completed", False, None, 0, (0,)),
        ),
        segments=tuple(segments),
        span_count=3,
        last_span_end=end,
    )


def by_key(rows: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {r["key"]: r for r in rows}


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

# --- schema ------------------------------------------------------------------------------------


def test_upgrade_is_idempotent_and_keeps_data(store: Store) -> None:
    assert store.revision() == head_revision() is not None
    store.ingest([span("j1", 1), span("j1", 2)])
    store.upgrade()
    store.upgrade()
    assert store.revision() == head_revision()
    assert store.span_counts()["spans"] == 2
    assert set(inspect(store.engine).get_table_names()) >= {
        "spans",
        "jobs",
        "job_figures",
        "segments",
        "alembic_version",
    }


def test_migration_matches_table_definitions(store: Store) -> None:
    with store.engine.connect() as conn:
        opts = {"compare_type": True, "include_name": include_name}  # not spans' partitions
        ctx = MigrationContext.configure(conn, opts=opts)
        diff = compare_metadata(ctx, _all_tables())
    assert diff == []


def _all_tables() -> MetaData:
    """The storage tables and the alert tables: every table the migrations create."""
    from ett_collector.alerts._store import metadata as alert_metadata

    combined = MetaData(naming_convention=metadata.naming_convention)
    for source in (metadata, alert_metadata):
        for table in source.tables.values():
            table.to_metadata(combined)
    return combined


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_concurrent_upgrades_from_processes_do_not_race(database_url: str) -> None:
    code = "import sys; from ett_collector.storage import Store; Store(sys.argv[1]).upgrade()"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, database_url],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    s = Store(database_url)
    try:
        assert s.revision() == head_revision()
    finally:
        s.close()


def test_concurrent_upgrades_from_threads_do_not_race(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'threads.db'}"
    stores = [Store(url) for _ in range(4)]
    errors: list[BaseException] = []

    def up(s: Store) -> None:
        try:
            s.upgrade()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=up, args=(s,), daemon=True) for s in stores]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    try:
        assert not any(th.is_alive() for th in threads)
        assert errors == []
        assert {s.revision() for s in stores} == {head_revision()}
    finally:
        for s in stores:
            s.close()


def test_fresh_store_before_upgrade_has_no_revision(tmp_path: Path) -> None:
    s = Store(f"sqlite:///{tmp_path / 'deep' / 'er' / 'x.db'}")
    try:
        assert s.revision() is None
        s.upgrade()
        assert s.revision() == head_revision()
        assert (tmp_path / "deep" / "er" / "x.db").exists()
    finally:
        s.close()


def test_sqlite_pragmas(tmp_path: Path) -> None:
    s = Store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        with s.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    finally:
        s.close()


def test_url_normalization() -> None:
    assert normalize_url("postgresql://u@h:5/d").drivername == "postgresql+psycopg"
    assert normalize_url("postgresql+psycopg://u@h/d").drivername == "postgresql+psycopg"
    with pytest.raises(ValueError, match="unsupported"):
        normalize_url("mysql://u:secret@h/d")


# --- ingest ------------------------------------------------------------------------------------


def test_ingest_replay_changes_nothing(store: Store) -> None:
    batch = [span("j1", i, start=i, end=i + 1) for i in range(50)] + [span("j2", 1)]
    assert store.ingest(batch) == {"j1", "j2"}
    assert store.span_counts() == {"spans": 51, "jobs": 2, "dirty_jobs": 2, "failed_jobs": 0}
    seqs = dict(store.dirty_jobs())
    assert seqs == {"j1": 1, "j2": 1}

    assert store.ingest(batch) == set()
    assert store.ingest(batch[:10]) == set()
    assert store.span_counts()["spans"] == 51
    assert dict(store.dirty_jobs()) == seqs

    # a partly new batch stores only the new span and touches its jobs once more
    assert store.ingest([*batch[:5], span("j1", 999)]) == {"j1"}
    assert store.span_counts()["spans"] == 52
    assert dict(store.dirty_jobs()) == {"j1": 2, "j2": 1}
    assert store.ingest([]) == set()


def test_a_span_twice_in_one_batch_is_stored_and_counted_once(store: Store) -> None:
    # PostgreSQL inserts a batch as one statement of column arrays: its own repeats conflict
    twice = span("j1", 7, start=3, end=4)  # integer times, as a JSON sender may give them
    assert store.ingest([twice, span("j1", 8, start=3.5, end=4.5), twice]) == {"j1"}
    assert store.span_counts()["spans"] == 2
    loaded = store.load_spans("j1")
    assert [(s.span_id, s.start, s.end) for s in loaded] == [
        (f"{7:016x}", 3.0, 4.0),
        (f"{8:016x}", 3.5, 4.5),
    ]


def test_span_id_repeated_with_another_start_is_loaded_once(store: Store) -> None:
    store.ingest([span("j1", 1, start=5.0, end=6.0), span("j1", 2, start=1.0, end=2.0)])
    store.ingest([span("j1", 1, start=7.0, end=8.0)])  # a buggy emitter's repeat: stored...
    loaded = store.load_spans("j1")
    assert [(s.span_id, s.start) for s in loaded] == [(f"{2:016x}", 1.0), (f"{1:016x}", 5.0)]
    assert store.span_counts()["spans"] == 3  # ...and counted, but loaded once (first by start)


def test_ingest_keeps_latest_known_model_and_team(store: Store) -> None:
    store.ingest([span("j1", 1, model="dlrm", team="ads")])
    store.ingest([span("j1", 2)])  # no identity attributes: keep what is known
    store.ingest([span("j1", 3, team="feed")])
    with store.engine.connect() as conn:
        row = conn.exec_driver_sql("SELECT model, team FROM jobs WHERE job_id = 'j1'").one()
    assert tuple(row) == ("dlrm", "feed")


def test_load_spans_round_trips_attributes(store: Store) -> None:
    attrs: dict[str, AttrValue] = {
        semconv.STEP: 7,
        semconv.PUBLISH_STANDALONE: True,
        semconv.CHECKPOINT_MODE: "async",
        "x.float": 0.1 + 0.2,
        "x.list": [1, "a", 2.5],
        "x.text": 'naïve ✓ "quoted"\n',
        "x.none": None,
    }
    first = SpanRecord("a" * 32, "b" * 16, semconv.SPAN_EVAL, 10.25, 11.5, "j", 2, 3, attrs)
    later = SpanRecord("a" * 32, "c" * 16, semconv.SPAN_FAILURE, 1e9 + 0.123456, 1e9 + 1, "j", 0, 1)
    store.ingest([later, span("k", 1), first])
    loaded = store.load_spans("j")
    assert loaded == [first, later]  # by start time, attributes equal
    assert loaded[0].attributes == attrs
    assert loaded[1].start == 1e9 + 0.123456  # double precision survives
    assert store.load_spans("nope") == []


def test_concurrent_ingest_from_threads(store: Store) -> None:
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for b in range(10):
                store.ingest([span(f"j{t % 3}", t * 10_000 + b * 100 + i) for i in range(100)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert store.span_counts()["spans"] == 4 * 10 * 100
    assert sum(seq for _, seq in store.dirty_jobs()) == 4 * 10


# --- dirty tracking and summaries ------------------------------------------------------------


def test_save_summary_clears_dirty_only_when_unchanged(store: Store) -> None:
    store.ingest([span("j1", 1)])
    assert store.is_dirty("j1")
    [(job, seen)] = store.dirty_jobs()
    assert (job, seen) == ("j1", 1)

    store.ingest([span("j1", 2)])  # arrives while the summary is being computed
    store.save_summary(summary("j1", [seg(0, 10, PRODUCTIVE)]), seen, computed_at=100.0)
    assert store.is_dirty("j1")
    assert store.dirty_jobs() == [("j1", 2)]
    assert store.get_job("j1")["computed_at"] == 100.0  # type: ignore[index]

    store.save_summary(summary("j1", [seg(0, 20, PRODUCTIVE)]), 2, computed_at=200.0)
    assert not store.is_dirty("j1")
    assert store.dirty_jobs() == []
    store.ingest([span("j1", 3)])
    assert store.dirty_jobs() == [("j1", 3)]


def test_dirty_seq_counts_ingests_with_new_spans(store: Store) -> None:
    assert store.dirty_seq("j1") == 0
    store.ingest([span("j1", 1)])
    store.ingest([span("j1", 1), span("j1", 2), span("j1", 2)])  # in-batch repeat: stored once
    store.ingest([span("j1", 2)])  # nothing new: no change
    assert store.dirty_seq("j1") == 2
    assert store.span_counts()["spans"] == 2
    store.save_summary(summary("j1", [seg(0, 1, PRODUCTIVE)]), store.dirty_seq("j1"), 5.0)
    assert not store.is_dirty("j1") and store.dirty_seq("j1") == 2


def test_dirty_jobs_oldest_first_and_limited(store: Store) -> None:
    for i in range(5):
        store.ingest([span(f"j{i}", 1)])
    store.ingest([span("j0", 2)])  # still dirty: keeps its place
    assert [j for j, _ in store.dirty_jobs()] == ["j0", "j1", "j2", "j3", "j4"]
    assert [j for j, _ in store.dirty_jobs(limit=2)] == ["j0", "j1"]


def test_get_job_returns_stored_summary(store: Store) -> None:
    assert store.get_job("j1") is None
    assert not store.is_dirty("j1")
    s = summary("j1", [seg(0, 50, IDLE, "comms", "model"), seg(50, 100, PRODUCTIVE)])
    store.save_summary(s, seen_seq=0, computed_at=123.5)  # never ingested: the job row is made
    got = store.get_job("j1")
    assert got is not None
    assert got.pop("computed_at") == 123.5
    assert got == job_json(s)
    assert got["lost_by_component"] == {"comms": 25.0, "model": 25.0}
    assert store.job_ids() == ["j1"]
    assert not store.is_dirty("j1")


def test_segments_replaced_and_regrouped(store: Store) -> None:
    first = [seg(0, 5, IDLE, "other"), seg(5, 9, PRODUCTIVE), seg(9, 10, FAILURE, "failure")]
    store.save_summary(summary("j1", first), 0, 1.0)
    assert len(store.get_segments("j1")) == 3
    second = [
        seg(0, 30, IDLE, "comms", "model", "compile"),
        seg(30, 40, PRODUCTIVE),
        seg(40, 60, FAILURE, "checkpoint", "other", attempt=1),
    ]
    store.save_summary(summary("j1", second), 0, 2.0)
    assert store.get_segments("j1") == [segment_json(s) for s in second]
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT component, share FROM segments WHERE job_id = 'j1' AND seg = 0 ORDER BY part"
        ).all()
    assert [r[0] for r in rows] == ["comms", "model", "compile"]
    assert all(math.isclose(r[1], 1 / 3) for r in rows)
    assert store.get_segments("unknown") == []


# --- list_jobs -------------------------------------------------------------------------------


def _fleet(store: Store) -> None:
    store.save_summary(
        summary("a", [seg(0, 100, PRODUCTIVE)], JobState.COMPLETED, "dlrm", "ads"), 0, 1.0
    )
    store.save_summary(
        summary("b", [seg(0, 300, PRODUCTIVE)], JobState.FAILED, "dlrm", "feed"), 0, 1.0
    )
    store.save_summary(
        summary("c", [seg(50, 200, PRODUCTIVE)], JobState.RUNNING, "llm", "ads"), 0, 1.0
    )
    store.save_summary(
        summary("d", [seg(0, 250, PRODUCTIVE)], JobState.PRESUMED_DEAD, None, None), 0, 1.0
    )


def test_list_jobs_filters_and_order(store: Store) -> None:
    _fleet(store)
    rows = store.list_jobs()
    assert [r["job_id"] for r in rows] == ["b", "d", "c", "a"]  # newest end first
    assert set(rows[0]) == {
        "job_id",
        "state",
        "model",
        "team",
        "alloc",
        "end",
        "wall_s",
        "ett_pct",
        "idle_pct",
        "failure_pct",
        "failures",
        "computed_at",  # reads answer stored figures: each row says when they were computed
    }
    assert rows[0]["state"] == "failed" and rows[0]["failures"] == 1 and rows[0]["end"] == 300.0
    assert [r["job_id"] for r in store.list_jobs(state="running")] == ["c"]
    assert [r["job_id"] for r in store.list_jobs(model="dlrm")] == ["b", "a"]
    assert [r["job_id"] for r in store.list_jobs(team="ads")] == ["c", "a"]
    assert [r["job_id"] for r in store.list_jobs(model="dlrm", team="ads")] == ["a"]
    assert [r["job_id"] for r in store.list_jobs(since=200.0)] == ["b", "d", "c"]
    assert [r["job_id"] for r in store.list_jobs(limit=2)] == ["b", "d"]
    assert store.list_jobs(state="completed", since=101.0) == []
    assert store.live_job_ids() == ["c"]  # running; d is presumed dead: its figures stay put


# --- lost time -------------------------------------------------------------------------------


def _lost_fleet(store: Store) -> None:
    # job x (dlrm/ads): idle [0,40] comms+model, productive [40,100], failure [100,130] scheduler,
    #                   idle [130,140] checkpoint
    store.save_summary(
        summary(
            "x",
            [
                seg(0, 40, IDLE, "comms", "model"),
                seg(40, 100, PRODUCTIVE),
                seg(100, 130, FAILURE, "scheduler"),
                seg(130, 140, IDLE, "checkpoint"),
            ],
            model="dlrm",
            team="ads",
        ),
        0,
        1.0,
    )
    # job y (llm/feed): failure [20,80] failure, productive [80,200]
    store.save_summary(
        summary(
            "y",
            [seg(20, 80, FAILURE, "failure"), seg(80, 200, PRODUCTIVE)],
            model="llm",
            team="feed",
        ),
        0,
        1.0,
    )


def _approx(rows: list[dict[str, object]]) -> list[tuple[object, float, float, float]]:
    out = []
    for r in rows:
        idle, failure, lost = (float(r[k]) for k in ("idle_s", "failure_s", "lost_s"))  # type: ignore[arg-type]
        out.append((r["key"], round(idle, 6), round(failure, 6), round(lost, 6)))
    return out


def test_lost_time_by_component_shares_and_order(store: Store) -> None:
    _lost_fleet(store)
    assert _approx(store.lost_time("component", None, None)) == [
        ("failure", 0.0, 60.0, 60.0),
        ("scheduler", 0.0, 30.0, 30.0),
        ("comms", 20.0, 0.0, 20.0),
        ("model", 20.0, 0.0, 20.0),  # ties break by key
        ("checkpoint", 10.0, 0.0, 10.0),
    ]


def test_lost_time_clipped_to_window(store: Store) -> None:
    _lost_fleet(store)
    # [30, 110]: x idle [30,40] -> comms 5, model 5; x failure [100,110] -> scheduler 10;
    # x checkpoint [130,140] outside; y failure [30,80] -> 50
    assert _approx(store.lost_time("component", 30.0, 110.0)) == [
        ("failure", 0.0, 50.0, 50.0),
        ("scheduler", 0.0, 10.0, 10.0),
        ("comms", 5.0, 0.0, 5.0),
        ("model", 5.0, 0.0, 5.0),
    ]
    # open-ended windows
    assert by_key(store.lost_time("component", 135.0, None))["checkpoint"]["idle_s"] == 5.0
    assert _approx(store.lost_time("job", None, 10.0)) == [("x", 10.0, 0.0, 10.0)]
    assert store.lost_time("component", 300.0, 400.0) == []
    assert store.lost_time("component", 50.0, 50.0) == []
    assert store.lost_time("component", 60.0, 10.0) == []


@pytest.mark.parametrize(
    ("group_by", "expected"),
    [
        ("job", [("x", 50.0, 30.0, 80.0), ("y", 0.0, 60.0, 60.0)]),
        ("model", [("dlrm", 50.0, 30.0, 80.0), ("llm", 0.0, 60.0, 60.0)]),
        ("team", [("ads", 50.0, 30.0, 80.0), ("feed", 0.0, 60.0, 60.0)]),
    ],
)
def test_lost_time_by_job_model_team(
    store: Store, group_by: str, expected: list[tuple[object, float, float, float]]
) -> None:
    _lost_fleet(store)
    assert _approx(store.lost_time(group_by, None, None)) == expected
    # y's failure outweighs x's inside [0, 100]: the order follows lost_s
    window = _approx(store.lost_time(group_by, 0.0, 100.0))
    assert [k for k, *_ in window] == [expected[1][0], expected[0][0]]
    assert window[0][3] == 60.0 and window[1][3] == 40.0


@pytest.mark.parametrize("group_by", ["component", "job", "model", "team"])
def test_lost_time_uses_its_covering_index_on_sqlite(tmp_path: Path, group_by: str) -> None:
    s = Store(f"sqlite:///{tmp_path / 'plan.db'}")
    s.upgrade()
    try:
        for since, until in [(None, None), (10.0, None), (None, 20.0), (10.0, 20.0)]:
            sql, params = lost_time_query(group_by, since, until)
            with s.engine.connect() as conn:
                plan = " ".join(
                    str(r[-1])
                    for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", tuple(params))
                )
            assert f"COVERING INDEX ix_segments_lost_by_{group_by}" in plan
            assert "TEMP B-TREE" not in plan
    finally:
        s.close()


def test_lost_time_key_none_for_jobs_without_model(store: Store) -> None:
    store.save_summary(summary("z", [seg(0, 10, IDLE, "other")], model=None, team=None), 0, 1.0)
    assert store.lost_time("model", None, None) == [
        {"key": None, "idle_s": 10.0, "failure_s": 0.0, "lost_s": 10.0}
    ]


def test_lost_time_follows_replaced_summary(store: Store) -> None:
    store.save_summary(summary("x", [seg(0, 10, IDLE, "compile")]), 0, 1.0)
    store.save_summary(summary("x", [seg(0, 10, FAILURE, "data")]), 0, 2.0)
    assert _approx(store.lost_time("component", None, None)) == [("data", 0.0, 10.0, 10.0)]


@pytest.mark.parametrize("bad", ["", "components", "state", "component; DROP TABLE spans", "Job"])
def test_lost_time_rejects_bad_group_by(store: Store, bad: str) -> None:
    with pytest.raises(ValueError, match="group_by"):
        store.lost_time(bad, None, None)
    assert store.revision() == head_revision()


def test_similar_job_ids_suggest_the_closest_stored_ids(store: Store) -> None:
    for job in ("sim0-00015", "sim0-00016", "sim0-00150", "other-00015", "a%_b-1"):
        store.ingest([span(job, 1)])
    assert store.similar_job_ids("sim0-00015x") == ["sim0-00015"]  # the closest alone
    assert sorted(store.similar_job_ids("sim0-0015")) == ["sim0-00015", "sim0-00150"]  # a tie
    assert store.similar_job_ids("zzz-00015") == []  # nothing shares its start
    assert store.similar_job_ids("a%_b-2") == ["a%_b-1"]  # LIKE's wildcards taken literally
    assert store.similar_job_ids("a%") == []
