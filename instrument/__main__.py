"""``python -m ett COMMAND [ARGS...]``: zero-code instrumentation (``ett-instrument``)."""

import sys

from ._auto import main

sys.exit(main())
