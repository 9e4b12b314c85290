"""What every page shares: the client, filters kept in the URL, links to jobs, plain errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

import streamlit as st

from .client import ApiError, Client
from .settings import DashboardSettings

EMPTY_HELP = (
    "No jobs yet. Point a trainer at the collector: run every rank with the same `ETT_JOB_ID` "
    "and `OTEL_EXPORTER_OTLP_ENDPOINT={api}` (see the README's *Instrument your own trainer*), "
    "or fill it with a simulated fleet: `ett simulate`."
)


def settings() -> DashboardSettings:
    """This process's settings."""
    return DashboardSettings.from_env()


def client() -> Client:
    """The API client of this process's settings."""
    return Client(settings())


def empty_state() -> None:
    """Say what to do when the collector has no jobs."""
    st.info(EMPTY_HELP.format(api=settings().api_url))


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#|<>~$:@])")
"""Characters that make Markdown structure inside a line: emphasis, links and images, HTML,
code, tables, strikethrough, math, and the ``:``/``@`` of bare URLs and e-mail autolinks."""


def literal(value: object, most: int = 80) -> str:
    """``value`` as text Markdown shows as it is (a link's ``[x](http://evil)`` in a job id
    became a working link on the page), cut to ``most`` characters (a 5,000-character id
    filled the screen)."""
    text = str(value)
    if len(text) > most:
        text = text[: most - 1] + "…"
    return _MARKDOWN.sub(r"\\\1", text)


def show_error(exc: ApiError) -> None:
    """A plain message on the page (never a traceback)."""
    st.error(exc.message)


def facets(c: Client) -> dict[str, list[str]]:
    """The models, teams and states to filter on; on a failed read, a plain message and the
    page stops there, to come back by itself once the collector answers (:func:`watch`)."""
    try:
        return c.facets()
    except ApiError as exc:
        show_error(exc)
        watch(c.facets, None)
        st.stop()


def watch(read: Callable[[], Any], shown: Any) -> None:
    """Read again every refresh period; rerun the whole page when the answer is no longer
    ``shown`` (new figures, or the collector answering again after a failed first read: the
    Fleet, Jobs and advisor pages stayed on "does not answer" after it came back), and say
    so when the read fails (the advisor kept old figures with no word while it was down)."""

    @st.fragment(run_every=settings().refresh_s)
    def _watch() -> None:
        try:
            now = read()
        except ApiError as exc:
            show_error(exc)
            return
        if now != shown:
            st.rerun()

    _watch()


def filter_select(
    label: str, name: str, options: Sequence[str], *, where: object = st, open_ended: bool = True
) -> str:
    """A filter kept in the URL's ``name`` whose empty value, shown as "all", filters nothing.
    ``open_ended``: a value the options lack is kept (a model with no job in this window yet);
    else (a job state) it is refused as :func:`url_select` refuses one."""
    return url_select(
        label,
        name,
        ["", *options],
        default="",
        format_func=lambda v: v or "all",
        where=where,
        keep_unknown=open_ended,
    )


def job_url(job_id: str) -> str:
    """The job page's URL for ``job_id`` (a link opens the same view)."""
    return f"/job?job={quote(job_id, safe='')}"


def url_select(
    label: str,
    name: str,
    options: Sequence[str],
    *,
    default: str,
    format_func: Callable[[str], str] = str,
    where: object = st,
    keep_unknown: bool = False,
) -> str:
    """A selectbox whose value lives in the URL's ``name`` parameter (left out at ``default``),
    so a copied link opens the same view and the value survives the page's refreshes. A value
    the options lack is kept as one more option with ``keep_unknown``; else the page says the
    link's value is none of the choices and shows the default."""
    opts = list(options)
    wanted = st.query_params.get(name, default)
    if wanted not in opts and wanted and wanted != default and not keep_unknown:
        st.warning(
            f"The link's {label.lower()} '{literal(wanted)}' is none of the choices: showing "
            f"{format_func(default)}."
        )
        wanted = default
    if wanted not in opts:
        opts = [*opts, wanted] if wanted and wanted != default else opts
        wanted = wanted if wanted in opts else default
    value: str = where.selectbox(  # type: ignore[attr-defined]
        label, opts, index=opts.index(wanted), format_func=format_func, key=f"url_{name}"
    )
    if value == default:
        st.query_params.pop(name, None)
    else:
        st.query_params[name] = value
    return value


def alert_line(a: dict[str, Any]) -> str:
    """One alert as Markdown: its rule, summary, component, scope and its jobs, each a link to
    the job's page (the Alerts page's lines, and the Fleet page's alerts firing now)."""
    notes, labels = a.get("annotations") or {}, a.get("labels") or {}
    # every word here is the fleet's (model and team names, a rules file's rule names): shown
    # as text, never as Markdown (a model "[x](http://evil)" was a working link)
    parts = [f"**{literal(a.get('rule') or a.get('name') or 'alert')}**"]
    summary = notes.get("summary") or a.get("summary")
    if summary:
        parts.append(literal(summary, 400))
    component = labels.get("component") or a.get("component")
    if component:
        parts.append(f"component {literal(component)}")
    scope = ", ".join(
        f"{literal(k)} {literal(v)}" for k, v in sorted(labels.items()) if k != "component"
    )
    if scope:
        parts.append(scope)
    jobs = a.get("jobs") or ([a["job_id"]] if a.get("job_id") else [])
    if jobs:
        parts.append("jobs: " + ", ".join(f"[{literal(j)}]({job_url(j)})" for j in jobs))
    return " · ".join(parts)
