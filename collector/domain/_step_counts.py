"""Whether the ranks of one attempt count the same steps (issue 26, "Inside the loop").

Every per-step figure of the loop (the ideal step time, slow time, the straggler score) divides
seconds by a rank's step count, and compares ranks on it. In synchronous training the ranks step
in lock-step, so over the same time they count the same steps. A rank that calls ``step()``
once per micro-batch, or once per gradient-accumulation pass, counts more: with two calls a
step its per-step times read half, and the *other* rank was named the straggler at 2.0 (an
operator probe: two ranks of identical 50 ms steps; rank 1 counting twice; "straggler rank 0,
2.01x", the ideal step 23 % low, 600 steps for 300).

So per attempt, each rank's **step rate** = its steps / its seconds over its points after
warm-up (all its points when it has only one). When the highest rate of an attempt's ranks is
more than :data:`STEP_RATE_TOLERANCE` above the lowest, its ranks *count differently*: no
straggler is named from their per-step times, and the attempt's step figures read one rank, the
**basis rank**: the one with the lowest rate (lowest rank on ties), since a rank that counts
micro-batches counts more steps per training step, never fewer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._points import Point

__all__ = ["STEP_RATE_TOLERANCE", "counted_ranks", "mismatches", "note", "step_rate"]

STEP_RATE_TOLERANCE = 0.1
"""How far above the lowest step rate of an attempt's ranks the highest may be (10 %) for the
ranks to count the same steps. Ranks stepping in lock-step agree within a window's edge (well
under 1 % over a minute of 10 s windows); two calls of ``step()`` a step read 100 % apart."""


def step_rate(pts: Sequence[Point]) -> float | None:
    """A rank's steps per second over its points after warm-up (all with one point); None
    without steps or seconds. ``pts`` in time order."""
    body = pts[1:] or pts
    steps = sum(p.steps for p in body)
    seconds = sum(p.seconds for p in body)
    return steps / seconds if steps > 0 and seconds > 0 else None


def mismatches(ranks: Mapping[tuple[int, int], Sequence[Point]]) -> dict[int, dict[str, object]]:
    """Per attempt whose ranks count differently (module docstring): ``{attempt,
    steps_per_s: {rank: rate}, ratio: highest / lowest, basis_rank}``. ``ranks``: each
    (attempt, rank)'s points in time order."""
    rates: dict[int, dict[int, float]] = {}
    for (a, r), pts in ranks.items():
        rate = step_rate(pts)
        if rate is not None:
            rates.setdefault(a, {})[r] = rate
    out: dict[int, dict[str, object]] = {}
    for a in sorted(rates):
        per = rates[a]
        if len(per) < 2:
            continue
        low = min(sorted(per), key=lambda r: per[r])
        ratio = max(per.values()) / per[low]
        if ratio > 1.0 + STEP_RATE_TOLERANCE:
            out[a] = {
                "attempt": a,
                "steps_per_s": {str(r): round(per[r], 4) for r in sorted(per)},
                "ratio": round(ratio, 4),
                "basis_rank": low,
            }
    return out


def counted_ranks(
    ranks: Mapping[tuple[int, int], list[Point]], differ: Mapping[int, Mapping[str, object]]
) -> dict[tuple[int, int], list[Point]]:
    """``ranks`` less, in each attempt of ``differ``, every rank but its basis rank."""
    return {
        (a, r): pts
        for (a, r), pts in ranks.items()
        if a not in differ or differ[a]["basis_rank"] == r
    }


def note(differ: Mapping[int, Mapping[str, object]]) -> str | None:
    """One line saying why no straggler is named in the attempts of ``differ`` (None: none),
    e.g. ``attempt 0: rank 1 counts 2.00x the steps per second of rank 0 (...)``."""
    parts = []
    for a, d in sorted(differ.items()):
        rates: dict[str, float] = d["steps_per_s"]  # type: ignore[assignment]
        high = max(sorted(rates, key=int), key=lambda r: rates[r])
        parts.append(
            f"attempt {a}: rank {high} counts {d['ratio']:.2f}x the steps per second of rank "
            f"{d['basis_rank']}, whose steps the step figures read"
        )
    if not parts:
        return None
    return (
        "; ".join(parts) + f" (more than {100 * STEP_RATE_TOLERANCE:.0f}% apart: one step() per "
        "micro-batch?): no straggler is named from per-step times that count different steps"
    )
