"""The progress bar on rank 0: steps, samples per second, last committed checkpoint."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """A tqdm bar on rank 0 when enabled; silent elsewhere."""

    def __init__(self, *, enabled: bool, total: int, initial: int, samples_per_step: int) -> None:
        self.samples_per_step = samples_per_step
        self._bar: Any = None
        self._last_t = time.perf_counter()
        self._rate = 0.0
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                initial=initial,
                unit="step",
                file=sys.stderr,
                mininterval=0.5,
                dynamic_ncols=True,
                desc="train",
            )

    def update(self, step: int, *, loss: float, checkpoint: int | None) -> None:
        """One more step done (``step`` is the step just trained)."""
        if self._bar is None:
            return
        now = time.perf_counter()
        dt, self._last_t = now - self._last_t, now
        if dt > 0:  # an exponential mean: steady, yet it follows a change within a few steps
            rate = self.samples_per_step / dt
            self._rate = rate if self._rate == 0 else 0.9 * self._rate + 0.1 * rate
        self._bar.set_postfix(
            {
                "loss": f"{loss:.4f}",
                "samples/s": f"{self._rate:,.0f}",
                "ckpt": "-" if checkpoint is None else checkpoint,
            },
            refresh=False,
        )
        self._bar.update(1)

    def close(self) -> None:
        """Close the bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
