"""Imported by every Python interpreter started under ``ett-instrument`` (see
``ett._auto``): start ETT when this interpreter is a rank, then run the
``sitecustomize`` that ours hides, if there is one."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _start() -> None:
    try:
        from ett._auto import bootstrap
    except ImportError as exc:
        print(f"ett-instrument: cannot import ett here: {exc}", file=sys.stderr)
        return
    bootstrap()


_start()
try:
    _chain()
except Exception as exc:
    print(f"ett-instrument: the hidden sitecustomize failed: {exc!r}", file=sys.stderr)
