from __future__ import annotations

from django.apps import AppConfig


class AgentConfig(AppConfig):
    """The turn, its request, tool dispatch, schedules and tasks (docs/architecture.md)."""

    name = "agent"
    verbose_name = "Agent"

    def ready(self) -> None:
        # Not at the top: these modules need the models, which are not ready when apps.py is imported.
        from agent.schedules import scheduled_prompt_ids
        from conversations.selectors import scheduled_prompts_register

        scheduled_prompts_register(lookup=scheduled_prompt_ids)
