"""The ``key=value`` words of one ``--regress`` or ``--straggler`` value, read one way for both."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .profile import ProfileError


def read_words(flag: str, text: str, keys: Iterable[str], fmt: str) -> dict[str, str]:
    """The ``key=value`` words of ``text`` (the value of ``flag``), by key. :class:`ProfileError`
    for a word that is not ``key=value`` with a key of ``keys`` and a value, or a key given twice;
    the message shows ``fmt``, how to write the value."""
    allowed = tuple(keys)
    words: dict[str, str] = {}
    for part in text.split():
        key, eq, value = part.partition("=")
        if not eq or key not in allowed or not value:
            raise ProfileError(
                f"{flag} {text!r}: cannot read {part!r}; write {fmt} (keys: {', '.join(allowed)})"
            )
        if key in words:
            raise ProfileError(f"{flag} {text!r}: {key} is given twice")
        words[key] = value
    return words


def require_words(
    flag: str, text: str, words: Mapping[str, str], keys: Iterable[str], fmt: str
) -> None:
    """:class:`ProfileError` naming the first of ``keys`` that ``words`` lacks."""
    for key in keys:
        if key not in words:
            raise ProfileError(f"{flag} {text!r}: {key}= is missing; write {fmt}")


def number(value: str) -> float:
    """``value`` as a float; NaN when it is not a number (so every range check rejects it)."""
    try:
        return float(value)
    except ValueError:
        return float("nan")
