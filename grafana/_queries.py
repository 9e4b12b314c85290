"""Panel queries: SQL (our own builder: the SDK has no SQL query type) and PromQL, and the SQL
fragments the dashboards share (the model and team filter, the series key, the time-range clip).

A :class:`SqlQuery` is the SDK's ``UnknownDataquery`` (it serializes the dict it holds) that also
remembers, outside its JSON, the columns the panel expects: the tests run every query on a real
PostgreSQL and compare.
"""

from __future__ import annotations

from typing import Literal

from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import runtime
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import dashboard as models

from ett_collector.schemas import NO_LABEL

POSTGRES_TYPE = "grafana-postgresql-datasource"
"""The core PostgreSQL data source plugin of Grafana 10.2 and later."""

PROMETHEUS_TYPE = "prometheus"

POSTGRES_UID = "ett-postgres"
"""The uid of the PostgreSQL data source that the dashboards and alert rules name."""

PROMETHEUS_UID = "ett-prometheus"
"""The uid of the Prometheus data source (scraping the collectors' ``/metrics``)."""

POSTGRES = models.DataSourceRef(type_val=POSTGRES_TYPE, uid=POSTGRES_UID)
PROMETHEUS = models.DataSourceRef(type_val=PROMETHEUS_TYPE, uid=PROMETHEUS_UID)

Format = Literal["time_series", "table"]

NONE = NO_LABEL
"""How a job without a model or team shows in variables and legends."""

FILTER = f"COALESCE(model, '{NONE}') IN ($model) AND COALESCE(team, '{NONE}') IN ($team)"
"""The model and team variables, as a WHERE condition on any view with those columns."""

BY = f"COALESCE($by, '{NONE}')"
"""The series key chosen by the ``by`` variable (model or team)."""

BUCKET_IN_RANGE = "bucket >= $__timeFrom() AND bucket < $__timeTo()"
"""An hourly or daily bucket belongs to the dashboard's range when its start lies in
``[from, to)``: ``$__timeFilter`` is ``BETWEEN from AND to``, which also took the bucket that
starts at the range's end, so a day from midnight to midnight summed 25 hours."""

SAVE_TIMES = (
    "MAX(end_s) - MIN(start_s) AS blocking_s, MAX(persisted_s) - MIN(start_s) AS durable_after_s"
)
"""Of the ``ett_v1_checkpoints`` rows of one save (one job, attempt and step, every rank): its
blocking, ``[earliest start, latest end]`` over ranks as the spec cuts it, and how long after
its start it was durable (the latest persist's end; NULL for a sync save)."""

IN_RANGE = "end_s > $__unixEpochFrom() AND start_s < $__unixEpochTo()"
"""Segment rows that overlap the time range."""


def clip(from_: str = "$__unixEpochFrom()", to: str = "$__unixEpochTo()") -> str:
    """A segment row's seconds inside the dashboard's time range (as the read API clips)."""
    return f"(LEAST(end_s, {to}) - GREATEST(start_s, {from_})) * share"


class SqlQuery(runtime.UnknownDataquery):
    """A raw-SQL target of Grafana's SQL data sources, with the columns it must return."""

    def __init__(self, data: dict[str, object], columns: tuple[str, ...]) -> None:
        super().__init__(data)
        self.columns = columns

    @property
    def sql(self) -> str:
        """The query text, with Grafana's macros and variables unexpanded."""
        return str(self.data["rawSql"])

    @property
    def format(self) -> str:
        """``time_series`` or ``table``."""
        return str(self.data["format"])


class Sql(cogbuilder.Builder[cogvariants.Dataquery]):
    """Builds a :class:`SqlQuery` for the PostgreSQL data source.

    ``columns`` are the result columns the panel reads, in order (a tuple, or one string of
    names separated by spaces); a ``time_series`` query returns ``time`` first, then ``metric``
    (the series name) when it has one, then values.
    """

    def __init__(
        self, sql: str, columns: tuple[str, ...] | str, fmt: Format = "table", ref_id: str = "A"
    ) -> None:
        self._sql = " ".join(sql.split())
        self._columns = tuple(columns.split()) if isinstance(columns, str) else columns
        self._format = fmt
        self._ref_id = ref_id

    def build(self) -> SqlQuery:
        return SqlQuery(
            {
                "refId": self._ref_id,
                "datasource": POSTGRES.to_json(),
                "editorMode": "code",
                "format": self._format,
                "rawQuery": True,
                "rawSql": self._sql,
            },
            self._columns,
        )


def promql(expr: str, legend: str = "", ref_id: str = "A") -> prometheus.Dataquery:
    """A range query of the Prometheus data source."""
    q = prometheus.Dataquery().expr(expr).range().ref_id(ref_id).datasource(PROMETHEUS)
    return q.legend_format(legend) if legend else q
