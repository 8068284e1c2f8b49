from __future__ import annotations

import pytest


@pytest.fixture
def helper_agent(db):
    from conversations.models import Agent

    agent, _ = Agent.objects.get_or_create(slug="helper", defaults={"name": "Helper", "avatar": "🦉"})
    return agent
