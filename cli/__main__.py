"""``python -m ett_cli``: the same as the ``ett`` console script."""

from ._main import main

raise SystemExit(main())
