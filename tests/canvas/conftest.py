from __future__ import annotations

import pytest


@pytest.fixture
def helper_agent(db):
    from conversations.models import Agent

    agent, _ = Agent.objects.get_or_create(slug="helper", defaults={"name": "Helper", "avatar": "🦉"})
    return agent


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # PBKDF2 costs ~0.5 s per user created; these tests are about the canvas, not passwords.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
