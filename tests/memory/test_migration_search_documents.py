"""Upgrading a database with messages in it: the search text, terms and context of every message move
from the archive's columns to memory's search documents (memory 0016, conversations 0017), the index
and its statistics are left exactly as they were and go on being kept, and going back and forward
again loses nothing. On SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from conversations.models import Message
from conversations.services import message_append, session_get_or_create
from memory.models import SearchDocument
from memory.search import search_history
from tests.test_migrations import _migrate
from textsearch.text import index_terms, join_terms, search_context

BEFORE = [
    ("memory", "0015_note_proposal_changes_and_versions_kept"),
    ("conversations", "0016_modelcall_prompt_message"),
]


def _index_state() -> dict:
    """Everything the index keeps besides the documents: the statistics, and which messages each
    indexed term (or PostgreSQL lexeme) finds."""
    state = {}
    with connection.cursor() as cursor:
        for table in ("memory_search_session", "memory_search_term"):
            # The term rows' owners come and go with memory 0017 (tests/memory/test_migration_term_owner.py).
            columns = [
                column.name
                for column in connection.introspection.get_table_description(cursor, table)
                if column.name != "user_id"
            ]
            cursor.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1, 2")
            state[table] = cursor.fetchall()
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT x.lexeme, array_agg(id ORDER BY id) FROM memory_message_search,"
                " unnest(tsvector_to_array(vector)) AS x(lexeme) GROUP BY 1 ORDER BY 1"
            )
        else:
            cursor.execute("SELECT rowid FROM memory_message_fts ORDER BY rowid")
        state["postings"] = cursor.fetchall()
    return state


def _ids(session, query: str) -> list[int]:
    return [hit.message_id for hit in search_history(session=session, query=query, limit=5)]


@pytest.mark.django_db(transaction=True)
def test_search_documents_arrive_intact_and_survive_a_round_trip(user, agent):
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    other = session_get_or_create(user=user, agent_slug="buddy", chat_id="other")
    prompt = message_append(session=session, role="user", content="When is my dentist appointment?")
    tool = message_append(
        session=session,
        role="assistant",
        content=[{"type": "tool_use", "id": "t1", "name": "calendar", "input": {"query": "dentist"}}],
    )
    message_append(
        session=session, role="user", content=[{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]
    )
    reply = message_append(session=session, role="assistant", content="With Dr. Okafor on Tuesday at 3pm. Café?")
    elsewhere = message_append(session=other, role="user", content="The lighthouse keeper retires in June.")
    documents = {row["message_id"]: row for row in SearchDocument.objects.values()}
    assert len(documents) == 5 and "dentist" in documents[reply.pk]["context"].split()
    state = _index_state()
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old_apps = _migrate(BEFORE).loader.project_state(BEFORE).apps
        assert "memory_searchdocument" not in connection.introspection.table_names()
        OldMessage = old_apps.get_model("conversations", "Message")
        for message_id, document in documents.items():  # the columns hold the documents again
            old = OldMessage.objects.get(pk=message_id)
            assert (old.search_text, old.search_terms, old.search_context) == (
                document["text"],
                document["terms"],
                document["context"],
            )
        assert _index_state() == state

        # A message written the old way, indexed by the triggers of that time.
        text = "Remind me to water the tomatoes on Tuesday."
        terms = join_terms(index_terms(text))
        written_before = OldMessage.objects.create(
            session_id=session.pk,
            role="user",
            content=[{"type": "text", "text": text}],
            tokens=12,
            is_turn_start=True,
            search_text=text,
            search_terms=terms,
            search_context=search_context(previous=documents[reply.pk]["terms"], turn_start=None),
        )
        state = _index_state()

        _migrate(after)
        assert _index_state() == state  # nothing rebuilt, nothing lost
        moved = {row["message_id"]: row for row in SearchDocument.objects.values()}
        assert {k: v for k, v in moved.items() if k != written_before.pk} == documents
        assert moved[written_before.pk]["terms"] == terms and moved[written_before.pk]["session_id"] == session.pk
        columns = {
            c.name for c in connection.introspection.get_table_description(connection.cursor(), "conversations_message")
        }
        assert not {"search_text", "search_terms", "search_context"} & columns

        _migrate(BEFORE)
        assert _index_state() == state
        _migrate(after)
        assert _index_state() == state
        assert {row["message_id"]: row for row in SearchDocument.objects.values()} == moved
    finally:
        _migrate(after)

    assert _ids(session, "tomatoes") == [written_before.pk]
    assert _ids(session, "dentist appointment")[0] in {prompt.pk, tool.pk}
    assert _ids(other, "lighthouse keeper") == [elsewhere.pk]
    # The triggers now follow the documents: a new message is indexed, a deleted one leaves the index.
    newer = message_append(session=session, role="user", content="The tomatoes need a bigger pot.")
    assert _ids(session, "tomatoes") == [newer.pk, written_before.pk]
    Message.objects.filter(pk=written_before.pk).delete()
    assert _ids(session, "tomatoes") == [newer.pk]
    with connection.cursor() as cursor:
        cursor.execute("SELECT messages, tokens FROM memory_search_session WHERE session_id = %s", [session.pk])
        assert cursor.fetchone() == (
            Message.objects.filter(session=session).count(),
            sum(Message.objects.filter(session=session).values_list("tokens", flat=True)),
        )


def _column_exists(table: str, column: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = %s", [table, column]
        )
        return cursor.fetchone() is not None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("target", "earlier_design"),
    [
        # memory 0003 on a database built with the first design: the tsvector as a generated column of
        # the message table, no side table.
        (
            ("memory", "0002_search_index"),
            [
                "DROP TABLE memory_message_search",
                "TRUNCATE memory_search_session, memory_search_term",
                "ALTER TABLE conversations_message ADD COLUMN search_vector tsvector",
            ],
        ),
        # memory 0004 on a database whose term statistics do not say where plain lists end.
        (
            ("memory", "0003_search_side_table"),
            ["ALTER TABLE memory_search_term DROP COLUMN plain_last, DROP COLUMN last_id"],
        ),
    ],
)
def test_postgres_earlier_index_designs_are_rebuilt_on_the_way_up(user, agent, target, earlier_design):
    """The frozen rebuilds of memory 0003 and 0004, on databases of their time with messages in them:
    the index is rebuilt from the archive, and after every later migration searches and appends work."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    old = message_append(session=session, role="user", content="Our lighthouse keeper retires in June.")
    message_append(session=session, role="assistant", content="Then the lighthouse needs a new keeper.")
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        _migrate([target])
        with connection.cursor() as cursor:
            for statement in earlier_design:
                cursor.execute(statement)
        _migrate(after)
    finally:
        _migrate(after)
    assert not _column_exists("conversations_message", "search_vector")
    assert _column_exists("memory_search_term", "plain_last")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_message_search")
        assert cursor.fetchone()[0] == 2
    assert _ids(session, "lighthouse keeper retiring")[0] == old.pk
    newer = message_append(session=session, role="user", content="The keeper's cottage will be sold.")
    assert _ids(session, "cottage") == [newer.pk]
