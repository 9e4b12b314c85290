"""Streamlit's own command line, started after importing what every page needs (pandas, Altair
and the chart functions), so that the first visitor of a new ``ett dashboard`` does not wait for
those imports: Streamlit runs the page scripts in this process, where they are then cached.

``python -m dashboard._serve run APP [streamlit options]`` (``ett dashboard`` builds the line).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Import the pages' heavy modules, then hand the command line to Streamlit's."""
    import altair  # noqa: F401
    import pandas  # noqa: F401
    from streamlit.web import cli

    from dashboard import charts  # noqa: F401

    sys.argv = ["streamlit", *sys.argv[1:]]
    cli.main()  # click: exits the process with Streamlit's status


if __name__ == "__main__":
    main()
