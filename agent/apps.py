from __future__ import annotations

from django.apps import AppConfig


class AgentConfig(AppConfig):
    """The turn, its request, tool dispatch, schedules and tasks (docs/architecture.md)."""

    name = "agent"
    verbose_name = "Agent"
