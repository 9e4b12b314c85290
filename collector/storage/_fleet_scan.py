"""The SQL behind the fleet overview. Whole hours and days come from the rollup
(:class:`CellScan` over ``fleet_cells``, ``job_cells`` and ``job_totals``); the partial hours at
a window's edges from the segments of the few jobs in them (:class:`FleetScan`), grouped in the
database.

Every segment row is clipped to the window, ``a = max(start, since)``, ``b = min(end, until)``,
and weighs ``(b - a) * share`` seconds; GPU-seconds multiply that by the ranks of the row's
attempt (from the job's stored summary; at least 1, and 1 when the job's figures are not in the
window). Rows inside one time bucket are grouped by the database; the few that cross a bucket
edge come back whole (:func:`crossing_rows`) and are cut in Python. Per-job sums need no buckets.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, text

from ett_collector.domain.model import Category

_PRODUCTIVE = Category.PRODUCTIVE.value


class FleetScan:
    """The window, bucket size and filters of one fleet answer, as SQL over one connection."""

    def __init__(
        self,
        conn: Connection,
        since: float,
        until: float,
        size: int,
        model: str | None,
        team: str | None,
        state: str | None,
        ids: list[str] | None = None,
    ) -> None:
        self.conn = conn
        self.pg = conn.dialect.name == "postgresql"
        self.size = size
        self.params: dict[str, Any] = {"lo": since, "hi": until, "w": size}
        jobs = ['f."end" > :lo', "f.alloc < :hi"]
        segs = ['s."end" > :lo', "s.start < :hi"]
        for column, value in (("model", model), ("team", team), ("state", state)):
            if value is not None:
                self.params[column] = value
                jobs.append(f"f.{column} = :{column}")
                if column != "state":
                    segs.append(f"s.{column} = :{column}")
        if state is not None:
            segs.append("s.job_id IN (SELECT g.job_id FROM job_figures g WHERE g.state = :state)")
        if ids is not None:  # only these jobs, found by key (a short window's few jobs)
            self.params["ids"] = ids
            jobs.insert(0, "f.job_id IN :ids")
            segs.insert(0, "s.job_id IN :ids")
        self.jobs_where = " AND ".join(jobs)
        self.segs_where = " AND ".join(segs)

    # -- SQL pieces -------------------------------------------------------------------------

    def _ranks(self) -> str:
        """``(job_id, attempt, ranks)`` of the jobs in the window, from their summaries."""
        if self.pg:
            return (
                "SELECT f.job_id, (e.value ->> 'attempt')::int AS attempt, GREATEST(1, "
                "COALESCE(jsonb_array_length(e.value -> 'ranks'), 0)) AS ranks FROM job_figures f "
                "CROSS JOIN LATERAL jsonb_array_elements(f.summary::jsonb -> 'attempts') e "
                f"WHERE {self.jobs_where}"
            )
        return (
            "SELECT f.job_id, CAST(json_extract(e.value, '$.attempt') AS INTEGER) AS attempt, "
            "MAX(1, COALESCE(json_array_length(e.value, '$.ranks'), 0)) AS ranks "
            "FROM job_figures f, json_each(f.summary, '$.attempts') e "
            f"WHERE {self.jobs_where}"
        )

    def _bucket(self, expr: str) -> str:
        """The bucket number of an instant (floor of ``expr / w``; instants are positive)."""
        return f"FLOOR(({expr}) / :w)" if self.pg else f"CAST(({expr}) / :w AS INTEGER)"

    def _rows(self, where: str = "") -> str:
        """Clipped rows ``a``, ``b``, their columns and their attempt's ``ranks`` (rows that
        ``where``, over the clipped ``a`` and ``b``, keeps; the join comes after it)."""
        a = "CASE WHEN s.start < :lo THEN :lo ELSE s.start END"
        b = 'CASE WHEN s."end" > :hi THEN :hi ELSE s."end" END'
        cols = "s.job_id, s.attempt, s.category, s.component, s.share, s.model, s.team"
        inner = f"SELECT {cols}, {a} AS a, {b} AS b FROM segments s WHERE {self.segs_where}"
        if where:
            inner = f"SELECT * FROM ({inner}) y WHERE {where}"
        return (
            "SELECT c.*, COALESCE(r.ranks, 1) AS ranks "
            f"FROM ({inner}) c LEFT JOIN ({self._ranks()}) r "
            "ON r.job_id = c.job_id AND r.attempt = c.attempt"
        )

    def _run(self, sql: str) -> list[tuple[Any, ...]]:
        stmt = text(sql)
        if "ids" in self.params:
            stmt = stmt.bindparams(bindparam("ids", expanding=True))
        return [tuple(r) for r in self.conn.execute(stmt, self.params)]

    # -- the answers ------------------------------------------------------------------------

    def in_buckets(self) -> list[tuple[Any, ...]]:
        """``(bucket start, model, team, category, component, ranks, seconds)`` of the rows
        inside one bucket: grouped by the ranks' value, not by job, so the answer's size
        depends on buckets and keys, never on the number of jobs."""
        k = self._bucket("x.a")
        return self._run(
            f"SELECT {k} * :w, x.model, x.team, x.category, x.component, x.ranks, "
            f"SUM((x.b - x.a) * x.share) FROM ({self._rows()}) x "
            f"WHERE {k} = {self._bucket('x.b')} "
            "GROUP BY 1, 2, 3, 4, 5, 6"  # ordinals: one spelling of the bucket on both dialects
        )

    def crossing_rows(self) -> list[tuple[Any, ...]]:
        """Whole rows that cross a bucket edge: ``(a, b, category, component, share, model,
        team, ranks)``."""
        crossing = f"{self._bucket('y.a')} <> {self._bucket('y.b')}"
        return self._run(
            "SELECT x.a, x.b, x.category, x.component, x.share, x.model, x.team, x.ranks "
            f"FROM ({self._rows(crossing)}) x"
        )

    def per_job(self) -> list[tuple[Any, ...]]:
        """``(job_id, window seconds, lost seconds, lost GPU-seconds)`` of every job in the
        window (meant for the short windows at a fleet answer's edges)."""
        lost = f"CASE WHEN x.category <> '{_PRODUCTIVE}' THEN (x.b - x.a) * x.share ELSE 0 END"
        return self._run(
            f"SELECT x.job_id, SUM((x.b - x.a) * x.share), SUM({lost}), SUM(({lost}) * x.ranks) "
            f"FROM ({self._rows()}) x GROUP BY x.job_id"
        )


class CellScan:
    """The rollup's side of one fleet answer (``collector/storage/_fleet_cells.py``): fleet
    cells of whole hours and days, and per-job totals, under the answer's filters."""

    def __init__(
        self, conn: Connection, model: str | None, team: str | None, state: str | None
    ) -> None:
        self.conn = conn
        self.params: dict[str, Any] = {}
        self.filters = ""
        for column, value in (("model", model), ("team", team), ("state", state)):
            if value is not None:
                self.params[column] = value
                self.filters += f" AND {column} = :{column}"

    def _run(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        stmt = text(sql)
        if "ids" in params:
            stmt = stmt.bindparams(bindparam("ids", expanding=True))
        return [tuple(r) for r in self.conn.execute(stmt, self.params | params)]

    def cells(
        self, grain: int, since: float, until: float, bucket: float | None = None
    ) -> list[tuple[Any, ...]]:
        """``(t, model, team, category, component, seconds, GPU-seconds)`` of the fleet cells
        of size ``grain`` starting in ``[since, until)`` (``''``: no model or team); with
        ``bucket``, the cells all fall in that one bucket, summed there (``t`` = ``bucket``)."""
        t = "t" if bucket is None else ":bucket"
        return self._run(
            f"SELECT {t}, model, team, category, component, SUM(seconds), SUM(gpu_s) "
            f"FROM fleet_cells WHERE grain = :g AND t >= :a AND t < :b{self.filters} "
            f"GROUP BY {'t, ' if bucket is None else ''}model, team, category, component",
            g=grain,
            a=since,
            b=until,
            bucket=bucket,
        )

    def inside(self, since: float, until: float, limit: int) -> list[tuple[Any, ...]]:
        """``(job_id, seconds, lost seconds, lost GPU-seconds)`` of the ``limit`` jobs whose
        segments all fall in ``[since, until]`` that lost the most GPU-seconds (ties: job id)."""
        return self._run(
            'SELECT job_id, seconds, lost_s, lost_gpu_s FROM job_totals WHERE "first" >= :lo '
            f'AND "last" <= :hi{self.filters} ORDER BY lost_gpu_s DESC, job_id LIMIT :limit',
            lo=since,
            hi=until,
            limit=limit,
        )

    def overlapping(self, since: float, until: float) -> list[str]:
        """Jobs with segments in ``[since, until]`` (one scan of the small per-job table)."""
        rows = self._run(
            f'SELECT job_id FROM job_totals WHERE "last" > :lo AND "first" < :hi{self.filters}',
            lo=since,
            hi=until,
        )
        return [str(r[0]) for r in rows]

    def straddling(self, since: float, until: float) -> list[str]:
        """Jobs with segments both inside and outside ``[since, until]``."""
        rows = self._run(
            'SELECT job_id FROM job_totals WHERE "last" > :lo AND "first" < :hi '
            f'AND ("first" < :lo OR "last" > :hi){self.filters}',
            lo=since,
            hi=until,
        )
        return [str(r[0]) for r in rows]

    def job_sums(
        self, ids: list[str], grain: int, since: float, until: float
    ) -> list[tuple[Any, ...]]:
        """``(job_id, seconds, lost seconds, lost GPU-seconds)`` of jobs ``ids`` from their
        cells of size ``grain`` starting in ``[since, until)``."""
        lost = f"CASE WHEN category <> '{_PRODUCTIVE}' THEN"
        return self._run(
            f"SELECT job_id, SUM(seconds), SUM({lost} seconds ELSE 0 END), "
            f"SUM({lost} gpu_s ELSE 0 END) FROM job_cells WHERE job_id IN :ids "
            "AND grain = :g AND t >= :a AND t < :b GROUP BY job_id",
            ids=ids,
            g=grain,
            a=since,
            b=until,
        )

    def figures(self, ids: list[str], since: float, until: float) -> dict[str, tuple[Any, ...]]:
        """``job_id -> (state, model, team, ETT%)`` of jobs ``ids`` whose figures overlap the
        window and match the filters."""
        flt = self.filters.replace(" AND ", " AND f.")
        rows = self._run(
            "SELECT f.job_id, f.state, f.model, f.team, f.ett_pct FROM job_figures f "
            f'WHERE f.job_id IN :ids AND f."end" > :lo AND f.alloc < :hi{flt}',
            ids=ids,
            lo=since,
            hi=until,
        )
        return {str(r[0]): r[1:] for r in rows}
