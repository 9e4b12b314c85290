"""Span and trace ids from the library's own random source.

The SDK's default ``RandomIdGenerator`` draws from the ``random`` module's global state, which a
program may seed, and which ``torch.compile`` saves before and restores after each compilation
(dynamo keeps the program's random stream unchanged). Spans started during a compilation (the
``ett.compile`` span itself, an import timed meanwhile) then gave their ids again to the next
spans, and the collector, which keeps the first span of an id seen twice, lost those. Drawing
ids also moved the program's own random sequence. The library's pipeline uses
:class:`PrivateIdGenerator` instead: its own ``random.Random``, seeded from the OS, and reseeded
in a forked child (as ``random`` does for its global state).
"""

from __future__ import annotations

import os
import random

from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import INVALID_SPAN_ID, INVALID_TRACE_ID


class PrivateIdGenerator(IdGenerator):
    """Random span and trace ids that neither read nor move the ``random`` module's state."""

    def __init__(self) -> None:
        self._random = random.Random()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._random.seed)

    def generate_span_id(self) -> int:
        span_id = self._random.getrandbits(64)
        while span_id == INVALID_SPAN_ID:
            span_id = self._random.getrandbits(64)
        return span_id

    def generate_trace_id(self) -> int:
        trace_id = self._random.getrandbits(128)
        while trace_id == INVALID_TRACE_ID:
            trace_id = self._random.getrandbits(128)
        return trace_id
