from __future__ import annotations

import pytest


@pytest.fixture
def api(client, user):
    """The test client signed in as `user`."""
    client.force_login(user)
    return client


@pytest.fixture
def model(fake_anthropic, settings):
    """The fake Messages API, answering at once (no retries)."""
    settings.BUDDY_LLM_RETRIES = 0
    return fake_anthropic
