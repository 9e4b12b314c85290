"""The store's memory of each job's last load stays within its jobs and rows bounds."""

from __future__ import annotations

from ett_collector.storage._rows import DecodedRows


def test_the_least_recently_put_jobs_go_first_beyond_either_bound() -> None:
    memory = DecodedRows(jobs=3, rows=100)
    for job, n in (("a", 40), ("b", 40), ("a", 10), ("c", 30)):
        memory.put(job, n, job + str(n))
    assert [memory.get(j) for j in "abc"] == ["a10", "b40", "c30"]  # 80 rows held
    memory.put("d", 30, "d30")  # 110 rows: b, the least recently put, goes
    assert [memory.get(j) for j in "abcd"] == ["a10", None, "c30", "d30"]
    memory.put("e", 1, "e1")  # four jobs: a goes
    assert [memory.get(j) for j in "acde"] == [None, "c30", "d30", "e1"]
    assert memory.fits(100) and not memory.fits(101)
    assert not DecodedRows(jobs=0).fits(1)
