"""The tables of a device run, from the ``*-check.json`` files ``scripts/device_run.sh`` writes.

    python scripts/device_summary.py RESULTS_DIR

Prints Markdown: the start-up sweep (pg_init fastest-slowest rank, TTS, critical rank), the fault
runs (the collector's figures, the step logs' in brackets), checkpoint blocking per mode and
rank count, and the straggler run. A check that failed is listed under the tables.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _load(results: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(results.glob("*-check.json")):
        try:
            out[path.name.removesuffix("-check.json")] = json.loads(path.read_text())
        except ValueError:
            out[path.name.removesuffix("-check.json")] = {"error": "unreadable check"}
    return out


def _s(value: Any, digits: int = 2) -> str:
    if isinstance(value, list):
        value = value[0] if value else None
    return "-" if value is None else f"{float(value):.{digits}f}"


def _ranks(job: str) -> int:
    return int(job.rsplit("-", 1)[1])


def _spread(per_rank: list[float] | None) -> str:
    return f"{min(per_rank):.2f}–{max(per_rank):.2f}" if per_rank else "-"


def startup_table(checks: dict[str, dict[str, Any]]) -> list[str]:
    """One row per rank count of the start-up sweep."""
    rows = [
        "| ranks | pg_init (fastest–slowest rank) | TTS | critical rank (log) |",
        "| --- | --- | --- | --- |",
    ]
    for job in sorted((j for j in checks if j.startswith("startup-")), key=_ranks):
        c = checks[job]
        phases = c.get("startup_phases_attempt0_per_rank") or {}
        crit = (c.get("checks") or {}).get("critical_rank_0") or {}
        rows.append(
            f"| {_ranks(job)} | {_spread(phases.get('pg_init'))} s | {_s(c.get('tts_s'))} s "
            f"| {crit.get('collector', '-')} ({crit.get('log', '-')}) |"
        )
    return rows


def fault_table(checks: dict[str, dict[str, Any]]) -> list[str]:
    """One row per fault run: the collector's figures and (in brackets) the step logs'."""
    rows = [
        "| fault | ranks | wall | ETT / idle / failure | TTS | TTR (log) | cause | "
        "unsaved (log) | blocking (log) | pg_init, slowest rank | resumed from |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for job in (j for j in checks if j.startswith("fault-")):
        c = checks[job]
        pct = " / ".join(_s(c.get(k), 1) for k in ("ett_pct", "idle_pct", "failure_pct"))
        causes = ", ".join(c.get("failure_causes") or []) or "-"
        pg = (c.get("startup_phases_attempt0_per_rank") or {}).get("pg_init")
        rows.append(
            f"| {job.split('-')[1]} | {_ranks(job)} | {_s(c.get('wall_s'), 1)} s | {pct} % "
            f"| {_s(c.get('tts_s'), 1)} s | {_s(c.get('ttr_s'))} s ({_s(c.get('log_ttr_s'))}) "
            f"| {causes} | {_s(c.get('unsaved_s'))} s ({_s(c.get('log_unsaved_s'))}) "
            f"| {_s(c.get('checkpoint_blocking_s'))} s ({_s(c.get('log_checkpoint_blocking_s'))}) "
            f"| {_s(max(pg) if pg else None)} s | {c.get('resumed_from', '-')} |"
        )
    return rows


def checkpoint_table(checks: dict[str, dict[str, Any]]) -> list[str]:
    """Checkpoint blocking per mode (rows) and rank count (columns)."""
    jobs = [j for j in checks if j.startswith("ckpt-")]
    counts = sorted({_ranks(j) for j in jobs})
    rows = [
        "| mode | " + " | ".join(f"{n} ranks: blocking (log)" for n in counts) + " |",
        "| --- |" + " --- |" * len(counts),
    ]
    for mode in ("sync", "async", "async-staged"):
        cells = []
        for n in counts:
            c = checks.get(f"ckpt-{mode}-{n}")
            cells.append(
                "-"
                if c is None
                else f"{_s(c.get('checkpoint_blocking_s'))} s "
                f"({_s(c.get('log_checkpoint_blocking_s'))})"
            )
        if any(cell != "-" for cell in cells):
            rows.append(f"| {mode} | " + " | ".join(cells) + " |")
    return rows if counts else []


def straggler_table(checks: dict[str, dict[str, Any]]) -> list[str]:
    """The slowed-rank run: whom the collector names, its score, the planted factor."""
    rows = [
        "| ranks | slowed rank | named (score) | planted factor (log) | step s per rank (log) "
        "| ideal step |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for job in (j for j in checks if j.startswith("straggler-")):
        k = checks[job].get("checks") or {}
        named = k.get("straggler") or {}
        steps = k.get("log_step_s_per_rank") or {}
        rows.append(
            f"| {_ranks(job)} | {k.get('slow_rank', '-')} "
            f"| {named.get('rank', 'none')} ({_s(named.get('score'))}) "
            f"| {_s(k.get('log_planted_factor'))} "
            f"| {_spread(list(steps.values()))} | {_s(k.get('ideal_step_s'), 4)} s |"
        )
    return rows if len(rows) > 2 else []


def failed_checks(checks: dict[str, dict[str, Any]]) -> list[str]:
    """``job: check`` for every boolean check that is false, and every error."""
    out = []
    for job, c in checks.items():
        if "error" in c:
            out.append(f"- {job}: {c['error']}")
        for name, value in (c.get("checks") or {}).items():
            if value is False or name.endswith("_error"):
                out.append(f"- {job}: {name} = {value}")
    return out


def main() -> int:
    checks = _load(Path(sys.argv[1]))
    for title, table in (
        ("Start-up as ranks grow", startup_table(checks)),
        ("Fault runs", fault_table(checks)),
        ("Checkpoint blocking per mode", checkpoint_table(checks)),
        ("Straggler", straggler_table(checks)),
    ):
        if len(table) > 2:
            print(f"### {title}\n\n" + "\n".join(table) + "\n")
    failed = failed_checks(checks)
    print("### Failed checks\n\n" + ("\n".join(failed) if failed else "none") + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
