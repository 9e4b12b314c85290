"""Grafana dashboards and alert rules as code (not built yet: a later issue)."""
