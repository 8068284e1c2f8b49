"""Upgrading a database with model calls in it: each chat call of the release before is matched to the
prompt of the turn it served (the latest turn start of its chat written before it); summary calls to none."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from conversations.models import ModelCall
from conversations.services import message_append, session_get_or_create
from memory.apps import _search_triggers_ensure

BEFORE = [("conversations", "0013_session_summary_lease_to_memory")]


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    _search_triggers_ensure()  # as `migrate` does after every run (SQLite drops them on rebuilt tables)
    return executor


@pytest.mark.django_db(transaction=True)
def test_calls_made_before_the_upgrade_find_the_turn_they_served(user, agent):
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    other = session_get_or_create(user=user, agent_slug="buddy", chat_id="other")
    start = timezone.now() - timedelta(hours=1)
    first = message_append(session=session, role="user", content="first prompt")
    reply = message_append(session=session, role="assistant", content="first reply")
    second = message_append(session=session, role="user", content="second prompt")
    elsewhere = message_append(session=other, role="user", content="a prompt in another chat")
    for minutes, message in enumerate((first, reply, second, elsewhere)):
        type(message).objects.filter(pk=message.pk).update(created_at=start + timedelta(minutes=10 * minutes))
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old_apps = _migrate(BEFORE).loader.project_state(BEFORE).apps
        OldCall = old_apps.get_model("conversations", "ModelCall")

        def call(chat, minutes: int, kind: str = "chat"):
            return OldCall.objects.create(
                session_id=chat.pk, kind=kind, model="m", created_at=start + timedelta(minutes=minutes)
            )

        calls = {
            "first": call(session, 5),
            "second": call(session, 25),
            "summary": call(session, 26, kind="summary"),
            "before any": call(other, 0),
        }
        _migrate(after)
    finally:
        _migrate(after)
    found = {name: ModelCall.objects.get(pk=call.pk).prompt_message_id for name, call in calls.items()}
    assert found == {"first": first.pk, "second": second.pk, "summary": None, "before any": None}
