"""The server process's garbage collector (``settle_garbage``): what was alive when the app was
built is frozen out of the collector's walks, young collections come every 10,000 objects
instead of 700, and garbage made later is still collected. Run in a child interpreter: the
collector's settings are the whole process's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import gc, sys, weakref
from ett_collector.api._factory import GC_THRESHOLDS, build_app, settle_garbage
from ett_collector.settings import Settings
from ett_collector.storage import Store

url = "sqlite:///" + sys.argv[1]
Store(url).upgrade()
app = build_app(Settings(db_url=url))
settle_garbage()
assert gc.get_threshold() == GC_THRESHOLDS == (10_000, 10, 10), gc.get_threshold()
frozen = gc.get_freeze_count()
assert frozen > 50_000, frozen  # the modules and the app: never walked again


class Node:
    pass


refs = []
for _ in range(1000):  # cycles made after the freeze are still found and freed
    a, b = Node(), Node()
    a.other, b.other = b, a
    refs.append(weakref.ref(a))
del a, b
gc.collect()
alive = sum(ref() is not None for ref in refs)
assert alive == 0, f"{alive} of the cycles made after the freeze were not collected"
assert gc.get_freeze_count() == frozen
print("ok")
"""


def test_a_server_freezes_its_start_and_collects_later_garbage(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "c.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "ok"
