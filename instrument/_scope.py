"""The base of the library's context managers, whose leaving needs only the exception.

``with`` hands ``__exit__`` three values; every scope here reads only the exception, and none
swallows it: ``__exit__`` returns None, so the exception propagates unchanged.
"""

from __future__ import annotations

from types import TracebackType


class Scope:
    """A context manager that leaves through :meth:`_leave`; subclasses define ``__enter__``."""

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave(exc)

    def _leave(self, exc: BaseException | None) -> None:
        """Leave the block; ``exc`` is the exception escaping it, or None."""
        raise NotImplementedError
