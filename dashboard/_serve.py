"""Streamlit's own command line, started after importing what every page needs (pandas, Altair
and the chart functions) and building Altair's schema validator, so that the first visitor of a
new ``ett dashboard`` does not wait for them: Streamlit runs the page scripts in this process,
where they are then cached.

``python -m ett_dashboard._serve run APP [streamlit options]`` (``ett dashboard`` builds the line).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Import the pages' heavy modules, then hand the command line to Streamlit's."""
    import altair  # noqa: F401
    import pandas
    from streamlit.web import cli

    from ett_dashboard import charts

    # Altair validates every chart against the Vega-Lite schema; its validator is built on the
    # first chart of the process: build it here, not in the first visitor's page run
    charts.chart(pandas.DataFrame({"x": [0.0]}), "bar", x="x:Q").to_dict()
    sys.argv = ["streamlit", *sys.argv[1:]]
    cli.main()  # click: exits the process with Streamlit's status


if __name__ == "__main__":
    main()
