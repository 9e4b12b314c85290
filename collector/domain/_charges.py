"""What each span charges: the component a span names in start-up, training and shutdown.

One function per part of an attempt (the rules of docs/metrics.md):

- start-up follows a rank's phases: ``ett.startup.<phase>``, and the spans that stand for a phase
  there (``ett.compile``, a standalone ``ett.publish``, a data stall, a user-named blocking event);
- training cuts out what stalls every rank: ``ett.eval``, ``ett.publish`` on the trainer, a
  recompile, a data stall (``ett.data.wait``) and a user-named blocking event (``ett.blocking``);
  checkpoint blocking is grouped by step elsewhere. A data stall *yields*: where another cut-out
  is active too, the instant goes to that one alone (:func:`settle`), because a rank that fetches
  its next batch while a peer is still saving (say) would have waited for that peer anyway;
- a completed attempt's shutdown is charged to what it waited for: its ``ett.shutdown.<step>``
  spans, a final save or persist of a checkpoint, and the training cut-outs.
"""

from __future__ import annotations

from collections.abc import Sequence

from ett import semconv as sc

from ._sweep import sweep
from .model import BlockingEvent, SpanRecord

_OTHER = sc.ComponentValues.OTHER.value
_DATA = sc.ComponentValues.DATA.value
_CHECKPOINT = sc.ComponentValues.CHECKPOINT.value

USER_COMPONENTS: frozenset[str] = frozenset(
    c.value for c in sc.ComponentValues if c != sc.ComponentValues.FAILURE
)
"""Components a span may charge idle time to by its ``ett.component``: every component but
``failure``, which only the failure rules charge."""


DATA_WAIT = "\x00data_wait"
"""The sweep label of a data stall in training and shutdown, until :func:`settle` turns it
into ``data`` (or drops it where another cut-out is active)."""


def settle(labels: tuple[str, ...]) -> tuple[str, ...]:
    """The components of a piece of training or shutdown: a data stall yields to any other
    cut-out active then, and is ``data`` where it is alone."""
    if DATA_WAIT not in labels:
        return labels
    if len(labels) == 1:
        return (_DATA,)
    return tuple(label for label in labels if label != DATA_WAIT)


def named_component(span: SpanRecord, default: str) -> str:
    """The span's ``ett.component`` when it is one a span may charge; else ``default`` when the
    span names none, and ``other`` when it names an unknown one (its own name stays on the span)."""
    comp = span.attr(sc.COMPONENT)
    if comp is None or comp == "":
        return default
    return comp if isinstance(comp, str) and comp in USER_COMPONENTS else _OTHER


def cutout_component(span: SpanRecord) -> str | None:
    """The component a span cuts out of training as idle; None when it cuts nothing.

    ``ett.eval`` → eval, a non-standalone ``ett.publish`` → publish, ``ett.compile`` (a recompile)
    → compile, ``ett.data.wait`` → :data:`DATA_WAIT` (data, once :func:`settle`-d),
    ``ett.blocking`` → its ``ett.component`` (none or an unknown one: ``other``). Checkpoint
    saves are cut out per step by the caller.
    """
    name = span.name
    if name == sc.SPAN_EVAL:
        return sc.ComponentValues.EVAL.value
    if name == sc.SPAN_PUBLISH:
        standalone = span.attr(sc.PUBLISH_STANDALONE) is True
        return None if standalone else sc.ComponentValues.PUBLISH.value
    if name == sc.SPAN_COMPILE:
        return sc.ComponentValues.COMPILE.value
    if name == sc.SPAN_DATA_WAIT:
        return DATA_WAIT
    if name == sc.SPAN_BLOCKING:
        return named_component(span, _OTHER)
    return None


def phase_component(span: SpanRecord) -> str | None:
    """The component a span charges while a rank starts up; None when it is no start-up phase.

    ``ett.startup.<phase>`` → its ``ett.component`` (default by phase); ``ett.compile`` →
    compile; ``ett.publish`` → publish (a standalone publishing job never trains); a data stall
    or a blocking event before the first batch → its cut-out component.
    """
    phase = sc.startup_phase(span.name)
    if phase is not None:
        comp = span.attr(sc.COMPONENT)
        return comp if isinstance(comp, str) and comp else sc.default_component(phase)
    if span.name == sc.SPAN_PUBLISH:
        return sc.ComponentValues.PUBLISH.value
    if span.name == sc.SPAN_DATA_WAIT:
        return _DATA
    return cutout_component(span) if span.name != sc.SPAN_EVAL else None


def shutdown_component(span: SpanRecord) -> str | None:
    """The component a span charges in a completed attempt's shutdown; None when none.

    ``ett.shutdown.<step>`` → its ``ett.component`` (default by step: ``persist_wait`` →
    checkpoint, ``pg_teardown`` → comms, ``exporter_flush`` → runtime; others ``other``); a final
    ``ett.checkpoint.save`` or ``ett.checkpoint.persist`` → checkpoint; the training cut-outs
    (a data stall as :data:`DATA_WAIT`, to be :func:`settle`-d).
    """
    step = sc.shutdown_step(span.name)
    if step is not None:
        return named_component(span, sc.shutdown_component(step))
    if span.name in (sc.SPAN_CHECKPOINT_SAVE, sc.SPAN_CHECKPOINT_PERSIST):
        return _CHECKPOINT
    return cutout_component(span)


def blocking_events(spans: Sequence[SpanRecord]) -> tuple[BlockingEvent, ...]:
    """The user-named blocking events of a job, by name and the component they are charged
    to: how many ``ett.blocking`` spans (over ranks and attempts) and the seconds at least one
    rank was inside one (before any split with other cut-outs). Most seconds first."""
    groups: dict[tuple[str, str], list[SpanRecord]] = {}
    for s in spans:
        if s.name == sc.SPAN_BLOCKING:
            name = s.attr(sc.BLOCKING_NAME)
            key = (name if isinstance(name, str) and name else "", named_component(s, _OTHER))
            groups.setdefault(key, []).append(s)
    out = []
    for (name, comp), group in groups.items():
        lo, hi = min(s.start for s in group), max(s.end for s in group)
        covered = sum(
            b - a
            for a, b, labels in sweep(lo, hi, [(s.start, s.end, "x") for s in group])
            if labels
        )
        out.append(BlockingEvent(name, comp, len(group), covered))
    out.sort(key=lambda e: (-e.seconds, e.name, e.component))
    return tuple(out)
