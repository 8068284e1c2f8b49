from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    """The transports: the page, the chat WebSocket consumer and its routing (docs/architecture.md)."""

    name = "web"
    verbose_name = "Web"
