"""``semconv.ATTRIBUTE_TYPES`` (the type of each vocabulary attribute's one value, which the
collector's ingest enforces) says what each constant's own docstring says."""

from __future__ import annotations

import ast
import inspect
import itertools
import re

from ett import semconv

_DECLARED = re.compile(r"^(?:Extension\. )?(int|str|bool|float)\b")
_ENUMERATED = re.compile(r":class:`\w+Values`")


def _docstrings() -> dict[str, str]:
    """Attribute key -> the docstring under its constant in ``semconv.py``."""
    body = ast.parse(inspect.getsource(semconv)).body
    out: dict[str, str] = {}
    for stmt, after in itertools.pairwise(body):
        if isinstance(stmt, ast.Assign):
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            target, value = stmt.target, stmt.value
        else:
            continue
        doc = after.value if isinstance(after, ast.Expr) else None
        if (
            isinstance(target, ast.Name)
            and not target.id.startswith("SPAN_")  # ett.attempt is also a span name
            and isinstance(value, ast.Constant)
            and value.value in semconv.ATTRIBUTE_TYPES
            and isinstance(doc, ast.Constant)
            and isinstance(doc.value, str)
        ):
            out[value.value] = doc.value
    return out


def test_every_attribute_type_is_the_one_its_docstring_gives() -> None:
    docs = _docstrings()
    assert docs.keys() == semconv.ATTRIBUTE_TYPES.keys()
    checked = 0
    for key, doc in docs.items():
        declared = _DECLARED.match(doc)
        if declared is not None:
            assert semconv.ATTRIBUTE_TYPES[key].__name__ == declared.group(1), (key, doc)
            checked += 1
        elif _ENUMERATED.search(doc):
            assert semconv.ATTRIBUTE_TYPES[key] is str, (key, doc)
            checked += 1
    assert checked >= len(docs) // 2  # most name a type or an enumeration (25 of 29 now)


def test_known_attributes_are_the_typed_ones() -> None:
    assert frozenset(semconv.ATTRIBUTE_TYPES) == semconv.KNOWN_ATTRIBUTES
    assert set(semconv.ATTRIBUTE_TYPES.values()) <= {str, int, float, bool}
