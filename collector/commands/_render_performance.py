"""The performance section of ``ett report`` (issue 26): inside the loop, beside ETT."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..schemas import loop_coverage
from ._render import duration, fine


def step_time(seconds: Any) -> str:
    """A step time: ``25.7 ms`` under a second (a tenth of a millisecond tells steps apart),
    else :func:`duration` (``1m 36s``, not ``96011.0 ms``)."""
    if seconds is None:
        return "-"
    if abs(float(seconds)) < 1.0:
        return f"{1000 * float(seconds):.1f} ms"
    return duration(float(seconds))


_BASIS = {
    "steady": ("steady window", "steady windows"),
    "after_warmup": ("window after warm-up", "windows after warm-up"),
    "all": ("window, warm-up included", "windows, warm-up included"),
}
"""What the ideal step time is the median of (``ideal_basis``), one and several."""


def _basis(perf: dict[str, Any]) -> str:
    """``median of 12 steady windows``; ``median of 1 window, warm-up included``."""
    n = perf["ideal_points"]
    one, many = _BASIS.get(perf["ideal_basis"], (perf["ideal_basis"],) * 2)
    return f"median of {n} {one if n == 1 else many}"


def _straggler(perf: dict[str, Any]) -> str:
    named = perf.get("straggler")
    scores = perf.get("stragglers") or []
    if not named and not scores and perf.get("straggler_note"):
        return "not named: the ranks count different steps (see step counts)"
    if named:
        return (
            f"rank {named['rank']} (attempt {named['attempt']}): computes {named['score']:.2f}x "
            f"the other ranks' median per step; they waited {100 * named['others_wait_share']:.0f}"
            f"% of each step; {named['windows_above']} of {named['windows_timed']} windows above "
            f"{perf['straggler_threshold']:g}x"
        )
    if scores:
        top = max(scores, key=lambda s: s["score"])
        return (
            f"none (highest rank score {top['score']:.2f}, below {perf['straggler_threshold']:g})"
        )
    return "not measured (no window carries ett.window.wait_s: see torch_hooks.time_ddp_waits)"


def partial_loop(share: float) -> str:
    """What a job whose loop figures read ``share`` of its productive time is told."""
    return (
        f"PARTIAL: {100 * share:.1f}% of the job's productive time (its other windows carry no "
        "step counts, or were folded before migration 0008, which kept no step series)"
    )


def print_performance(perf: dict[str, Any], console: Console) -> None:
    """Ideal and slow step time, throughput, the straggler and the slowest windows."""
    t = Table(title="Inside the loop (beside ETT)", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("ideal step time", f"{step_time(perf['ideal_step_s'])}  ({_basis(perf)})")
    if perf.get("slow_s") is not None:
        pct = perf.get("slow_pct")
        of = f"{pct:.1f}% of stepping time; " if pct is not None else ""
        how = "counted per window, by its mean step"
        t.add_row("slow time", f"{fine(perf['slow_s'])}  ({of}{how})")
    rate = perf.get("samples_per_s")
    t.add_row("throughput", f"{rate:,.1f} samples/s" if rate is not None else "-")
    t.add_row("steps", f"{perf['steps']:,}  ({perf['windows']:,} windows)")
    share = loop_coverage(perf.get("loop_s"), perf.get("productive_s"))
    if share is not None:
        t.add_row("covers", partial_loop(share))
    t.add_row("straggler", _straggler(perf))
    if perf.get("straggler_note"):
        t.add_row("step counts", str(perf["straggler_note"]))
    console.print(t)
    slow = perf.get("slow_windows") or []
    if slow:
        from ._render import instant, print_rows

        headers = ("attempt", "start", "step", "x ideal", "lost", "overlapping")
        rows = [
            (
                str(s["attempt"]),
                instant(s["start"]),
                step_time(s["step_s"]),
                f"{s['ratio']:.2f}",
                fine(s["lost_s"]),
                ", ".join(s["overlaps"]) or "-",
            )
            for s in slow[:5]
        ]
        print_rows(console, "Slowest windows", headers, rows)
