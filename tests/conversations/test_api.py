"""conversations/api.py: what a client of /history, /chats and /prompt sees."""

from __future__ import annotations

import pytest

from conversations.models import ScheduledPrompt, ScheduledRun
from conversations.services import message_append

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def test_history_says_what_started_each_turn(api, session, user, agent):
    typed = message_append(session=session, role="user", content="Plan my day")
    reply = message_append(session=session, role="assistant", content="Sure.")
    answer = message_append(session=session, role="user", content="[confirmation deploy: confirmed]")
    scheduled = message_append(session=session, role="user", content="Morning briefing")
    schedule = ScheduledPrompt.objects.create(user=user, agent=agent, text="Morning briefing")
    ScheduledRun.objects.create(schedule=schedule, due_at=schedule.created_at, prompt=scheduled)
    kinds = {message["id"]: message["kind"] for message in api.get("/history").json()["messages"]}
    assert kinds == {typed.id: "typed", reply.id: None, answer.id: "confirmation", scheduled.id: "scheduled"}
