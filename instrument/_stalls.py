"""Training stalls: the loop waiting for its next batch, and user-named blocking events.

A data stall is timed by :class:`DataWait` (``with sess.data_wait(): batch = next(it)``) or by
:func:`timed_batches` (``for batch in sess.batches(loader):``). Every wait costs two clock reads;
a span (``ett.data.wait``) is emitted only for a wait of at least ``min_s`` (default
:data:`DATA_WAIT_MIN_S`), so a loader that keeps up costs no span at all. The collector cuts each
one out of training as idle time charged to ``data``.

A blocking event (``with sess.blocking("sdc_check", component="model"):``) is an
``ett.blocking`` span with the user's name and component; the collector cuts it out as idle time
charged to that component (``other`` when the component is not one it knows).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from ._errors import log_once
from ._scope import Scope
from ._spans import SpanBlock, SpanSink

DATA_WAIT_MIN_S = 0.001
"""Shortest wait for the next batch that is emitted as an ``ett.data.wait`` span (seconds).
A span costs tens of microseconds; at 1 ms that is a few percent of the wait it reports, and
nothing for a loader that keeps up. Shorter waits are counted as training."""

_DATA_ATTRIBUTES: dict[str, AttributeValue] = {
    semconv.COMPONENT: semconv.ComponentValues.DATA.value,
}

_KNOWN_COMPONENTS = frozenset(
    c.value for c in semconv.ComponentValues if c != semconv.ComponentValues.FAILURE
)

_Item = TypeVar("_Item")


class DataWait(Scope):
    """A context manager around the wait for the next batch: an ``ett.data.wait`` span from
    entry to exit when the wait lasted ``min_s`` or more, none otherwise. An exception of the
    loader propagates unchanged (recorded on the span when one is emitted). Reusable, not
    re-entrant: one wait at a time."""

    __slots__ = ("_min_ns", "_sink", "_start_ns")

    def __init__(self, sink: SpanSink, min_s: float = DATA_WAIT_MIN_S) -> None:
        self._sink = sink
        self._min_ns = int(max(min_s, 0.0) * 1e9)
        self._start_ns = 0

    def __enter__(self) -> DataWait:
        self._start_ns = time.time_ns()
        return self

    def _leave(self, exc: BaseException | None) -> None:
        end_ns = time.time_ns()
        if end_ns - self._start_ns < self._min_ns:
            return
        span: Span = self._sink.start(semconv.SPAN_DATA_WAIT, _DATA_ATTRIBUTES, self._start_ns)
        self._sink.end(span, exc, end_ns)


def timed_batches(
    sink: SpanSink, loader: Iterable[_Item], min_s: float = DATA_WAIT_MIN_S
) -> Iterator[_Item]:
    """The items of ``loader``, each wait for one (``iter(loader)`` included: a data loader
    starts its workers there) timed by a :class:`DataWait`."""
    wait = DataWait(sink, min_s)
    with wait:
        items = iter(loader)
    while True:
        with wait:
            try:
                item = next(items)
            except StopIteration:
                return
        yield item


def blocking_block(sink: SpanSink, name: str, component: str) -> SpanBlock:
    """An ``ett.blocking`` span block named ``name``, charged to ``component``."""
    comp = str(component)
    if comp not in _KNOWN_COMPONENTS:
        log_once(
            "Session.blocking",
            "blocking(%r, component=%r): not a component the collector charges; it charges "
            "this event to 'other' (components: %s)",
            name,
            comp,
            ", ".join(sorted(_KNOWN_COMPONENTS)),
        )
    attributes: dict[str, AttributeValue] = {
        semconv.BLOCKING_NAME: str(name),
        semconv.COMPONENT: comp,
    }
    return SpanBlock(sink, semconv.SPAN_BLOCKING, attributes)
