"""Panel and variable shorthands over the SDK's typed builders, in this project's style."""

from __future__ import annotations

from typing import TypedDict, TypeVar, Unpack

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

from ._queries import NONE, POSTGRES, PROMETHEUS

Target = cogbuilder.Builder[cogvariants.Dataquery]

FOLDER_UID = "ett"
"""The Grafana folder that holds the dashboards and the alert rules."""

FOLDER_TITLE = "ETT"


def dashboard(uid: str, *, title: str, description: str, tags: list[str]) -> dash.Dashboard:
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


def fleet_dashboard(uid: str, *, title: str, description: str, tags: list[str]) -> dash.Dashboard:
    """A :func:`dashboard` over the fleet, with the :func:`fleet_variables`."""
    d = dashboard(uid, title=title, description=description, tags=tags)
    for v in fleet_variables():
        d = d.with_variable(v)
    return d


P = TypeVar("P", stat.Panel, timeseries.Panel, table.Panel, bargauge.Panel, statetimeline.Panel)


class Layout(TypedDict, total=False):
    """Where a panel sits and what its info tooltip says: ``w`` of 24 columns, ``h`` rows."""

    w: int
    h: int
    description: str


def _panel(
    panel: P,
    title: str,
    target: Target,
    layout: Layout,
    default: Layout,
    datasource: models.DataSourceRef = POSTGRES,
) -> P:
    """What every panel here shares: its title, description, data source, one query and size
    (``layout``, else the kind's ``default``)."""
    box = default | layout
    p = panel.title(title).description(box.get("description", "")).datasource(datasource)
    return p.with_target(target).span(box["w"]).height(box["h"])


def stat_panel(title: str, target: Target, unit: str, **layout: Unpack[Layout]) -> stat.Panel:
    """The latest value of each column (6 x 4 unless ``layout`` says)."""
    reduce = common_builders.ReduceDataOptions().values(False).calcs(["lastNotNull"]).fields("/.*/")
    p = stat.Panel().unit(unit).decimals(1).graph_mode(common.BigValueGraphMode.NONE)
    p = p.color_mode(common.BigValueColorMode.VALUE).reduce_options(reduce)
    return _panel(p, title, target, layout, {"w": 6, "h": 4})


def series_panel(
    title: str,
    target: Target,
    unit: str,
    *,
    stacked: bool = False,
    prometheus: bool = False,
    **layout: Unpack[Layout],
) -> timeseries.Panel:
    """A time series (12 x 8 unless ``layout`` says): lines, or ``stacked`` bars; the query on
    PostgreSQL, or on Prometheus."""
    p = timeseries.Panel().unit(unit).fill_opacity(20 if stacked else 5)
    if stacked:
        p = p.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
        p = p.draw_style(common.GraphDrawStyle.BARS)
    source = PROMETHEUS if prometheus else POSTGRES
    return _panel(p, title, target, layout, {"w": 12, "h": 8}, source)


def table_panel(title: str, target: Target, **layout: Unpack[Layout]) -> table.Panel:
    """A table of the query's rows (24 x 8 unless ``layout`` says)."""
    return _panel(table.Panel(), title, target, layout, {"w": 24, "h": 8})


def bar_panel(title: str, target: Target, unit: str, **layout: Unpack[Layout]) -> bargauge.Panel:
    """Horizontal bars, one per row of the query (12 x 8 unless ``layout`` says)."""
    reduce = common_builders.ReduceDataOptions().values(True).calcs([])
    p = bargauge.Panel().unit(unit).orientation(common.VizOrientation.HORIZONTAL)
    return _panel(p.reduce_options(reduce), title, target, layout, {"w": 12, "h": 8})


def timeline_panel(title: str, target: Target, **layout: Unpack[Layout]) -> statetimeline.Panel:
    """A state timeline (24 x 6 unless ``layout`` says)."""
    p = statetimeline.Panel().show_value(common.VisibilityMode.AUTO).merge_values(False)
    return _panel(p, title, target, layout, {"w": 24, "h": 6})


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


def _distinct(column: str) -> str:
    """The values of ``column`` over all jobs, ``(none)`` for a job without one."""
    return f"SELECT DISTINCT COALESCE({column}, '{NONE}') FROM ett_v1_jobs ORDER BY 1"


def fleet_variables() -> list[cogbuilder.Builder[models.VariableModel]]:
    """model, team (multi-value), by (model or team) and bucket (time-series resolution)."""
    return [
        sql_variable("model", "Model", _distinct("model")),
        sql_variable("team", "Team", _distinct("team")),
        custom_variable("by", "Series by", ["model", "team"]),
        custom_variable("bucket", "Bucket", ["1h", "6h", "1d"]),
    ]
