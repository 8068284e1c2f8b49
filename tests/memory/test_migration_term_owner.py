"""Upgrading a database with chats in it to the owned term rows (memory 0017): every existing term row
gets its chat's user, rows written afterwards get it by trigger, search across chats finds each user's
messages and never another's, and going back and forward again loses nothing. On SQLite and on
PostgreSQL."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from conversations.models import Session
from conversations.services import message_append, session_get_or_create
from memory.search.across import search_all_chats
from tests.test_migrations import _migrate

BEFORE = [("memory", "0016_search_documents")]


def _owners() -> dict[tuple[int, str], int | None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_id, term, user_id FROM memory_search_term")
        return {(session_id, term): user_id for session_id, term, user_id in cursor.fetchall()}


def _rows() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_id, term, df FROM memory_search_term ORDER BY 1, 2")
        return cursor.fetchall()


def _has_owner_column() -> bool:
    with connection.cursor() as cursor:
        columns = connection.introspection.get_table_description(cursor, "memory_search_term")
    return "user_id" in {column.name for column in columns}


def _chat_ids(user, query: str) -> set[str]:
    return {hit.chat_id for hit in search_all_chats(user=user, query=query)}


@pytest.mark.django_db(transaction=True)
def test_term_rows_get_their_chats_user_and_survive_a_round_trip(user, other_user, agent):
    garden = session_get_or_create(user=user, agent_slug="buddy", chat_id="garden")
    boats = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="boats")
    message_append(session=garden, role="user", content="The tomatoes in the greenhouse need water.")
    message_append(session=boats, role="user", content="The ferry to the island leaves at noon.")
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        _migrate(BEFORE)
        assert not _has_owner_column()
        # Written while the owners are not kept: the migration gives these rows theirs.
        message_append(session=garden, role="user", content="Greenhouse glass cracked in the frost.")
        message_append(session=boats, role="user", content="The island ferry was cancelled by the frost.")
        rows = _rows()
        _migrate(after)
        assert _rows() == rows
        owners = _owners()
        assert owners and set(owners.values()) == {user.pk, other_user.pk}
        assert all(
            owner == (user.pk if session_id == garden.pk else other_user.pk)
            for (session_id, _), owner in owners.items()
        )

        _migrate(BEFORE)
        assert not _has_owner_column() and _rows() == rows
        _migrate(after)
        assert _owners() == owners
    finally:
        _migrate(after)

    assert _chat_ids(user, "frost greenhouse") == {"garden"}
    assert _chat_ids(other_user, "frost ferry") == {"boats"}
    assert _chat_ids(user, "ferry island") == set()  # never another user's chat
    # New chats and new terms get their owner from the triggers.
    notes = session_get_or_create(user=user, agent_slug="buddy", chat_id="notes")
    message_append(session=notes, role="user", content="Bought a lighthouse postcard.")
    assert {owner for (session_id, _), owner in _owners().items() if session_id == notes.pk} == {user.pk}
    assert _chat_ids(user, "lighthouse") == {"notes"}


@pytest.mark.django_db
def test_a_chat_given_to_another_user_moves_its_term_rows(user, other_user):
    chat = session_get_or_create(user=user, agent_slug="buddy", chat_id="handed")
    message_append(session=chat, role="user", content="The harpsichord needs tuning.")
    assert _chat_ids(user, "harpsichord") == {"handed"}
    Session.objects.filter(pk=chat.pk).update(user=other_user)
    assert set(_owners().values()) == {other_user.pk}
    assert _chat_ids(user, "harpsichord") == set()
    assert _chat_ids(other_user, "harpsichord") == {"handed"}
    third = get_user_model().objects.create_user(username="third", password="x")
    chat.user = third
    chat.save(update_fields=["user"])
    assert _chat_ids(third, "harpsichord") == {"handed"} and _chat_ids(other_user, "harpsichord") == set()
