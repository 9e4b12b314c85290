"""The pages' "inside the loop" sections (``docs/metrics.md``, "Inside the loop"): a job's step
time, slow time, throughput per rank and straggler rank (Job page), and the models ranked by slow
time (Fleet page). Read only through the client; charts from :mod:`.loop_charts`."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from ett_collector.schemas import NO_LABEL, loop_coverage

from . import _format as fmt
from . import loop_charts
from .client import ApiError, Client

BUCKETS = 60
"""Buckets of a job's throughput series (the answer's size, whatever the job's length)."""


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{1000.0 * seconds:,.1f} ms"


def _dt(values: Any) -> pd.Series:
    return pd.to_datetime(pd.Series(values, dtype="float64"), unit="s", utc=True)


def _read(call: Any, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
    """The answer, or None after a plain message (a collector without the view: a caption)."""
    try:
        out: dict[str, Any] = call(*args, **kwargs)
    except ApiError as exc:
        if exc.status == 404:
            st.caption("No performance figures here (the collector predates them, or no job).")
        else:
            st.error(exc.message)
        return None
    return out


def straggler_text(perf: dict[str, Any]) -> tuple[str, str]:
    """The straggler metric's value (the rank, or why none) and the sentence that explains it
    (with ``straggler_note``, why an attempt's ranks were not compared, after it)."""
    value, sentence = _straggler_text(perf)
    note = perf.get("straggler_note")
    if not note:
        return value, sentence
    if perf.get("straggler") is None and not perf.get("stragglers"):
        return "not named", f"No straggler named: {note}."
    return value, f"{sentence} {note[0].upper()}{note[1:]}."


def _straggler_text(perf: dict[str, Any]) -> tuple[str, str]:
    s = perf.get("straggler")
    timed = [x for x in perf.get("stragglers", []) if x.get("ranks_timed", 0) >= 2]
    if s is None:
        if not timed:
            return "not measured", (
                "No straggler score: it needs two or more ranks whose windows carry their wait "
                "for the gradient collectives (ett.window.wait_s; DDP models under "
                "ett-instrument, or ett.torch_hooks.time_ddp_waits)."
            )
        top = max((t["score"] for t in timed), default=0.0)
        return "none", (
            f"No rank computes {perf['straggler_threshold']:.2f}× the others' median per step "
            f"(highest score {top:.2f}×)."
        )
    return f"rank {s['rank']}", (
        f"Rank {s['rank']} (attempt {s['attempt']}) computes {s['score']:.2f}× the other ranks' "
        f"median per step ({_ms(s['compute_s_per_step'])} vs "
        f"{_ms(s['others_compute_s_per_step'])}), at or above {perf['straggler_threshold']:.2f}× "
        f"in {s['windows_above']} of its {s['windows_timed']} timed windows; the other ranks "
        f"spent {100.0 * s['others_wait_share']:.0f} % of their step time waiting for it."
    )


STALLS = "checkpoint save, eval, compile, publish or data wait"
"""The spans whose seconds the loop figures take out of a window (``STALL_SPANS``)."""


def ideal_help(perf: dict[str, Any]) -> str:
    """What the ideal step time is the median of, as its ``ideal_basis`` says."""
    n, basis = perf.get("ideal_points", 0), perf.get("ideal_basis")
    out = "the median step time, each window's seconds under a " + STALLS + " taken out, of "
    if basis == "steady":
        out += (
            f"the job's {n} steady windows: warm-up and windows more than 5 % under such a "
            "span left out"
        )
    elif basis == "after_warmup":
        out += (
            f"the job's {n} windows after warm-up: more than 5 % of every one was under such a "
            "span (a loader that stalls every few batches does that), so none was steady"
        )
    else:
        out += f"the job's {n} windows, warm-up included: none came after warm-up"
    if perf.get("step_counts_differ"):
        out += "; where an attempt's ranks count different steps, of the rank counting fewest"
    return out


def _metrics(perf: dict[str, Any]) -> None:
    steps, loop_s = perf.get("steps") or 0, perf.get("loop_s") or 0.0
    m = st.columns(6)
    m[0].metric("Ideal step time", _ms(perf["ideal_step_s"]), help=ideal_help(perf))
    m[1].metric("Mean step time", _ms(loop_s / steps if steps else None))
    m[2].metric(
        "Slow time",
        fmt.duration(perf["slow_s"]),
        help="per window after warm-up, the seconds its steps took beyond the ideal step, "
        "from the window's mean step (a step slower than the rest inside a window is averaged "
        "in); stalls ETT already charges as idle left out: what the loop could win",
    )
    m[3].metric(
        "Slow share",
        fmt.pct(perf["slow_pct"]),
        help="slow time / stepping time: the same windows' seconds, stalls left out",
    )
    m[4].metric(
        "Samples/s",
        fmt.rate(perf.get("samples_per_s"), unit=""),
        help="samples per second of all ranks together over the loop's seconds (the chart "
        "beside it is per rank)",
    )
    value, sentence = straggler_text(perf)
    s = perf.get("straggler")
    m[5].metric(
        "Straggler rank",
        value,
        delta=None if s is None else f"score {s['score']:.2f}×",
        delta_color="off",
        help="its compute time per step over the other ranks' median (named at "
        f"{perf['straggler_threshold']:.2f}× or more)",
    )
    st.caption(sentence)
    share = loop_coverage(perf.get("loop_s"), perf.get("productive_s"))
    if share is not None:
        st.warning(
            f"Partial loop figures: they read windows over {fmt.pct(100 * share)} of the job's "
            "productive time. Its other windows carry no step counts, or were folded before "
            "migration 0008, which kept no step series.",
            icon="⚠️",
        )


def _series_frames(series: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(per-rank rows, band rows, step-time rows) of the series' buckets that have data; each
    row's ``segment`` counts the empty buckets before it (the job was down, or between
    attempts), so that the charts' lines break there instead of crossing the gap."""
    ranks, band, steps = [], [], []
    segment, empty = 0, False
    for b in series:
        filled = bool(b.get("ranks") or b.get("rank_samples_per_s") or b.get("step_s") is not None)
        if not filled:
            empty = True
            continue
        if empty:
            segment, empty = segment + 1, False
        at = {"t": b["start"], "segment": segment}
        for r, v in sorted((b.get("ranks") or {}).items(), key=lambda kv: int(kv[0])):
            ranks.append({**at, "rank": f"rank {r}", "samples_per_s": v})
        if b.get("rank_samples_per_s"):
            band.append({**at, **b["rank_samples_per_s"]})
        if b.get("step_s") is not None:
            steps.append({**at, "step_ms": 1000.0 * b["step_s"]})
    frames = [pd.DataFrame(x) for x in (ranks, band, steps)]
    for df in frames:
        if not df.empty:
            df["t"] = _dt(df["t"].to_numpy())
    return frames[0], frames[1], frames[2]


def _slow_windows(perf: dict[str, Any]) -> None:
    rows = perf.get("slow_windows") or []
    if not rows and not perf.get("ideal_step_s"):
        st.caption("No ideal step time, so no window is judged slow.")
        return
    if not rows:
        st.caption(
            "No slow window: every window's mean step ran within 1.25× the ideal step. A window "
            "averages its steps: a few slow steps inside it raise its mean, not a row here."
        )
        return
    table = pd.DataFrame(
        {
            "from": [fmt.instant(r["start"]) for r in rows],
            "attempt": [r["attempt"] for r in rows],
            "rank": [r["rank"] for r in rows],
            "step": [_ms(r["step_s"]) for r in rows],
            "× ideal": [f"{r['ratio']:.2f}" for r in rows],
            "lost": [fmt.duration(r["lost_s"]) for r in rows],
            "overlapping": [", ".join(r.get("overlaps") or []) for r in rows],
        }
    )
    st.markdown("**Slow windows** (most time lost first) and the spans that overlap them")
    st.dataframe(table, hide_index=True, width="stretch")


def job_section(c: Client, job_id: str) -> None:
    """The Job page's "Inside the loop" section."""
    perf = _read(c.performance, job_id, BUCKETS)
    if perf is None:
        return
    if not perf.get("points"):
        st.caption("No training window arrived for this job yet: nothing to say inside the loop.")
        return
    _metrics(perf)
    ranks, band, steps = _series_frames(perf.get("series") or [])
    left, right = st.columns(2)
    if not band.empty:
        left.altair_chart(loop_charts.throughput(ranks, band), width="stretch")
    if not steps.empty:
        right.altair_chart(loop_charts.step_time(steps, perf["ideal_step_s"]), width="stretch")
    many = ranks.empty and not band.empty
    st.caption(
        f"{BUCKETS} buckets over the job's training windows"
        + ("; a band from the slowest to the fastest rank (line: the median rank)" if many else "")
        + ". Step time: the median rank's seconds per step in each bucket."
    )
    _slow_windows(perf)


def fleet_section(c: Client, since: str, model: str, team: str) -> None:
    """The Fleet page's models ranked by slow time."""
    data = _read(c.model_performance, since=since, model=model or None, team=team or None)
    if data is None:
        return
    rows = data["models"]
    if not rows:
        st.caption("No job with training windows in this window.")
        return
    df = pd.DataFrame(rows)
    df["model"] = df["model"].fillna(NO_LABEL)
    df["slow_h"] = df["slow_s"] / 3600.0
    # the chart above its table, each the page's full width (beside it, columns were cut off)
    st.altair_chart(loop_charts.slow_by_model(df), width="stretch")
    st.dataframe(
        pd.DataFrame(
            {
                "model": df["model"],
                "slow time": [fmt.duration(v) for v in df["slow_s"]],
                "% of stepping": [fmt.pct(v) if pd.notna(v) else "—" for v in df["slow_pct"]],
                "samples/s per rank": df["samples_per_s_per_rank"],
                "ideal step": [_ms(v) if pd.notna(v) else "—" for v in df["ideal_step_s"]],
                "jobs": df["jobs"],
                "straggler jobs": df["straggler_jobs"],
            }
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "samples/s per rank": st.column_config.NumberColumn(format="%.1f"),
        },
    )
    st.caption(
        "Slow time: the seconds each job's windows took beyond its own ideal step time (the "
        "median step of its steady windows), window by window from their mean steps, summed over "
        "the window's jobs per model; % of stepping: of the seconds the same windows stepped."
        + (f" Only the newest {data['jobs_read']} jobs were read." if data["truncated"] else "")
    )
