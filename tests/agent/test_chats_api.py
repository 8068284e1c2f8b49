"""`/chats` as a client sees it: the list, DELETE (204, 404 for another user's chat, 409 while a turn
runs, 422 for bad input) and the export download; the frames that tell open tabs."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from agent.submit import prompt_submit
from agent.turn import turn_lease_acquire
from conversations.models import Message, ModelCall, Session
from conversations.refs import ChatRef
from conversations.services import message_append, model_call_record, session_get_or_create, session_rename
from memory.notes.services import note_put
from tests.web.test_consumer import frames_until_probe, login_cookie, opened

pytestmark = pytest.mark.django_db

BAD_QUERIES = [
    ("chat_id=no%20spaces", "invalid_chat_id"),
    ("chat_id=" + "x" * 65, "invalid_chat_id"),
    ("chat_id=ok%0A", "invalid_chat_id"),
    ("agent=not%20a%20slug", "invalid_agent"),
    ("chat_id=a%00b", "invalid_chat_id"),
]


def _chat(user, chat_id: str, *texts: str, agent: str = "buddy") -> Session:
    session = session_get_or_create(user=user, agent_slug=agent, chat_id=chat_id)
    for text in texts:
        message_append(session=session, role="user", content=text)
    return session


def test_the_list_holds_every_chat_of_every_agent_newest_first_with_its_title(api, user, other_user, helper_agent):
    old = _chat(user, "old", "first")
    Message.objects.filter(session=old).update(created_at=datetime(2024, 1, 1, tzinfo=UTC))
    _chat(user, "owl", "hoot", agent="helper")
    session_rename(session=_chat(user, "new", "a", "b"), title="Newest")
    _chat(other_user, "theirs", "secret")
    chats = api.get("/chats").json()
    assert [(chat["agent"], chat["chat_id"]) for chat in chats][-1] == ("buddy", "old")
    assert {(chat["agent"], chat["chat_id"]) for chat in chats} == {
        ("buddy", "old"),
        ("helper", "owl"),
        ("buddy", "new"),
    }
    newest = next(chat for chat in chats if chat["chat_id"] == "new")
    assert newest["title"] == "Newest" and newest["messages"] == 2 and newest["last_message_at"]


def test_delete_answers_204_and_the_chat_is_gone_from_every_endpoint(api, user):
    _chat(user, "trip", "plan the trip")
    keep = _chat(user, "main", "hello")
    response = api.delete("/chats?chat_id=trip")
    assert response.status_code == 204 and response.content == b""
    assert [chat["chat_id"] for chat in api.get("/chats").json()] == ["main"]
    for path in ("/history", "/memory/stats", "/memory/notes", "/chats/export", "/memory/search?q=trip&"):
        sep = "&" if "?" in path else "?"
        response = api.get(f"{path}{sep}chat_id=trip")
        assert response.status_code == 404, path
        assert response.json()["code"] == "not_found"
    assert api.delete("/chats?chat_id=trip").status_code == 404
    assert Message.objects.filter(session=keep).count() == 1


def test_another_users_chat_is_never_found_and_never_deleted(api, other_user, user):
    theirs = _chat(other_user, "trip", "their secret")
    for method, path in (("delete", "/chats?chat_id=trip"), ("get", "/chats/export?chat_id=trip")):
        response = getattr(api, method)(path)
        assert response.status_code == 404 and response.json() == {"code": "not_found", "detail": "No such chat."}
    assert Message.objects.filter(session=theirs).count() == 1
    # The same name in the user's own chats is theirs alone to delete.
    _chat(user, "trip", "mine")
    assert api.delete("/chats?chat_id=trip").status_code == 204
    assert Message.objects.filter(session=theirs).count() == 1


@pytest.mark.parametrize(("query", "code"), BAD_QUERIES)
def test_bad_input_is_422_with_its_code_never_a_500(api, user, query, code):
    _chat(user, "main", "hello")
    for method, path in (("delete", "/chats"), ("get", "/chats/export")):
        response = getattr(api, method)(f"{path}?{query}")
        assert response.status_code == 422, (method, query)
        assert response.json()["code"] == code
    assert Message.objects.count() == 1


def test_a_chat_whose_turn_runs_is_not_deleted(api, user):
    session = _chat(user, "busy", "thinking…")
    turn_lease_acquire(session=session)
    response = api.delete("/chats?chat_id=busy")
    assert response.status_code == 409 and response.json()["code"] == "turn_running"
    assert Message.objects.filter(session=session).count() == 1


def test_delete_needs_the_csrf_token_and_a_login(user):
    _chat(user, "main", "hello")
    assert Client().delete("/chats").status_code == 401
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.delete("/chats")
    assert response.status_code == 403 and response.json()["code"] == "csrf_failed"
    assert Message.objects.count() == 1


def test_after_a_delete_a_prompt_starts_a_new_empty_chat(api, user, settings):
    settings.BUDDY_LLM = "offline"
    prompt_submit(user=user, text="first life", chat=ChatRef(chat_id="again"))
    assert api.delete("/chats?chat_id=again").status_code == 204
    prompt_submit(user=user, text="second life", chat=ChatRef(chat_id="again"))
    texts = [
        m["content"][0]["text"] for m in api.get("/history?chat_id=again").json()["messages"] if m["role"] == "user"
    ]
    assert texts == ["second life"]


def test_export_downloads_what_export_history_writes_named_after_title_and_day(api, user):
    session = _chat(user, "trip:2026", "plan the trip ✈", "and the hotel")
    Message.objects.filter(session=session).update(created_at=datetime(2026, 5, 3, 10, tzinfo=UTC))
    session_rename(session=session, title='Lisbon / "May" ✈ <trip>')
    note_put(user=user, session=session, path="/memories/trip.md", content="window seat")
    response = api.get("/chats/export?chat_id=trip:2026")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response["Content-Disposition"] == 'attachment; filename="lisbon-may-trip-2026-05-03.jsonl"'
    body = b"".join(response.streaming_content).decode()
    assert response["Content-Length"] == str(len(body.encode()))
    out = io.StringIO()
    call_command("export_history", "--user", "alice", "--chat-id", "trip:2026", stdout=out)
    assert body == out.getvalue()
    lines = [json.loads(line) for line in body.splitlines()]
    assert [line.get("role") for line in lines] == ["user", "user", None]
    assert lines[-1]["note"]["content"] == "window seat"


def test_an_export_while_the_chat_is_being_deleted_is_refused_and_while_a_turn_runs_is_not(api, user):
    from agent.chats import DELETION_MARK

    session = _chat(user, "trip", "plan the trip")
    lease_id = turn_lease_acquire(session=session)  # a turn runs: the export shows what is archived
    assert api.get("/chats/export?chat_id=trip").status_code == 200
    Session.objects.filter(pk=session.pk).update(turn_lease_id="", turn_lease_expires_at=None)
    assert lease_id
    turn_lease_acquire(session=session, lease_id=DELETION_MARK + "0" * 24)  # a deletion holds the chat
    response = api.get("/chats/export?chat_id=trip")
    assert response.status_code == 409
    assert response.json()["code"] == "conflict" and "being deleted" in response.json()["detail"]
    # A deletion cut short (its process died): its lease expires, the chat stays half deleted, and its
    # exports are refused until it is deleted again.
    Session.objects.filter(pk=session.pk).update(turn_lease_expires_at=timezone.now() - timedelta(minutes=1))
    assert api.get("/chats/export?chat_id=trip").status_code == 409
    assert api.delete("/chats?chat_id=trip").status_code == 204


def test_a_deletion_that_starts_while_an_export_is_read_stops_it(user, monkeypatch):
    """The export reads the whole chat before a byte goes out: a deletion under way meanwhile (its
    first batches already gone) makes it ChatBeingDeleted, never a file without them."""
    from functools import partial

    import agent.chats
    from agent.chats import ChatBeingDeleted, chat_delete, chat_export_lines

    session = _chat(user, "trip", *(f"message {n}" for n in range(6)))
    monkeypatch.setattr(agent.chats, "history_export", partial(agent.chats.history_export, chunk_size=2))
    lines = chat_export_lines(session=session)
    assert [json.loads(next(lines))["content"][0]["text"] for _ in range(2)] == ["message 0", "message 1"]
    chat_delete(user=user, chat=ChatRef(agent="buddy", chat_id="trip"))
    with pytest.raises(ChatBeingDeleted):
        list(lines)


def test_an_untitled_chat_exports_under_its_chat_id(api, user):
    session = _chat(user, "a.b:c", "hi")
    session.title = ""
    session.save()
    name = api.get("/chats/export?chat_id=a.b:c")["Content-Disposition"]
    assert name == f'attachment; filename="abc-{timezone.now():%Y-%m-%d}.jsonl"'


# --- the frames that tell open tabs -------------------------------------------------------------------


async def _received(socket, count: int) -> list[dict]:
    """The next `count` frames that group messages brought (they may come after a probe's answer)."""
    return [await socket.receive_json_from(timeout=10) for _ in range(count)]


@pytest.mark.django_db(transaction=True)
async def test_a_deleted_chat_tells_its_sockets_and_every_tab_of_the_user(user):
    session = await database_sync_to_async(_chat)(user, "trip", "plan the trip")
    cookie = await login_cookie(user)
    async with opened(cookie, "?chat_id=trip") as on_chat, opened(cookie, "?chat_id=main") as elsewhere:
        await frames_until_probe(on_chat)
        await frames_until_probe(elsewhere)
        client = Client()
        await database_sync_to_async(client.force_login)(user)
        response = await database_sync_to_async(client.delete)("/chats?chat_id=trip")
        assert response.status_code == 204
        deleted = {"type": "chat_deleted", "agent": "buddy", "chat_id": "trip", "detail": "This chat was deleted."}
        changed = {"type": "chats_changed", "change": "deleted", "agent": "buddy", "chat_id": "trip"}
        assert await _received(on_chat, 2) == [deleted, changed]
        assert await _received(elsewhere, 1) == [changed]
        # A replay of the deleted chat is empty.
        await on_chat.send_json_to({"type": "replay"})
        replay = await frames_until_probe(on_chat)
        assert [frame["command"] for frame in replay] == ["canvas_set_mode"]
    assert not await database_sync_to_async(Session.objects.filter(pk=session.pk).exists)()


@pytest.mark.django_db(transaction=True)
async def test_a_new_message_and_a_rename_tell_every_tab_of_the_user(user, other_user, settings):
    settings.BUDDY_LLM = "offline"
    cookie = await login_cookie(user)
    theirs = await login_cookie(other_user)
    async with opened(cookie, "?chat_id=main") as tab, opened(theirs, "?chat_id=main") as stranger:
        await frames_until_probe(tab)
        await frames_until_probe(stranger)
        await database_sync_to_async(prompt_submit)(user=user, text="hello", chat=ChatRef(chat_id="side"))
        message = {"type": "chats_changed", "change": "message", "agent": "buddy", "chat_id": "side"}
        assert await _received(tab, 1) == [message]  # once a turn, with its prompt (the rename comes next)
        client = Client()
        await database_sync_to_async(client.force_login)(user)
        response = await database_sync_to_async(client.patch)(
            "/chats", {"chat_id": "side", "title": "Side"}, content_type="application/json"
        )
        assert response.status_code == 200
        renamed = {"type": "chats_changed", "change": "renamed", "agent": "buddy", "chat_id": "side"}
        assert await _received(tab, 1) == [renamed]
        assert await frames_until_probe(stranger) == []


def test_the_admin_finds_nothing_of_a_deleted_chat_and_still_lists_its_calls(api, user, staff_user, client):
    session = _chat(user, "trip", "zebraquokka plans")
    model_call_record(session=session, kind="chat", model="claude-x", reply=None, started=0, error="zebraquokka")
    assert api.delete("/chats?chat_id=trip").status_code == 204
    client.force_login(staff_user)
    for page in ("session", "message"):
        response = client.get(f"/admin/conversations/{page}/?q=zebraquokka")
        assert response.status_code == 200 and b"zebraquokka plans" not in response.content
        assert response.context["cl"].result_count == 0, page
    calls = client.get("/admin/conversations/modelcall/")
    assert calls.status_code == 200 and b"claude-x" in calls.content and b"zebraquokka" not in calls.content
    call = ModelCall.objects.get(model="claude-x")
    assert call.user_id == user.pk and call.session_id is None
    assert client.get(f"/admin/conversations/modelcall/{call.pk}/change/").status_code == 200
