"""The OpenTelemetry SDK settings ETT honours, and those it refuses aloud.

ETT sends its spans through a pipeline of its own (``ett._export``), not through the
program's global ``TracerProvider``: the figures need every span, so no sampler of the program's
may drop one, and the ``OTEL_EXPORTER_OTLP_*`` endpoint and headers must keep applying to them.
This module reads the SDK's environment conventions for that pipeline. A setting ETT cannot
honour is named in a one-time warning with what ETT does instead; none is ignored silently.
(``OTEL_SDK_DISABLED``, the endpoint and the headers are read in ``ett._config``.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from ._errors import log_once

ExporterKind = Literal["otlp", "console", "none"]

PROTOCOL = "http/protobuf"
"""The only OTLP protocol ETT speaks (the collector's ``POST /v1/traces``)."""


def traces_exporter(env: Mapping[str, str] | None = None) -> ExporterKind:
    """``OTEL_TRACES_EXPORTER``: ``otlp`` (the default), ``console`` (spans printed to stdout,
    for a look without a collector) or ``none`` (nothing exported: the session records nothing).
    A list keeps ``otlp`` if it names it; another exporter (``zipkin``...) is refused with a
    warning, and ``otlp`` is used."""
    env = os.environ if env is None else env
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    names = [n for n in names if n]
    if not names or "otlp" in names:
        kind: ExporterKind = "otlp"
    elif names == ["none"]:
        return "none"
    elif names == ["console"]:
        return "console"
    else:
        kind = "otlp"
    others = [n for n in names if n != "otlp"]
    if others:
        log_once(
            "conventions.exporter",
            "OTEL_TRACES_EXPORTER=%s: ETT exports its spans with otlp only (or console, or "
            "none alone); ignoring %s",
            env.get("OTEL_TRACES_EXPORTER", ""),
            ",".join(others),
        )
    return kind


def check_protocol(env: Mapping[str, str] | None = None) -> str:
    """``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``: ETT speaks
    ``http/protobuf``; ``grpc`` or ``http/json`` is refused with a warning (ETT then sends
    http/protobuf, which the collector takes on its HTTP port, 4318 by default). Returns the
    protocol used."""
    env = os.environ if env is None else env
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = env.get(name, "").strip().lower()
        if value:
            if value != PROTOCOL:
                log_once(
                    "conventions.protocol",
                    "%s=%s is not supported by ETT: sending OTLP over http/protobuf instead "
                    "(point the endpoint at the collector's HTTP port, 4318 by default)",
                    name,
                    value,
                )
            break
    return PROTOCOL


def keeps_every_span(provider: Any) -> bool:
    """True unless ``provider`` (an SDK ``TracerProvider``) has a sampler that may drop spans:
    anything but always-on, or parent-based with an always-on root."""
    sampler = getattr(provider, "sampler", None)
    if sampler is None:
        return True
    try:
        description = str(sampler.get_description())
    except Exception:
        return False
    return description == "AlwaysOnSampler" or description.startswith(
        "ParentBased{root:AlwaysOnSampler"
    )
