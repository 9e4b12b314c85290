"""The loop facts of a job kept with its figures at save time, for the alerts (issue 26).

``collector/domain/_loop_facts.py`` says what they are: the job's raw windows and its compacted
``window_series`` buckets become points, as for the performance view
(``ett_collector.read.performance``). The facts also hold the job object's ``performance`` block
(:func:`job_block`). A job that ended gets fresh facts at every save. A running job's figures
are saved after every window, so its facts are computed at most every
:data:`RUNNING_EVERY_S` per job in this process, the last ones kept in between (the straggler
alert sees a running job this way; the throughput regression tests only ended jobs). A bug in
the facts' computation is logged and saves the figures without them; a database error raises,
as the recompute's own reads do.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..domain._loop_facts import loop_facts
from ..domain._performance import performance
from ..domain.model import JobState, JobSummary
from ..storage import Store
from ..storage._series import job_points

KEY = "loop_facts"
"""The key of the facts in the stored summary JSON (left out of the read API's job object)."""

RUNNING_EVERY_S = 300.0
"""The least time between two computations of a running job's facts (in one process)."""

_REMEMBERED = 4096
"""Running jobs whose last facts are kept (the oldest are forgotten past it)."""

log = logging.getLogger("ett_collector")
_last: dict[str, tuple[float, dict[str, Any] | None]] = {}
_lock = threading.Lock()


def _compute(store: Store, summary: JobSummary) -> dict[str, Any] | None:
    job_id = summary.job_id
    spans, rows = store.load_performance(job_id)
    points = job_points(spans, rows, store.compactor.retention_s)
    if not points:
        return None
    try:
        facts = loop_facts(points, spans)
        facts["performance"] = job_block(performance(points, spans))
        return facts
    except Exception:  # the alerts' extra never costs the job its ETT figures
        log.exception("loop facts of job %r failed; its figures are saved without them", job_id)
        return None


def job_block(figures: dict[str, object]) -> dict[str, object]:
    """The ``performance`` block of the job object (``GET /api/v1/jobs/{id}``): the figures of
    ``domain._performance.performance`` less the per-rank scores of every attempt
    (``stragglers``), which only the job's ``/performance`` view lists; ``straggler``, the
    named one, stays."""
    return {k: v for k, v in figures.items() if k != "stragglers"}


def job_loop_facts(
    store: Store, summary: JobSummary, clock: Any = time.monotonic
) -> dict[str, Any] | None:
    """The loop facts of the job of ``summary`` (None without training windows)."""
    job_id = summary.job_id
    if summary.state is not JobState.RUNNING:
        with _lock:
            _last.pop(job_id, None)
        return _compute(store, summary)
    now = clock()
    with _lock:
        seen = _last.get(job_id)
    if seen is not None and now - seen[0] < RUNNING_EVERY_S:
        return seen[1]
    facts = _compute(store, summary)
    with _lock:
        if len(_last) >= _REMEMBERED:
            for old in sorted(_last, key=lambda j: _last[j][0])[: _REMEMBERED // 4]:
                del _last[old]
        _last[job_id] = (now, facts)
    return facts
