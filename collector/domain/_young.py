"""Young's checkpoint interval read backwards: the training time behind a job's optimum.

:func:`ett_collector.domain.young_interval` gives ``I* = sqrt(2·B·T/F)``; a stored job keeps
``I*`` and ``B`` but not the clean training seconds ``T`` it used, so pooling jobs (the checkpoint
advice per model) recovers ``T = I*²·F / (2·B)`` from the same formula.
"""

from __future__ import annotations


def young_training(
    optimal: float | None, mean_blocking: float | None, failures: int
) -> float | None:
    """The training seconds ``T = I*²·F / (2·B)`` for which Young's optimum is ``optimal``
    (None without an optimum, a blocking time or failures)."""
    if not optimal or not mean_blocking or not failures:
        return None
    return optimal * optimal * failures / (2.0 * mean_blocking)
