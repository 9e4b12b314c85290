"""The HTTP service: OTLP/HTTP in, the read API out, health and metrics."""

from ._app import create_app

__all__ = ["create_app"]
