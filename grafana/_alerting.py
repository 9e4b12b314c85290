"""Grafana-managed alert rules, generated from the collector's own rule definitions.

Not wired yet: the collector's alert model (issue 13, ``collector/alerts``) has not landed; until
it does, no alerting file is generated (:func:`rule_groups` returns None).
"""

from __future__ import annotations

from typing import Any


def rule_groups() -> list[dict[str, Any]] | None:
    """The rule groups in Grafana's provisioning shape, or None while there is no alert model."""
    return None


def provisioning_file(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The alerting provisioning file holding ``groups``."""
    return {"apiVersion": 1, "groups": groups}


def api_rule_group(group: dict[str, Any], folder_uid: str) -> dict[str, Any]:
    """A provisioned rule group in the shape of Grafana's provisioning HTTP API."""
    return {"title": group["name"], "folderUid": folder_uid, "interval": 60,
            "rules": group["rules"]}  # fmt: skip
