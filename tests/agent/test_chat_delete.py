"""DELETE /chats: nothing of a deleted chat is left in any table of the database — every table is
listed from the database itself, so a table added later must say whether it holds chat content — while
the user's other chats, another user's chat of the same name and the chat's token counts stay."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils import timezone

from agent import chats as chats_service
from agent.models import IdempotencyKey, ScheduledPrompt, ScheduledRun
from canvas.models import CanvasState
from conversations.models import HistoryImport, Message, ModelCall, Session
from conversations.refs import ChatRef
from conversations.services import message_append, model_call_record, session_get_or_create, session_rename
from memory.models import (
    MessageVector,
    Note,
    NoteProposal,
    Summary,
    SummaryLease,
    VectorIndex,
    VectorLease,
)
from memory.notes.services import note_delete, note_put
from realtime.frames import AssistantDeltaFrame, ChatsChangedFrame
from realtime.models import RelayedFrame
from realtime.push import session_group, user_group
from textsearch.text import term_of

pytestmark = pytest.mark.django_db(transaction=True)

GONE = "zebraquokka"  # every piece of the chat that is deleted says it
KEPT = "lemurbonobo"  # the same user's other chat
OTHERS = "ocelotnarwhal"  # another user's chat (a chat of the same name: tests/agent/test_chats_api.py)

# Tables that hold no chat content, and why; every other table is one whose rows of a deleted chat must
# be gone, and is checked below by what it holds (text, the session's id, the messages' ids).
NOT_CHAT_CONTENT = {
    r"auth_.*": "users, groups and permissions",
    r"django_content_type|django_migrations|sqlite_sequence": "the schema's bookkeeping",
    r"django_session": "login sessions (Django's), not chats",
    r"django_q_.*": "the task queue: tasks name a session by id only, and find nothing once it is gone",
    r"agent_ratecounter": "how often a user prompted, per minute",
    r"conversations_agent|conversations_apitoken": "agents and API tokens",
    r"web_preferences": "a user's theme",
    r"memory_message_fts_(data|idx|config|docsize)": "FTS5's own storage of memory_message_fts, checked by MATCH",
}


def _content_tables() -> list[str]:
    tables = connection.introspection.table_names()
    return [table for table in tables if not any(re.fullmatch(rule, table) for rule in NOT_CHAT_CONTENT)]


def _fill(user, agent, *, chat_id: str, word: str) -> Session:
    """A chat with something of `word` in every table that can hold a chat's content."""
    session = session_get_or_create(user=user, agent_slug=agent.slug, chat_id=chat_id)
    session_rename(session=session, title=f"{word} trip")
    prompt = message_append(session=session, role="user", content=f"plan the {word} trip")
    tool_use = message_append(
        session=session,
        role="assistant",
        content=[{"type": "tool_use", "id": "toolu_1", "name": "search_history", "input": {"query": word}}],
    )
    message_append(
        session=session,
        role="user",
        content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": f"found {word}"}],
    )
    reply = message_append(session=session, role="assistant", content=f"The {word} trip is booked.")
    messages = [prompt, tool_use, reply]
    model_call_record(
        session=session, kind="chat", model="m", reply=None, started=0, error=f"failed on {word}", prompt=prompt
    )
    Summary.objects.create(session=session, text=f"they planned a {word} trip", through_message=reply, tokens=5)
    CanvasState.objects.create(session=session, elements=[{"id": "c", "type": "card", "title": word}], version=1)
    for message in messages:
        MessageVector.objects.create(message=message, session=session, vector=word.encode())
    VectorIndex.objects.create(session=session, indexed=len(messages))
    VectorLease.objects.create(session=session, expires_at=timezone.now())
    SummaryLease.objects.create(session=session, expires_at=timezone.now())
    note_put(user=user, session=session, path="/memories/trip.md", content=f"{word} in May", source=reply)
    note_put(user=user, session=session, path="/memories/trip.md", content=f"{word} in June")
    note_put(user=user, session=session, path="/memories/gone.md", content=f"{word} draft")
    note_delete(user=user, session=session, path="/memories/gone.md")
    NoteProposal.objects.create(
        session=session,
        element_id="memory-1",
        changes=[{"path": "/memories/profile/me.md", "expected": None, "result": word}],
        source_message=reply,
    )
    schedule = ScheduledPrompt.objects.create(
        user=user, agent=agent, chat_id=chat_id, text=f"remind me of {word}", next_run_at=timezone.now()
    )
    ScheduledRun.objects.create(schedule=schedule, due_at=timezone.now() - timedelta(hours=1), prompt=prompt)
    IdempotencyKey.objects.create(
        user=user, key=f"{word}-key", session=session, prompt=prompt, response={"reply": word}
    )
    RelayedFrame.objects.create(
        group=session_group(session), message={"type": "frame", "frame": AssistantDeltaFrame(text=word).dump()}
    )
    named = ChatsChangedFrame(change="message", agent=agent.slug, chat_id=chat_id).dump()
    RelayedFrame.objects.create(group=user_group(user.pk), message={"type": "frame", "frame": named})
    HistoryImport.objects.create(session=session, digest=f"{word}digest", messages=1)
    LogEntry.objects.create(
        user=user,
        content_type=ContentType.objects.get_for_model(Session),
        object_id=str(session.pk),
        object_repr=f"{session} {word}",
        action_flag=CHANGE,
        change_message=f"renamed to {word}",
    )
    return session


def _rows_saying(table: str, word: str) -> list[str]:
    """The columns of `table` in which some row holds `word` (any type, read as text)."""
    quote = connection.ops.quote_name
    found = []
    with connection.cursor() as cursor:
        for column in connection.introspection.get_table_description(cursor, table):
            cursor.execute(
                f"SELECT COUNT(*) FROM {quote(table)} WHERE CAST({quote(column.name)} AS TEXT) LIKE %s",
                [f"%{word}%"],
            )
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column.name}")
    return found


def _rows_pointing_at(table: str, *, session_id: int, message_ids: list[int]) -> list[str]:
    """The columns of `table` that still point at the deleted session or one of its messages: foreign
    keys to either table, and the plain id columns that name one (`session_id`, `…message_id`, the
    search side table's message `id`)."""
    quote = connection.ops.quote_name
    found = []
    with connection.cursor() as cursor:
        relations = connection.introspection.get_relations(cursor, table)
        for column in connection.introspection.get_table_description(cursor, table):
            name = column.name
            target = relations.get(name, (None, None))[1]
            if target == "conversations_session" or name == "session_id":
                ids = [session_id]
            elif (
                target == "conversations_message"
                or name.endswith("message_id")
                or (table == "memory_message_search" and name == "id")
            ):
                ids = message_ids
            else:
                continue
            marks = ", ".join(["%s"] * len(ids))
            cursor.execute(f"SELECT COUNT(*) FROM {quote(table)} WHERE {quote(name)} IN ({marks})", ids)
            if cursor.fetchone()[0]:
                found.append(f"{table}.{name}")
    return found


def _fts_rows(session: Session, word: str, message_ids: list[int] | None = None) -> int:
    """Messages the full-text index still finds for the session's term (SQLite's FTS5), or still holds
    rows of (PostgreSQL's side table), of the session's messages or of `message_ids`."""
    ids = message_ids or list(Message.objects.filter(session=session).values_list("id", flat=True))
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            term = f'"{session.pk}_{term_of(word)}"'
            cursor.execute("SELECT COUNT(*) FROM memory_message_fts WHERE memory_message_fts MATCH %s", [term])
        else:
            cursor.execute("SELECT COUNT(*) FROM memory_message_search WHERE id = ANY(%s)", [ids])
        return cursor.fetchone()[0]


def test_a_deleted_chat_leaves_nothing_in_any_table_and_the_others_keep_everything(
    user, other_user, agent, helper_agent, monkeypatch
):
    monkeypatch.setattr(chats_service, "DELETE_BATCH", 2)  # several batches, as a big chat takes
    doomed = _fill(user, agent, chat_id=GONE, word=GONE)
    kept = _fill(user, helper_agent, chat_id=KEPT, word=KEPT)
    others = _fill(other_user, agent, chat_id=OTHERS, word=OTHERS)
    message_ids = list(Message.objects.filter(session=doomed).values_list("id", flat=True))
    profile = note_put(
        user=user,
        session=None,
        path="/memories/profile/me.md",
        content="likes trains",
        source=Message.objects.get(pk=message_ids[-1]),
    )
    assert _fts_rows(doomed, GONE, message_ids) == 4
    tables = _content_tables()
    assert all(_rows_saying(table, GONE) == [] for table in ("auth_user", "django_migrations"))
    before = {table: _rows_saying(table, KEPT) + _rows_saying(table, OTHERS) for table in tables}
    assert [table for table in tables if _rows_saying(table, GONE)], "the chat's content was written somewhere"

    chats_service.chat_delete(user=user, chat=ChatRef(agent="buddy", chat_id=GONE))

    for table in tables:
        assert _rows_saying(table, GONE) == [], f"{table} still holds the deleted chat's text"
        assert _rows_pointing_at(table, session_id=doomed.pk, message_ids=message_ids) == []
        assert _rows_saying(table, KEPT) + _rows_saying(table, OTHERS) == before[table], f"{table} lost another chat"
    assert _fts_rows(doomed, GONE, message_ids) == 0
    assert _fts_rows(kept, KEPT) == 4 == _fts_rows(others, OTHERS)
    assert not Session.objects.filter(pk=doomed.pk).exists()
    assert Message.objects.filter(session=kept).count() == 4 == Message.objects.filter(session=others).count()
    # The calls' token counts stay for cost reporting, with nothing of the chat.
    call = ModelCall.objects.get(user=user, session=None)
    assert (call.error, call.prompt_message_id, call.kind) == ("", None, "chat")
    # The profile note is the user's: it stays, without its link to a deleted message.
    profile.refresh_from_db()
    assert (profile.content, profile.source_message_id) == ("likes trains", None)
    assert Note.objects.filter(session=kept).count() == 1
    assert ScheduledPrompt.objects.filter(text__contains=KEPT).count() == 1


def test_every_table_of_the_database_is_either_checked_or_said_to_hold_no_chat_content():
    """A new table is checked by the test above unless NOT_CHAT_CONTENT says why it holds nothing of a
    chat; this one makes sure the rules there still match tables that exist."""
    tables = connection.introspection.table_names()
    for rule in NOT_CHAT_CONTENT:
        if rule.startswith("memory_message_fts") and connection.vendor != "sqlite":
            continue
        if "sqlite_sequence" in rule and connection.vendor != "sqlite":
            continue
        assert any(re.fullmatch(rule, table) for table in tables), f"no table matches {rule!r}: drop it"
    assert {"conversations_message", "memory_note", "canvas_canvasstate", "realtime_relayedframe"} <= set(
        _content_tables()
    )


def test_a_batch_whose_commit_meets_a_row_written_meanwhile_is_deleted_again(user, agent):
    """A turn writes its search documents right after it has answered and let the chat's lease go: on
    PostgreSQL a deletion batch running then may fail its commit on them (IntegrityError). The batch is
    deleted again, and then sees them."""
    from django.db import IntegrityError

    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    for n in range(3):
        message_append(session=session, role="user", content=f"message {n}")
    attempts = []

    def delete(ids):
        attempts.append(list(ids))
        Message.objects.filter(pk__in=ids).delete()
        if len(attempts) == 1:
            raise IntegrityError("a search document written meanwhile refers to a deleted message")

    chats_service._in_batches(Message.objects.filter(session=session), action=delete)
    assert len(attempts) == 2 and attempts[0] == attempts[1] and not Message.objects.exists()

    def never(ids):
        raise IntegrityError("always")

    message_append(session=session, role="user", content="kept")
    with pytest.raises(IntegrityError):
        chats_service._in_batches(Message.objects.filter(session=session), action=never)
    assert Message.objects.count() == 1
