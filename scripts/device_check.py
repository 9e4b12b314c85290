"""Compare the collector's figures for one job with the ranks' own step logs (device runs).

    python scripts/device_check.py REPORT.json STEPLOG_DIR [--window-s 2]
        [--performance PERFORMANCE.json --slow-rank R]

Prints one JSON object: the collector's figures beside the step logs' account, and the checks
the issue asks for (first batch and TTR instants, unsaved within one window, checkpoint blocking
within 10 %, each attempt's critical rank: the rank whose first batch came last). With
``--performance`` (``GET /api/v1/jobs/{id}/performance`` of a run with ``--slow-rank R``): the
straggler named is ``R``, its score within 10 % of the planted slowdown, and the ranks' step
times equal (within 5 %). Exit status 0 always: the figures are the result, a failed check is
reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def events(steplog_dir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(steplog_dir.glob("rank*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def of(rows: list[dict[str, Any]], event: str, attempt: int) -> list[dict[str, Any]]:
    return [r for r in rows if r["event"] == event and r["attempt"] == attempt]


def blocking_from_log(rows: list[dict[str, Any]]) -> float:
    """Per (attempt, step): the interval from the earliest start to the latest end of the
    ranks' saves (ETT-SPEC: the ranks save together, a rank that saved first waits for the
    others), cut at the attempt's end of training (its last step over ranks): a save after that
    (the final checkpoint) is the shutdown's, not ``checkpoint_blocking``; one that a rank began
    while a peer still stepped counts up to that peer's last step."""
    trained: dict[int, float] = {}
    for r in rows:
        if r["event"] == "step":
            trained[r["attempt"]] = max(trained.get(r["attempt"], 0.0), r["time"])
    per: dict[tuple[int, int], tuple[float, float]] = {}
    for r in rows:
        if r["event"] != "ckpt_save":
            continue
        start, end = r["time"] - float(r["blocking_s"]), r["time"]
        lo, hi = per.get((r["attempt"], r["step"]), (start, end))
        per[(r["attempt"], r["step"])] = (min(lo, start), max(hi, end))
    return sum(
        max(0.0, min(hi, trained.get(attempt, 0.0)) - lo) for (attempt, _), (lo, hi) in per.items()
    )


def union_length(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of ``[lo, hi]`` covered by at least one of ``intervals``."""
    total, reach = 0.0, lo
    for start, end in sorted(intervals):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            total += end - start
            reach = end
    return total


def check(report: dict[str, Any], rows: list[dict[str, Any]], window_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "wall_s": report.get("wall_s"),
        "ett_pct": report.get("ett_pct"),
        "idle_pct": report.get("idle_pct"),
        "failure_pct": report.get("failure_pct"),
        "tts_s": report.get("tts_s"),
        "ttr_s": report.get("ttr_s"),
        "failures": report.get("failures"),
        "failure_causes": report.get("failure_causes"),
        "unsaved_s": report.get("unsaved_s"),
        "checkpoint_blocking_s": report.get("checkpoint_blocking_s"),
    }
    attempts = report.get("attempts") or []
    checks: dict[str, Any] = {}
    fb0 = [r["time"] for r in of(rows, "first_batch", 0)]
    if attempts and fb0 and attempts[0].get("first_batch"):
        checks["first_batch_0_diff_s"] = round(attempts[0]["first_batch"] - max(fb0), 3)
        starts = [r["time"] for r in of(rows, "start", 0)]
        out["log_start_to_first_batch_s"] = round(max(fb0) - min(starts), 3)
    phases: dict[str, list[float]] = {}
    for r in rows:
        if r["event"] == "phase" and r["attempt"] == 0:
            phases.setdefault(r["phase"], []).append(round(float(r["duration_s"]), 3))
    out["startup_phases_attempt0_per_rank"] = phases
    teardown = [
        {"attempt": r["attempt"], "rank": r["rank"], "phase": r["phase"], "s": r["duration_s"]}
        for r in rows
        if r["event"] == "teardown"
    ]
    out["teardown"] = teardown
    out["failure_events"] = [
        {k: r.get(k) for k in ("rank", "attempt", "step", "cause", "error_type", "peer_loss")}
        for r in rows
        if r["event"] == "failure"
    ]
    fb1 = [r["time"] for r in of(rows, "first_batch", 1)]
    if len(attempts) > 1 and fb1:
        end0 = max(r["time"] for r in rows if r["attempt"] == 0)
        log_ttr = max(fb1) - end0
        out["log_ttr_s"] = round(log_ttr, 3)
        ttr = (report.get("ttr_s") or [None])[0]
        if ttr is not None:
            checks["ttr_diff_s"] = round(ttr - log_ttr, 3)
            checks["ttr_within_window"] = abs(ttr - log_ttr) <= window_s
        resumed = [r["step"] for r in of(rows, "resume", 1)]
        if resumed:
            snap = [
                r["time"] - r["blocking_s"]
                for r in of(rows, "ckpt_save", 0)
                if r["step"] == resumed[0]
            ]
            last_step = max(r["time"] for r in of(rows, "step", 0))
            # cut out of the lost time (docs/metrics.md): the restored
            # save's own blocking and any later save's, and the waits for a batch (data
            # stalls) outside them: the union over ranks of those intervals after the snapshot
            saves = [
                (r["time"] - r["blocking_s"], r["time"])
                for r in of(rows, "ckpt_save", 0)
                if r["step"] >= resumed[0]
            ]
            stalls = [(r["time"] - r["duration_s"], r["time"]) for r in of(rows, "data_wait", 0)]
            if snap:
                blocked = union_length(saves + stalls, min(snap), last_step)
                log_unsaved = last_step - min(snap) - blocked
                out["resumed_from"] = resumed[0]
                out["log_unsaved_s"] = round(log_unsaved, 3)
                if report.get("unsaved_s") is not None:
                    diff = report["unsaved_s"] - log_unsaved
                    checks["unsaved_diff_s"] = round(diff, 3)
                    checks["unsaved_within_window"] = abs(diff) <= window_s
    log_blocking = blocking_from_log(rows)
    out["log_checkpoint_blocking_s"] = round(log_blocking, 3)
    if log_blocking > 0 and report.get("checkpoint_blocking_s") is not None:
        ratio = report["checkpoint_blocking_s"] / log_blocking
        checks["blocking_ratio"] = round(ratio, 3)
        checks["blocking_within_10pct"] = abs(ratio - 1) <= 0.10
    out["checks"] = checks
    return out


def critical_checks(report: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per attempt: the collector's critical rank beside the step logs' (the rank whose first
    batch came last). Ranks whose first batches lie within 10 ms of the last are a tie: any of
    them agrees."""
    out: dict[str, Any] = {}
    for a in report.get("attempts") or []:
        fb = {r["rank"]: r["time"] for r in of(rows, "first_batch", a["attempt"])}
        if not fb or a.get("critical_rank") is None:
            continue
        last = max(fb.values())
        tied = sorted(rank for rank, t in fb.items() if last - t <= 0.010)
        out[f"critical_rank_{a['attempt']}"] = {"collector": a["critical_rank"], "log": tied}
        out[f"critical_rank_{a['attempt']}_ok"] = a["critical_rank"] in tied
    return out


WARMUP_STEPS = 10
"""Steps left out at the start of an attempt (start-up, the first window)."""


def rank_steps(rows: list[dict[str, Any]]) -> dict[int, tuple[list[float], list[float]]]:
    """Per rank, attempt 0's steps after :data:`WARMUP_STEPS`: each step's time (from the
    previous step's end) and its own compute time: that less its wait for the batch and its
    wait for the gradients, read as its ``backward_s`` less the shortest ``backward_s`` of that
    step over ranks (the same backward work on every rank; the slowest rank waits least)."""
    stalled = {(r["rank"], r["step"]): float(r["duration_s"]) for r in of(rows, "data_wait", 0)}
    fastest: dict[int, float] = {}  # per step, the shortest backward over ranks: no wait in it
    for r in of(rows, "step", 0):
        if "backward_s" in r:
            fastest[r["step"]] = min(fastest.get(r["step"], r["backward_s"]), r["backward_s"])
    out: dict[int, tuple[list[float], list[float]]] = {}
    for rank in sorted({r["rank"] for r in rows}):
        steps = sorted(
            (r for r in of(rows, "step", 0) if r["rank"] == rank), key=lambda r: r["step"]
        )
        dts, compute = [], []
        for prev, row in zip(steps[WARMUP_STEPS - 1 :], steps[WARMUP_STEPS:], strict=False):
            if "backward_s" not in row:
                continue
            dts.append(row["time"] - prev["time"])
            waited = row["backward_s"] - fastest[row["step"]] + stalled.get((rank, row["step"]), 0)
            compute.append(row["time"] - prev["time"] - waited)
        out[rank] = (dts, compute)
    return out


def straggler_checks(perf: dict[str, Any], rows: list[dict[str, Any]], slow: int) -> dict[str, Any]:
    """The straggler the collector names against the slowdown planted on rank ``slow``: the
    planted factor is the slowed rank's median compute time per step over the median of the
    other ranks' medians (the step logs' account)."""
    per = {r: v for r, v in rank_steps(rows).items() if v[0]}
    if slow not in per or len(per) < 2:
        return {"straggler_error": f"no steady timed steps of rank {slow} and a peer"}
    step_med = {r: statistics.median(v[0]) for r, v in per.items()}
    comp_med = {r: statistics.median(v[1]) for r, v in per.items()}
    others = statistics.median([c for r, c in comp_med.items() if r != slow])
    planted = comp_med[slow] / others
    named = perf.get("straggler") or {}
    out: dict[str, Any] = {
        "slow_rank": slow,
        "log_step_s_per_rank": {r: round(v, 4) for r, v in step_med.items()},
        "log_compute_s_per_rank": {r: round(v, 4) for r, v in comp_med.items()},
        "log_planted_factor": round(planted, 3),
        "straggler": named or None,
        "ideal_step_s": perf.get("ideal_step_s"),
        "step_times_equal": max(step_med.values()) / min(step_med.values()) - 1 <= 0.05,
        "straggler_rank_ok": named.get("rank") == slow,
    }
    if named.get("score") is not None:
        out["straggler_score_ratio"] = round(named["score"] / planted, 3)
        out["straggler_score_within_10pct"] = abs(named["score"] / planted - 1) <= 0.10
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path)
    p.add_argument("steplog_dir", type=Path)
    p.add_argument("--window-s", type=float, default=2.0)
    p.add_argument("--performance", type=Path, help="the job's performance JSON")
    p.add_argument("--slow-rank", type=int, default=-1, help="the rank slowed on purpose")
    a = p.parse_args()
    try:
        report = json.loads(a.report.read_text())
        perf = json.loads(a.performance.read_text()) if a.performance else None
    except (OSError, ValueError) as exc:
        print(json.dumps({"error": f"no report: {exc}"}))
        return 0
    rows = events(a.steplog_dir)
    out = check(report, rows, a.window_s)
    out["checks"].update(critical_checks(report, rows))
    if perf is not None and a.slow_rank >= 0:
        out["checks"].update(straggler_checks(perf, rows, a.slow_rank))
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
