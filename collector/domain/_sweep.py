"""Interval sweeps: cut a base interval into pieces by the set of labels active in each."""

from __future__ import annotations

from collections.abc import Iterable

Piece = tuple[float, float, tuple[str, ...]]
"""(start, end, sorted distinct labels active over the whole piece)."""


def sweep(lo: float, hi: float, intervals: Iterable[tuple[float, float, str]]) -> list[Piece]:
    """Cut ``[lo, hi]`` into maximal pieces over which the set of active labels is constant.

    Each interval ``(start, end, label)`` is clipped to ``[lo, hi]``; empty ones are ignored.
    Labels are de-duplicated: two overlapping intervals with one label count once. Pieces are
    returned in order, they tile ``[lo, hi]`` exactly, and adjacent pieces differ in labels.
    """
    if hi <= lo:
        return []
    events: list[tuple[float, int, str]] = []
    for start, end, label in intervals:
        s, e = max(start, lo), min(end, hi)
        if e > s:
            events.append((s, 1, label))
            events.append((e, -1, label))
    if not events:
        return [(lo, hi, ())]
    events.sort(key=lambda ev: (ev[0], ev[1]))
    active: dict[str, int] = {}
    pieces: list[Piece] = []
    cursor = lo
    i = 0
    n = len(events)
    while i < n:
        t = events[i][0]
        if t > cursor:
            _append(pieces, cursor, t, tuple(sorted(active)))
            cursor = t
        while i < n and events[i][0] == t:
            _, delta, label = events[i]
            count = active.get(label, 0) + delta
            if count:
                active[label] = count
            else:
                active.pop(label, None)
            i += 1
    if hi > cursor:
        _append(pieces, cursor, hi, tuple(sorted(active)))
    return pieces


def _append(pieces: list[Piece], start: float, end: float, labels: tuple[str, ...]) -> None:
    """Append a piece, merging it into the previous one when the labels are the same."""
    if pieces and pieces[-1][2] == labels and pieces[-1][1] == start:
        pieces[-1] = (pieces[-1][0], end, labels)
    else:
        pieces.append((start, end, labels))


def split_at(pieces: list[Piece], t: float) -> list[Piece]:
    """The same pieces, with the one containing ``t`` (strictly inside) cut in two at ``t``."""
    out: list[Piece] = []
    for s, e, labels in pieces:
        if s < t < e:
            out.append((s, t, labels))
            out.append((t, e, labels))
        else:
            out.append((s, e, labels))
    return out
