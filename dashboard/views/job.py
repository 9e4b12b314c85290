"""Job: one job's figures, its timeline, start-up per rank, checkpoints and compiles, and inside
the loop its step time, throughput per rank and straggler rank; live."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd
import streamlit as st

from ett_collector.schemas import clock_skew_noted
from ett_dashboard import _format as fmt
from ett_dashboard import _loop, _page, charts
from ett_dashboard.client import ApiError, Client

T = TypeVar("T")
LIVE = ("running", "presumed_dead")
STATE_BADGE = {
    "running": "running",
    "presumed_dead": "presumed dead (no heartbeat)",
    "completed": "completed",
    "failed": "failed",
}

client = _page.client()
job_id = st.query_params.get("job") or st.query_params.get("job_id", "")  # job_id: older links
if not job_id:
    st.title("Job")
    st.info("No job chosen: open one from the Jobs page, or add `?job=<job id>` to the URL.")
    st.page_link("views/jobs.py", label="Go to the Jobs page")
    st.stop()


def _dt(values: Any) -> pd.Series:
    return pd.to_datetime(pd.Series(values, dtype="float64"), unit="s", utc=True)


def _figures(job: dict[str, Any]) -> None:
    m = st.columns(5)
    m[0].metric("ETT", fmt.pct(job["ett_pct"]))
    m[1].metric("Idle", fmt.pct(job["idle_pct"]))
    m[2].metric("Failure", fmt.pct(job["failure_pct"]))
    m[3].metric("Wall time", fmt.duration(job["wall_s"]))
    m[4].metric("Time to start (TTS)", fmt.duration(job["tts_s"]))
    m = st.columns(5)
    causes = ", ".join(f"{k} ×{v}" for k, v in sorted(job["failure_causes"].items()))
    m[0].metric("Failures", str(job["failures"]), help=causes or None)
    m[1].metric(
        "Checkpoint blocking",
        fmt.duration(job["checkpoint_blocking_s"]),
        help="the saves that paused training; a save after the loop's last progress (the "
        "final one) is the attempt's shutdown, charged to checkpoint in the lost time below",
    )
    m[2].metric(
        "Unsaved (redone) work",
        fmt.duration(job["unsaved_s"]),
        help="expected about failures × interval / 2 = "
        + fmt.duration(job.get("expected_unsaved_s")),
    )
    m[3].metric(
        "At risk now",
        fmt.duration(job.get("at_risk_s")),
        help="a live job's time since its last committed snapshot: not lost yet",
    )
    advice = job["checkpoint_advice"]
    needed = int(advice.get("min_failures", 0))
    if advice["optimal_interval_s"] is not None and job["failures"] < needed:
        optimum = f"not enough failures yet ({job['failures']} of {needed})"
    else:
        optimum = (
            f"{fmt.duration(advice['optimal_interval_s'])}; "
            f"a change would save {fmt.duration(advice['saving_s'])}"
        )
    m[4].metric(
        "Checkpoint interval",
        fmt.duration(advice["interval_s"]),
        help=f"in use; Young's optimum: {optimum}",
    )


def _timeline(segments: list[dict[str, Any]]) -> None:
    rows = []
    for s in segments:
        comps = s["components"] or ["productive" if s["category"] == "productive" else "other"]
        part = (s["end"] - s["start"]) / len(comps)
        for i, c in enumerate(comps):  # split a shared segment into side-by-side parts
            rows.append(
                {
                    "attempt": s["attempt"],
                    "category": s["category"],
                    "component": c,
                    "kind": s["kind"],
                    "start": s["start"] + i * part,
                    "end": s["start"] + (i + 1) * part,
                    "seconds": part,
                }
            )
    df = pd.DataFrame(rows)
    df["start"], df["end"] = _dt(df["start"]), _dt(df["end"])
    st.altair_chart(charts.timeline(df), width="stretch")
    st.caption(
        "One lane per category, coloured by the component charged. A segment shared by several "
        "components is drawn as side-by-side parts of equal length."
    )


def _wall(compiles: pd.DataFrame) -> float:
    """The wall seconds some rank was compiling: the union of the compiles' intervals (the ranks
    compile at once: their sum was eight times an 8-rank attempt's own wait)."""
    total, reach = 0.0, -float("inf")
    for start, end in sorted(zip(compiles["start"], compiles["end"], strict=True)):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _attempts(job: dict[str, Any], act: dict[str, list[dict[str, Any]]]) -> None:
    ttr = list(job["ttr_s"])
    compiles = pd.DataFrame(act["compiles"])
    rows = []
    for a in job["attempts"]:
        comp = compiles[compiles["attempt"] == a["attempt"]] if not compiles.empty else compiles
        rows.append(
            {
                "attempt": a["attempt"],
                "ranks": len(a["ranks"]),
                "allocated": fmt.instant(a["alloc"]),
                "start-up": fmt.duration(
                    None if a["first_batch"] is None else a["first_batch"] - a["alloc"]
                ),
                "end reason": a["end_reason"] or ("failed" if a["failed"] else "running"),
                "failure cause": a["failure_cause"] or "",
                "TTR": fmt.duration(ttr.pop(0)) if a["failed"] and ttr else "",
                "critical rank": a["critical_rank"],
                "compile": fmt.duration(_wall(comp)) if not comp.empty else "",
                "compile cache": ", ".join(sorted({str(c) for c in comp["cache"].dropna()}))
                if not comp.empty
                else "",
            }
        )
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _startup(job: dict[str, Any], act: dict[str, list[dict[str, Any]]]) -> None:
    phases = pd.DataFrame(act["startup"])
    firsts = pd.DataFrame(act["first_batches"])
    if phases.empty:
        st.caption("No start-up phase spans arrived for this job.")
        return
    for a in job["attempts"]:
        # a fresh 0..n-1 index: the times below are assigned back by position (an attempt's
        # rows further down the API's list kept their old index: NaT, an empty chart)
        ph = phases[phases["attempt"] == a["attempt"]].reset_index(drop=True)
        comp = pd.DataFrame(act["compiles"])
        if not comp.empty:  # compiles before the first batch are start-up work too
            comp = comp[(comp["attempt"] == a["attempt"]) & comp["in_startup"]]
            comp = comp.assign(
                phase="compile (cache " + comp["cache"].fillna("?") + ")", component="compile"
            )
            ph = pd.concat(
                [ph, comp[["attempt", "rank", "phase", "component", "start", "end"]]],
                ignore_index=True,
            )
        if ph.empty:
            continue
        crit = a["critical_rank"]
        ph["seconds"] = ph["end"] - ph["start"]
        ph["rank_label"] = [f"rank {r}" + (" (critical)" if r == crit else "") for r in ph["rank"]]
        ph["start"], ph["end"] = _dt(ph["start"].to_numpy()), _dt(ph["end"].to_numpy())
        fb = (
            firsts[firsts["attempt"] == a["attempt"]].reset_index(drop=True)
            if not firsts.empty
            else firsts
        )
        if not fb.empty:
            fb["rank_label"] = [
                f"rank {r}" + (" (critical)" if r == crit else "") for r in fb["rank"]
            ]
            fb["at"] = _dt(fb["at"].to_numpy())
        title = f"Attempt {a['attempt']}: start-up phases per rank (black tick: first batch)"
        st.altair_chart(charts.startup_gantt(ph, fb, title), width="stretch")
        if not fb.empty and len(fb) > 1:
            spread = (fb["at"].max() - fb["at"].min()).total_seconds()
            st.caption(
                f"The critical rank (the last to reach its first batch) is rank {crit}; "
                f"first batches spread over {spread:.2f} s across {len(fb)} ranks."
            )


def _checkpoints(act: dict[str, list[dict[str, Any]]]) -> None:
    ck = pd.DataFrame(act["checkpoints"])
    if ck.empty:
        st.caption("No checkpoint saves in this job.")
        return
    ck["label"] = [f"a{a} step {s}" for a, s in zip(ck["attempt"], ck["step"], strict=True)]
    parts = pd.concat(
        [
            pd.DataFrame({"label": ck["label"], "part": "blocking", "seconds": ck["blocking_s"]}),
            pd.DataFrame(
                {"label": ck["label"], "part": "persist", "seconds": ck["persist_s"].fillna(0.0)}
            ),
        ]
    )
    # the chart above its table, each the page's full width: beside the chart, the table's
    # "committed" column was cut off at 1400 px
    st.altair_chart(charts.checkpoint_bars(parts), width="stretch")
    restores = {(r["attempt"], r["step"]) for r in act["restores"]}
    table = pd.DataFrame(
        {
            "attempt": ck["attempt"],
            "step": ck["step"],
            "mode": ck["mode"],
            "blocking": [fmt.duration(v) for v in ck["blocking_s"]],
            "persist": [fmt.duration(v) if pd.notna(v) else "" for v in ck["persist_s"]],
            "committed": [
                fmt.instant(v) if pd.notna(v) else "not committed" for v in ck["committed_at"]
            ],
            "restored by next attempt": [
                "yes" if any(ra == a + 1 and rs == s for ra, rs in restores) else ""
                for a, s in zip(ck["attempt"], ck["step"], strict=True)
            ],
        }
    )
    st.dataframe(table, hide_index=True, width="stretch")


# the activity of a job whose activity could not be read: the sections that need only a part of
# it (Attempts) still show the rest (a comment: a bare string here, Streamlit's "magic" prints)
NO_ACTIVITY: dict[str, list[dict[str, Any]]] = {
    "startup": [],
    "first_batches": [],
    "checkpoints": [],
    "restores": [],
    "compiles": [],
    "failures": [],
}
GONE = "Not kept: retention pruned this job's raw spans (see above)."


def _read(read: Callable[[str], T], job_id: str) -> T | None:
    """``read(job_id)``, or None after a plain message on the page when the collector refused."""
    try:
        return read(job_id)
    except ApiError as exc:
        _page.show_error(exc)
        return None


def _pruned_note(act: dict[str, Any]) -> str:
    """The one line that says which detail retention took (its date when the collector knows)."""
    at = act.get("spans_pruned_at")
    when = f" on {fmt.instant(at)}" if at is not None else ""
    return (
        f"Raw spans pruned{when} (retention, `ETT_RETAIN_SPANS`): start-up per rank, "
        "checkpoint detail and compile times are not available; the rest is kept."
    )


@st.fragment(run_every=_page.settings().refresh_s)
def job_view(job_id: str, c: Client) -> None:
    try:
        job = c.job(job_id)
    except ApiError as exc:
        if exc.status == 404:
            st.title("Job")
            shown = _page.literal(job_id)
            st.error(f"No job '{shown}' at the collector. Pick one on the Jobs page.")
            st.page_link("views/jobs.py", label="Go to the Jobs page")
        else:
            _page.show_error(exc)
        return
    st.title(f"Job {_page.literal(job['job_id'], 200)}")
    st.markdown(
        f"**{STATE_BADGE.get(job['state'], job['state'])}** · model "
        f"**{_page.literal(job.get('model') or '—')}** · team "
        f"**{_page.literal(job.get('team') or '—')}** · started {fmt.instant(job['alloc'])}"
        + (" · updates live" if job["state"] in LIVE else "")
    )
    lost_spans = job.get("telemetry_lost_spans") or 0
    if lost_spans:
        st.warning(
            f"Incomplete telemetry: this job's emitters lost {lost_spans:,} span(s) (exporter "
            "queue or spool full, or refused for good). The figures miss what those spans said: "
            "a lost checkpoint save reads as training, lost windows at an attempt's end as its "
            "shutdown.",
            icon="⚠️",
        )
    skew = job.get("clock_skew_s")
    if clock_skew_noted(skew):
        st.warning(
            f"Clocks disagree: this job's ranks put one barrier's end {fmt.duration(skew)} apart "
            "(every rank leaves a barrier at one instant). Time moves between start-up, training "
            "and checkpoint blocking by up to that much: synchronize the hosts' clocks (NTP).",
            icon="⚠️",
        )
    _figures(job)
    # read after the headline figures are on the page; each section shows what it can, so a
    # failed read (or detail retention pruned) costs its own sections, never the rest
    segments = _read(c.segments, job_id)
    act = _read(c.activity, job_id)
    pruned = bool(act and act.get("spans_pruned"))
    if act and pruned:
        st.info(_pruned_note(act))
    st.subheader("Timeline")
    if segments:
        _timeline(segments)
    elif segments is not None:
        st.caption("No segments stored for this job yet.")
    st.subheader("Attempts")
    _attempts(job, act or NO_ACTIVITY)
    st.subheader("Start-up per rank")
    if pruned:
        st.caption(GONE)
    elif act is not None:
        _startup(job, act)
    st.subheader("Checkpoints")
    if pruned:
        st.caption(GONE + " The headline figures above keep its blocking time.")
    elif act is not None:
        _checkpoints(act)
    st.subheader("Inside the loop")
    _loop.job_section(c, job_id)
    lost = job["lost_by_component"]
    if lost:
        st.subheader("Lost time by component")
        df = pd.DataFrame({"component": list(lost), "seconds": list(lost.values())})
        st.dataframe(
            df.sort_values("seconds", ascending=False)
            .assign(
                share=lambda d: [fmt.pct(100 * v / job["wall_s"]) for v in d["seconds"]],
                seconds=lambda d: [fmt.duration(v) for v in d["seconds"]],
            )
            .rename(columns={"seconds": "lost"}),  # in s, min or h: the unit is in each cell
            hide_index=True,
        )
    with st.expander("Every figure of the job API (JSON)"):
        st.json(job)


job_view(job_id, client)
