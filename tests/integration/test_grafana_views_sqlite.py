"""The ett_v1 views on SQLite: same names and columns as on PostgreSQL (times as UTC text), and
the hourly and daily views add up to the segments."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ett_collector.storage import Store
from ett_collector.storage._roles import GRAFANA_VIEWS, RoleError, grant_readonly
from ett_collector.write.pipeline import Pipeline
from tests.support.worked_example import worked_example

BASE = 1_700_006_200.0  # 200 s before an hour (and day) edge: the job crosses it


def test_views_on_sqlite(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    store.upgrade()
    store.ingest(worked_example("j", BASE))
    Pipeline(store, window_s=10).recompute("j")
    job = store.get_job("j")
    assert job is not None
    with store.engine.connect() as conn:
        for view in GRAFANA_VIEWS:
            conn.exec_driver_sql(f"SELECT * FROM {view}").fetchall()

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in conn.exec_driver_sql(sql)]

        by_segments = dict(rows("SELECT category, SUM(seconds) FROM ett_v1_segments GROUP BY 1"))
        for view in ("ett_v1_time_hourly", "ett_v1_time_daily"):
            sums = dict(rows(f"SELECT category, SUM(seconds) FROM {view} GROUP BY 1"))
            assert sums.keys() == by_segments.keys()
            assert all(math.isclose(sums[k], by_segments[k]) for k in sums)
        hours = rows("SELECT DISTINCT bucket FROM ett_v1_time_hourly ORDER BY 1")
        ttr = rows("SELECT ttr_s FROM ett_v1_attempts WHERE failed ORDER BY attempt")
    assert [h[0] for h in hours] == ["2023-11-14 23:00:00", "2023-11-15 00:00:00"]
    assert [r[0] for r in ttr] == job["ttr_s"] == [100.0]
    assert by_segments == {"productive": 300.0, "idle": 70.0, "failure": 130.0}


def test_no_roles_on_sqlite(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        grant_readonly(store.engine, "ett_grafana")
    except RoleError as exc:
        assert "mode=ro" in str(exc)
    else:
        raise AssertionError("SQLite has no roles")
