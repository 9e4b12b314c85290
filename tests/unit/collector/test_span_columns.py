"""PostgreSQL's batch writes as column arrays (``storage/_arrays.py``): the spans' insert, the
step-time buckets' upsert and the runs' update."""

from __future__ import annotations

from ett_collector.storage._arrays import column_insert
from ett_collector.storage._compaction import _EXTEND_RUNS
from ett_collector.storage._rows import SPAN_COLUMNS, span_rows
from ett_collector.storage._series import SERIES_COLUMNS, SERIES_UPSERT, merged
from ett_collector.storage._sql import SPAN_INSERT
from tests.support.spans import span


def test_span_arrays_hold_each_rows_values_in_order_with_one_type_each() -> None:
    records = [span("a", 1, 2, attempt=1, rank=3, job="j", x=1), span("b", 2.5, 4.0, job="k")]
    rows = span_rows(records)
    columns = SPAN_INSERT.arrays(rows)
    assert len(columns) == len(SPAN_COLUMNS)
    assert [tuple(c[i] for c in columns) for i in range(len(rows))] == [tuple(r) for r in rows]
    start, end = columns[SPAN_COLUMNS.index("start")], columns[SPAN_COLUMNS.index("end")]
    # integer times become floats: an array of PostgreSQL holds values of one type
    assert [type(v) for v in start + end] == [float] * 4
    assert columns[SPAN_COLUMNS.index("attempt")] == [1, 0]
    assert columns[SPAN_COLUMNS.index("rank")] == [3, 0]


def test_the_statements_send_one_binary_array_per_column() -> None:
    for insert, columns in ((SPAN_INSERT, SPAN_COLUMNS), (SERIES_UPSERT, SERIES_COLUMNS)):
        assert insert.sql.count("%b::") == len(columns)  # binary: no text escaping per value
        assert "SELECT * FROM unnest(" in insert.sql
    assert SPAN_INSERT.sql.endswith("ON CONFLICT DO NOTHING")
    assert '"wait_s" = window_series."wait_s" + excluded."wait_s"' in SERIES_UPSERT.sql
    assert 'WHEN excluded."first_start" < window_series."first_start"' in SERIES_UPSERT.sql
    assert 'WHEN excluded."last_end" > window_series."last_end"' in SERIES_UPSERT.sql


def test_merged_buckets_hold_each_key_once_with_their_sums() -> None:
    a = ("j", 0, 1, 60.0, 2, 20, 200, 19.5, 10, 9.5, 1.25, 75.0, 95.0)
    b = ("j", 0, 1, 60.0, 1, 10, 100, 10.0, 0, 0.0, 0.0, 65.0, 75.0)
    c = ("j", 0, 2, 60.0, 1, 10, 100, 10.0, 0, 0.0, 0.0, 60.0, 70.0)
    want = ("j", 0, 1, 60.0, 3, 30, 300, 29.5, 10, 9.5, 1.25, 65.0, 95.0)  # earliest, latest
    assert merged([a, c, b]) == [want, c]
    assert merged([]) == []
    # a bucket stored before migration 0012 does not say when it trained: nor does the sum
    old = ("j", 0, 1, 60.0, 1, 10, 100, 10.0, 0, 0.0, 0.0, None, None)
    assert merged([old, a])[0][11:] == merged([a, old])[0][11:] == (None, None)


def test_a_nullable_column_keeps_its_nulls() -> None:
    # a run without a step counter has no step_last: NULL in the array, not an error
    assert _EXTEND_RUNS.arrays([(2.0, None, 5, 1, "j", 0, 1, 1.0, "t", "s")])[1] == [None]
    assert _EXTEND_RUNS.arrays([(2, 7, None, 1, "j", 0, 1, 1, "t", "s")])[:3] == (
        [2.0],
        [7],
        [None],
    )
    assert column_insert("t", ("c",), (str,)).arrays([(None,), ("a",)]) == ([None, "a"],)


def test_the_runs_update_sets_the_columns_of_the_rows_of_each_key() -> None:
    sql = _EXTEND_RUNS.sql
    assert sql.startswith('UPDATE window_runs AS w SET "end" = u."end", "step_last" = u.')
    assert sql.count("%b::") == 10
    assert 'AS u("end", "step_last", "samples", "count", "job_id",' in sql
    assert sql.endswith('w."trace_id" = u."trace_id" AND w."span_id" = u."span_id"')
