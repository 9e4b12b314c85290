"""Panel and variable shorthands over the SDK's typed builders, in this project's style."""

from __future__ import annotations

from typing import TypeVar

from grafana_foundation_sdk.builders import (
    bargauge,
    stat,
    statetimeline,
    table,
    timeseries,
)
from grafana_foundation_sdk.builders import (
    common as common_builders,
)
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as models

from ._queries import POSTGRES, PROMETHEUS

Target = cogbuilder.Builder[cogvariants.Dataquery]

FOLDER_UID = "ett"
"""The Grafana folder that holds the dashboards and the alert rules."""

FOLDER_TITLE = "ETT"

NONE = "(none)"
"""How a job without a model or team shows in variables and legends."""

FILTER = f"COALESCE(model, '{NONE}') IN ($model) AND COALESCE(team, '{NONE}') IN ($team)"
"""The model and team variables, as a WHERE condition on any view with those columns."""

BY = f"COALESCE($by, '{NONE}')"
"""The series key chosen by the ``by`` variable (model or team)."""


def clip(from_: str = "$__unixEpochFrom()", to: str = "$__unixEpochTo()") -> str:
    """A segment row's seconds inside the dashboard's time range (as the read API clips)."""
    return f"(LEAST(end_s, {to}) - GREATEST(start_s, {from_})) * share"


IN_RANGE = "end_s > $__unixEpochFrom() AND start_s < $__unixEpochTo()"
"""Segment rows that overlap the time range."""


def dashboard(uid: str, title: str, description: str, tags: list[str]) -> dash.Dashboard:
    """An editable dashboard in UTC with the project's refresh choices."""
    return (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["ett", *tags])
        .timezone("utc")
        .time("now-7d", "now")
        .refresh("1m")
        .tooltip(models.DashboardCursorSync.CROSSHAIR)
        .editable()
    )


P = TypeVar("P", stat.Panel, timeseries.Panel, table.Panel, bargauge.Panel, statetimeline.Panel)


def _panel(panel: P, title: str, target: Target, w: int, h: int, description: str,
           datasource: models.DataSourceRef = POSTGRES) -> P:  # fmt: skip
    """What every panel here shares: its title, description, data source, one query and size
    (``w`` of 24 columns, ``h`` rows)."""
    p = panel.title(title).description(description).datasource(datasource).with_target(target)
    return p.span(w).height(h)


def stat_panel(title: str, target: Target, unit: str, w: int = 6, h: int = 4,
               description: str = "") -> stat.Panel:  # fmt: skip
    reduce = common_builders.ReduceDataOptions().values(False).calcs(["lastNotNull"]).fields("/.*/")
    return _panel(
        stat.Panel()
        .unit(unit)
        .decimals(1)
        .graph_mode(common.BigValueGraphMode.NONE)
        .color_mode(common.BigValueColorMode.VALUE)
        .reduce_options(reduce),
        title, target, w, h, description,
    )  # fmt: skip


def series_panel(title: str, target: Target, unit: str, w: int = 12, h: int = 8,
                 stacked: bool = False, prometheus: bool = False,
                 description: str = "") -> timeseries.Panel:  # fmt: skip
    p = timeseries.Panel().unit(unit).fill_opacity(20 if stacked else 5)
    if stacked:
        p = p.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
        p = p.draw_style(common.GraphDrawStyle.BARS)
    return _panel(p, title, target, w, h, description, PROMETHEUS if prometheus else POSTGRES)


def table_panel(title: str, target: Target, w: int = 24, h: int = 8,
                description: str = "") -> table.Panel:  # fmt: skip
    return _panel(table.Panel(), title, target, w, h, description)


def bar_panel(title: str, target: Target, unit: str, w: int = 12, h: int = 8,
              description: str = "") -> bargauge.Panel:  # fmt: skip
    return _panel(
        bargauge.Panel()
        .unit(unit)
        .orientation(common.VizOrientation.HORIZONTAL)
        .reduce_options(common_builders.ReduceDataOptions().values(True).calcs([])),
        title, target, w, h, description,
    )  # fmt: skip


def timeline_panel(title: str, target: Target, w: int = 24, h: int = 6,
                   description: str = "") -> statetimeline.Panel:  # fmt: skip
    p = statetimeline.Panel().show_value(common.VisibilityMode.AUTO).merge_values(False)
    return _panel(p, title, target, w, h, description)


def sql_variable(name: str, label: str, sql: str, multi: bool = True) -> dash.QueryVariable:
    """A variable whose options come from one SQL query on the PostgreSQL data source."""
    v = (
        dash.QueryVariable(name)
        .label(label)
        .datasource(POSTGRES)
        .query(" ".join(sql.split()))
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(models.VariableSort.ALPHABETICAL_ASC)
    )
    if multi:
        v = v.multi(True).include_all(True)
    return v


def custom_variable(name: str, label: str, values: list[str]) -> dash.CustomVariable:
    """A single-choice variable over fixed values (the first is the default)."""
    return (
        dash.CustomVariable(name)
        .label(label)
        .values(",".join(values))
        .current(models.VariableOption(selected=True, text=values[0], value=values[0]))
    )


def fleet_variables() -> list[cogbuilder.Builder[models.VariableModel]]:
    """model, team (multi-value), by (model or team) and bucket (time-series resolution)."""
    return [
        sql_variable(
            "model", "Model",
            f"SELECT DISTINCT COALESCE(model, '{NONE}') FROM ett_v1_jobs ORDER BY 1",
        ),
        sql_variable(
            "team", "Team",
            f"SELECT DISTINCT COALESCE(team, '{NONE}') FROM ett_v1_jobs ORDER BY 1",
        ),
        custom_variable("by", "Series by", ["model", "team"]),
        custom_variable("bucket", "Bucket", ["1h", "6h", "1d"]),
    ]  # fmt: skip
