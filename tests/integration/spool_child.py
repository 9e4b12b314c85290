"""A trainer for ``test_spool_kill.py``: its collector is away, so what it records goes to its
spool. It marks the first batch, then saves a checkpoint (an ``ett.checkpoint.save`` span of its
step) every 2 ms, printing ``ended STEP UNIX_TIME`` once each span has ended, until killed, or
for ``--steps`` steps before a normal end (then ``dropped N``: the spans it lost).
``--fsize BYTES``: the kernel refuses to let it write a file past that many bytes (a write is
cut short there, as by a crash in the middle of it)."""

from __future__ import annotations

import argparse
import resource
import time

import ett


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10**9)
    p.add_argument("--fsize", type=int, default=0)
    args = p.parse_args()
    if args.fsize:
        resource.setrlimit(resource.RLIMIT_FSIZE, (args.fsize, args.fsize))
    sess = ett.init(window_s=0.5)
    sess.first_batch()
    for step in range(args.steps):
        with sess.checkpoint_save(step):
            sess.step()
        print(f"ended {step} {time.time()}", flush=True)
        time.sleep(0.002)  # elapsed time, not a wait: a 2 ms step
    sess.end()
    print(f"dropped {sess.dropped_spans}", flush=True)


if __name__ == "__main__":
    main()
