import pytest

pytestmark = pytest.mark.django_db


def test_default_agent_exists_after_migrations(agent):
    assert agent.name == "Buddy"
