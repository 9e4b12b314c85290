"""Grafana dashboards and alert rules as code: ``ett grafana build`` writes them (sorted JSON and
YAML) into ``grafana/provisioning/`` from the builders here and the collector's alert rules,
``--check`` fails when the committed files are stale, and ``ett grafana push`` sends them to a
Grafana server (``docs/grafana.md``)."""
