"""Limits on what one span may carry, the same on SQLite and PostgreSQL.

Values that one database would take and the other refuse, or that would break the job's indexes
later (a 4 kB ``ett.model`` passes ingest on PostgreSQL and then fails every recompute of its job
on the btree index), are refused at ingest, per span: the span is rejected alone and reported
through OTLP partial success; the rest of the request is stored.

An attribute of the vocabulary (``semconv.ATTRIBUTE_TYPES``) holds one value: sent as an array, a
key-value list or bytes, it rejects its span (an ``ett.checkpoint.step`` array was stored and then
failed every recompute of its job). A scalar of another type than the vocabulary's passes: an
integer attribute sent as a whole double (``100.0``, what a Python emitter sends for a step it
computed by division) or a decimal string (``"100"``) is read as the integer it means
(:func:`conformed`: before, such a window fell out of the loop figures without a word, and such
a checkpoint step named no checkpoint); anything else is kept as sent, and the domain reads each
attribute defensively (a string ``"ten"`` step names no checkpoint). Refusing them would drop
spans that compute today. A double that is NaN or infinite rejects its span too: SQLite's JSON
text took it and PostgreSQL's jsonb (the Grafana views) refused it, and an infinite count failed
its job's every recompute.
"""

from __future__ import annotations

import math
from typing import Any, Final

from ett import semconv

MAX_IDENTITY_CHARS: Final = 256
"""Longest job id, model, team, component or span name, in characters."""

MAX_KEY_CHARS: Final = 256
"""Longest attribute key, in characters."""

MAX_VALUE_CHARS: Final = 16_384
"""Longest string attribute value (also inside arrays and key-value lists), in characters."""

MAX_ATTRIBUTES: Final = 256
"""Most attribute values of one resource, and of one span's own attributes (nested values count)."""

MAX_DEPTH: Final = 32
"""Deepest nesting of arrays and key-value lists in one attribute value (a list in a list is 2):
one nested deeper rejects its span, in both encodings. upb, which decodes the protobuf one,
stops at 33 key-value lists (its depth limit of 100 messages) and failed the whole request
there, where JSON took 40 and more."""

MAX_INDEX: Final = 2**31 - 1
"""Largest ``ett.attempt`` and ``ett.rank``: the 32-bit integer columns of both databases (a
larger one passed SQLite and failed PostgreSQL, and past 2**63 failed SQLite too)."""

_IDENTITY_KEYS: Final = (semconv.JOB_ID, semconv.MODEL, semconv.TEAM, semconv.COMPONENT)


class TooDeep:
    """An attribute value nested deeper than :data:`MAX_DEPTH`, which the protobuf decoder
    could not decode (``_nesting.py``): it rejects its span, as such a value decoded from
    JSON does."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<nested deeper than {MAX_DEPTH}>"


class HexBytes(str):
    """An OTLP ``bytes`` value as both decoders keep it: its lower-case hex. A string to storage
    and to the domain, but marked, so that a vocabulary attribute sent as bytes is told apart
    from one sent as a string."""

    __slots__ = ()


_VOCABULARY: Final = semconv.ATTRIBUTE_TYPES
INTEGER_KEYS: Final = frozenset(key for key, kind in _VOCABULARY.items() if kind is int)
"""The vocabulary's integer attributes (steps, counts, ranks): :func:`conformed` reads them."""
_LARGEST_WHOLE: Final = 2**63
"""Past int64 a whole double is no count or step any database column holds."""


def conformed(key: str, value: Any) -> Any:
    """``value`` of attribute ``key`` as the vocabulary's integer where it means one: a whole
    double (``100.0``) or a string of at most 18 decimal digits (``"100"``) under an integer
    key; every other value as it is (module docstring)."""
    if key not in INTEGER_KEYS:
        return value
    kind = type(value)
    if kind is float and value.is_integer() and abs(value) < _LARGEST_WHOLE:
        return int(value)
    if kind is str and len(value) <= 18 and value.isascii() and value.isdigit():
        return int(value)
    return value


_TYPE_WORDS: Final[dict[type, str]] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
}


def _text_problem(text: str, limit: int, what: str) -> str | None:
    if len(text) > limit:
        return f"has {what} of {len(text)} characters (limit {limit})"
    if "\x00" in text:
        return f"has a NUL character in {what}"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return f"has a lone surrogate in {what} (not valid Unicode)"
    return None


def _one_value_problem(key: str, kind: str) -> str | None:
    """Why ``key``, holding ``kind`` (an array, ...), breaks the vocabulary; None for a key
    outside it."""
    expected = _VOCABULARY.get(key)
    if expected is None:
        return None
    return f"has {key} as {kind}, expected {_TYPE_WORDS[expected]}"


def _value_problem(
    key: str, value: Any, budget: list[int], top: bool, depth: int = 0, outer: str = ""
) -> str | None:
    """Why ``value`` breaks a limit; ``top``: it is an attribute's own value, not an item of an
    array or a key-value list (only those are held to the vocabulary's one value); ``depth``:
    the arrays and key-value lists around it; ``outer``: the attribute it is in (nested)."""
    budget[0] -= 1
    if budget[0] < 0:
        return f"has more than {MAX_ATTRIBUTES} attribute values"
    if type(value) is TooDeep or (depth >= MAX_DEPTH and isinstance(value, list | dict)):
        return (
            f"has attribute {(outer or key)[:64]!r} nested deeper than {MAX_DEPTH} levels "
            "(arrays and key-value lists in one another)"
        )
    if isinstance(value, str):
        problem = _text_problem(value, MAX_VALUE_CHARS, f"attribute {key[:64]!r}")
        if problem is None and top and type(value) is HexBytes:
            return _one_value_problem(key, "bytes")
        return problem
    if isinstance(value, list):
        for item in value:
            problem = _value_problem(key, item, budget, False, depth + 1, outer or key)
            if problem is not None:
                return problem
        return _one_value_problem(key, "an array") if top else None
    if isinstance(value, dict):
        problem = _pairs_problem(value, budget, False, depth + 1, outer or key)
        if problem is None and top:
            return _one_value_problem(key, "a key-value list")
        return problem
    if type(value) is float and not math.isfinite(value):
        return _NON_FINITE.format(key=key[:64], value=value)
    return None


_NON_FINITE: Final = (
    "has attribute {key!r} as {value}, which JSON cannot hold (PostgreSQL's jsonb refuses it): "
    "send a finite number, or a string"
)


def _pairs_problem(
    attrs: dict[str, Any], budget: list[int], vocabulary: bool, depth: int = 0, outer: str = ""
) -> str | None:
    for key, value in attrs.items():
        problem = _text_problem(key, MAX_KEY_CHARS, "an attribute key")
        if problem is None:
            problem = _value_problem(key, value, budget, vocabulary, depth, outer)
        if problem is not None:
            return problem
    return None


def attributes_problem(attrs: dict[str, Any]) -> str | None:
    """Why ``attrs`` (a resource's, or a span's own) break a limit (sizes, NUL, lone
    surrogates), or hold an attribute of the vocabulary as more than one value (module
    docstring); None when they do not. Keys inside a key-value list are not the vocabulary's."""
    return _pairs_problem(attrs, [MAX_ATTRIBUTES], vocabulary=True)


def within_identity_limits(key: str, value: Any) -> bool:
    """Whether one scalar attribute can break no limit of its span: its key within the key
    limits, and a string value within those of an identity value (:data:`MAX_IDENTITY_CHARS`,
    no NUL, valid Unicode), whatever key it is under. A span whose attributes all pass needs no
    :func:`attributes_problem`, and of :func:`identity_problem` only the name's check."""
    if _text_problem(key, MAX_KEY_CHARS, "") is not None:
        return False
    if isinstance(value, str):
        return type(value) is str and _text_problem(value, MAX_IDENTITY_CHARS, "") is None
    if type(value) is float:
        return math.isfinite(value)
    return value is None or type(value) in _TYPE_WORDS


def name_problem(name: str) -> str | None:
    """Why the span's name breaks a limit."""
    return _text_problem(name, MAX_IDENTITY_CHARS, "its name")


def identity_problem(name: str, merged: dict[str, Any]) -> str | None:
    """Why the span's name or identity values (job id, model, team, component) break a limit."""
    problem = name_problem(name)
    if problem is not None:
        return problem
    for key in _IDENTITY_KEYS:
        value = merged.get(key)
        if isinstance(value, str):
            problem = _text_problem(value, MAX_IDENTITY_CHARS, key)
            if problem is not None:
                return problem
    return None
