"""The HTTP API: one router module per surface, built into an app by ``create_app``."""

from citewell.api.app import create_app

__all__ = ["create_app"]
