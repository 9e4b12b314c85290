"""A live job's windows folded again from its previous load's fold, not from scratch.

Between two loads of a live job a few windows arrive, each at the tail of its rank, while the
load reads back hundreds of raw windows per rank. :func:`fold_rows` keeps what the fold of the
previous load made (:class:`Folded`) and, when nothing but such tail windows changed, continues
that fold with the new windows only. The result is the same, run for run, as
:func:`ett_collector.storage._runs.fold_runs` of every row: the fold sorts a rank's pieces and
merges them greedily in that order, so when every new piece sorts after every piece already
folded (and is no replay of a stored run), continuing the greedy merge from its last run is the
same merge. In any other case (a late window, a repeated span id, a new rank, compaction since,
another set of stored runs) the fold is made from scratch.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ett_collector.domain.model import SpanRecord
from ett_collector.storage._runs import (
    Run,
    fold_group,
    group_runs,
    run_key,
    runs_of_rows,
)

_Key = tuple[float, float, str, str]


@dataclass(frozen=True, slots=True)
class _Rank:
    runs: list[Run]
    """The rank's folded runs, in fold order; never mutated once kept here."""
    top: _Key
    """The largest sort key of every piece seen (stored runs and windows, dropped or not)."""
    starts: list[float]
    ends: list[float]
    """The stored runs' starts and ends, by start (a window inside one is a replay)."""


@dataclass(frozen=True, slots=True)
class Folded:
    """What one load's fold made: the stored runs and raw window rows it read, and the runs."""

    stored: list[SpanRecord]
    rows: frozenset[Any]
    ids: frozenset[tuple[str, str]]
    ranks: dict[tuple[int, int], _Rank]

    def records(self) -> list[SpanRecord]:
        """The runs as window records, rank by rank (the order of ``fold_runs``)."""
        return [r.record() for rank in self.ranks.values() for r in rank.runs]


def fold_rows(
    rows: Sequence[Sequence[Any]],
    stored: list[SpanRecord],
    known: Mapping[Any, Any],
    into: dict[Any, Any],
    prev: Folded | None,
) -> Folded:
    """The fold of raw window ``rows`` into the ``stored`` runs, continued from ``prev`` (the
    previous load's) where that gives the same runs; ``known`` and ``into``: as for
    :func:`ett_collector.storage._runs.runs_of_rows`."""
    if prev is not None and prev.stored == stored:
        out = _continued(prev, rows, known, into)
        if out is not None:
            return out
    fresh = runs_of_rows(rows, known, into)
    ranks: dict[tuple[int, int], _Rank] = {}
    for key, (runs, new) in group_runs(map(Run.of, stored), fresh).items():
        runs.sort(key=run_key)
        top = max(map(run_key, runs + new))
        starts, ends = [r.start for r in runs], [r.end for r in runs]
        folded, _ = fold_group(runs, new)
        ranks[key] = _Rank(folded, top, starts, ends)
    ids = frozenset((row[0], row[1]) for row in rows)
    return Folded(stored, frozenset(rows), ids, ranks)


def _continued(
    prev: Folded, rows: Sequence[Sequence[Any]], known: Mapping[Any, Any], into: dict[Any, Any]
) -> Folded | None:
    """``prev`` continued with the rows it has not seen, or None when that could differ from
    a fold from scratch."""
    new = [row for row in rows if row not in prev.rows]
    if len(rows) - len(new) != len(prev.rows):
        return None  # rows folded before are gone (compacted)
    for row in prev.rows:
        parts = known.get(row)
        if parts is None:
            return None
        into[row] = parts
    fresh = runs_of_rows(new, known, into)
    if len(fresh) != len(new):
        return None  # a span id repeated among the new rows
    by_rank: dict[tuple[int, int], list[Run]] = {}
    for w in fresh:
        if (w.trace_id, w.span_id) in prev.ids:
            return None  # a span id repeated: the first row by start is kept
        by_rank.setdefault((w.attempt, w.rank), []).append(w)
    ranks = dict(prev.ranks)
    for key, windows in by_rank.items():
        rank = ranks.get(key)
        if rank is None:
            return None  # a new rank: its place among the ranks is the fold's
        windows.sort(key=run_key)
        if run_key(windows[0]) <= rank.top:
            return None  # a late window: it sorts among pieces already folded
        for w in windows:
            i = bisect.bisect_right(rank.starts, w.start) - 1
            if i >= 0 and w.end <= rank.ends[i]:
                return None  # a replay of a stored run's window
        runs = list(rank.runs)
        if runs:
            runs[-1] = copy.copy(runs[-1])  # the kept one stays as it was
        for w in windows:
            if runs and runs[-1].continued_by(w):
                runs[-1].absorb(w)
            else:
                runs.append(w)
        ranks[key] = _Rank(runs, run_key(windows[-1]), rank.starts, rank.ends)
    ids = prev.ids.union((w.trace_id, w.span_id) for w in fresh)
    return Folded(prev.stored, prev.rows.union(new), ids, ranks)
