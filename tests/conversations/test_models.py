from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from conversations.content import estimate_tokens
from conversations.models import Agent, Message, ModelCall, Session
from conversations.refs import InvalidChatId
from conversations.services import message_append, session_get_or_create
from memory.apps import _search_triggers_ensure

pytestmark = pytest.mark.django_db


def test_one_session_per_user_agent_and_chat(user, agent):
    Session.objects.create(user=user, agent=agent, chat_id="main")
    with pytest.raises(IntegrityError), transaction.atomic():
        Session.objects.create(user=user, agent=agent, chat_id="main")


def test_same_chat_id_is_a_different_session_for_another_user(user, other_user, agent):
    mine = session_get_or_create(user=user, agent_slug=None, chat_id=None)
    theirs = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="main")
    assert mine.pk != theirs.pk
    assert (mine.agent.slug, mine.chat_id) == ("buddy", "main")


def test_empty_chat_id_is_refused_by_the_database(user, agent):
    with pytest.raises(IntegrityError), transaction.atomic():
        Session.objects.create(user=user, agent=agent, chat_id="")


@pytest.mark.parametrize("chat_id", ["has space", "x" * 65, "slash/no", "ümlaut"])
def test_chat_id_outside_the_contract_alphabet_is_invalid(user, chat_id):
    with pytest.raises(InvalidChatId):
        session_get_or_create(user=user, agent_slug="buddy", chat_id=chat_id)
    with pytest.raises(ValidationError):  # the model holds the same rule
        Session(user=user, agent=Agent.objects.get(slug="buddy"), chat_id=chat_id).full_clean()


def test_message_role_is_checked_by_the_database(session):
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(session=session, role="system", content=[], tokens=0, is_turn_start=False)


def test_message_facts_are_computed_once_on_write(session):
    blocks = [{"type": "text", "text": "héllo wörld"}]
    message = message_append(session=session, role="user", content=blocks)
    message.refresh_from_db()
    assert message.tokens == estimate_tokens(blocks)
    assert message.is_turn_start is True
    assert "héllo wörld" in message.search_document.text  # indexed with it (memory)
    tool_result = message_append(
        session=session,
        role="user",
        content=[{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}, {"type": "text", "text": "x"}],
    )
    assert tool_result.is_turn_start is False
    assert message_append(session=session, role="assistant", content="hi").is_turn_start is False


def test_plain_string_content_is_archived_as_one_text_block(session):
    message = message_append(session=session, role="user", content="hello")
    assert message.content == [{"type": "text", "text": "hello"}]


def test_token_estimate_follows_the_contract_formula():
    content = [{"type": "text", "text": "ab"}]
    # '[{"type":"text","text":"ab"}]' is 29 characters → ceil(29 / 4) = 8
    assert estimate_tokens(content) == 8
    assert estimate_tokens([{"type": "text", "text": "é" * 10}]) == estimate_tokens(
        [{"type": "text", "text": "e" * 10}]
    )


@pytest.mark.django_db(transaction=True)
def test_cache_writes_recorded_before_lifetimes_count_as_5_minute_ones(session):
    before = [("conversations", "0007_import_records_and_rate_counters")]
    executor = MigrationExecutor(connection)
    after = executor.loader.graph.leaf_nodes()  # every app back at its newest migration
    executor.migrate(before)
    try:
        executor.loader.build_graph()
        OldModelCall = executor.loader.project_state(before).apps.get_model("conversations", "ModelCall")
        OldModelCall.objects.create(session_id=session.pk, model="m", cache_creation_input_tokens=1500)
        OldModelCall.objects.create(session_id=session.pk, model="m", cache_creation_input_tokens=0)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        # As `migrate` does after every run: SQLite dropped the search index's triggers on the tables
        # the schema editor rebuilt.
        _search_triggers_ensure()

    assert sorted(
        ModelCall.objects.values_list("cache_creation_5m_input_tokens", "cache_creation_1h_input_tokens")
    ) == [
        (0, 0),
        (1500, 0),
    ]
