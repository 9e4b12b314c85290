"""How figures read on the pages: percentages with one decimal (as ``ett report`` prints them),
durations in s/min/h, instants in UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def pct(value: float | None) -> str:
    """``60.0 %``; an em dash when unknown."""
    return "—" if value is None else f"{value:.1f} %"


def duration(seconds: float | None) -> str:
    """``42.0 s``, ``12.5 min``, ``3.20 h``; an em dash when unknown (None, or the NaN that
    pandas makes of a JSON null)."""
    if seconds is None or seconds != seconds:
        return "—"
    if abs(seconds) < 120:
        return f"{seconds:.1f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def instant(t: float | None) -> str:
    """``2026-11-29 08:00:12 UTC``; an em dash when unknown."""
    if t is None:
        return "—"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def gpu_hours(value: float | None) -> str:
    """``12.3 GPU-h``."""
    return "—" if value is None else f"{value:,.1f} GPU-h"


def rate(per_s: float | None, unit: str = "samples") -> str:
    """``812 samples/s``, ``135k samples/s``, ``1.08M samples/s``: three figures at most, so a
    headline card never cuts it (``unit=""``: the bare figure, ``64.2k``, for a card whose
    label names the unit); an em dash when unknown."""
    if per_s is None or per_s != per_s:
        return "—"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(per_s) >= size:
            scaled = per_s / size
            digits = 0 if abs(scaled) >= 100 else 1 if abs(scaled) >= 10 else 2
            return f"{scaled:.{digits}f}{suffix}" + (f" {unit}/s" if unit else "")
    return f"{per_s:.0f}" + (f" {unit}/s" if unit else "")
