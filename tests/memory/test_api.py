"""The read API (README, "HTTP API"): /history, /memory/stats, /chats, /agents — auth, CSRF, ownership."""

from __future__ import annotations

import pytest
from django.test import Client

from canvas.services import canvas_apply
from conversations.models import ModelCall
from conversations.services import message_append, session_get_or_create
from conversations.tokens import api_token_create
from memory.models import Summary

pytestmark = pytest.mark.django_db


@pytest.fixture
def archive(session):
    for i in range(23):
        message_append(session=session, role="user" if i % 2 == 0 else "assistant", content=f"message {i}")
    return session


def test_history_walks_the_whole_archive_exactly_once(api, archive):
    seen, before, pages = [], None, 0
    while True:
        params = {"limit": 5} | ({"before": before} if before else {})
        body = api.get("/history", params).json()
        ids = [m["id"] for m in body["messages"]]
        assert ids == sorted(ids)  # oldest first within a page
        seen = ids + seen
        pages += 1
        if body["next_before"] is None:
            break
        assert body["next_before"] == ids[0]
        before = body["next_before"]
    assert pages == 5
    assert seen == list(archive.messages.order_by("id").values_list("id", flat=True))
    first = api.get("/history", {"limit": 1, "before": seen[1]}).json()["messages"][0]
    assert first["role"] == "user" and first["content"] == [{"type": "text", "text": "message 0"}]
    assert "created_at" in first


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 501}, {"limit": "x"}, {"before": -1}])
def test_history_limits_out_of_range_are_422(api, archive, params):
    assert api.get("/history", params).status_code == 422


def test_stats_describe_archive_window_summary_canvas_and_usage(api, archive):
    canvas_apply(session=archive, command="canvas_add_card", params={"id": "a", "title": "A"})
    Summary.objects.create(session=archive, text="so far", through_message=archive.messages.first(), tokens=2)
    ModelCall.objects.create(
        session=archive,
        model="m",
        input_tokens=10,
        output_tokens=5,
        cache_read_input_tokens=7,
        cache_creation_input_tokens=50,
        cache_creation_5m_input_tokens=20,
        cache_creation_1h_input_tokens=30,
    )
    ModelCall.objects.create(session=archive, model="m", kind="summary", input_tokens=3, output_tokens=1)
    stats = api.get("/memory/stats").json()
    assert stats["total_messages"] == 23
    assert stats["total_tokens"] == sum(archive.messages.values_list("tokens", flat=True))
    assert stats["window_messages"] == 23 and stats["archived_messages"] == 0
    assert 0 < stats["window_tokens"] <= stats["total_tokens"]
    assert stats["summary"]["through_message_id"] == archive.messages.first().id
    assert stats["canvas_elements"] == 1
    assert stats["usage"] == {
        "input_tokens": 13,
        "output_tokens": 6,
        "cache_read_input_tokens": 7,
        "cache_creation_input_tokens": 50,
        "cache_creation_5m_input_tokens": 20,
        "cache_creation_1h_input_tokens": 30,
    }
    assert stats["first_message_at"] <= stats["last_message_at"]


def test_stats_read_counters_not_the_archive(api, archive):
    """The totals come from counters the search index's triggers keep, so a chat of a million messages
    answers as fast as one of a thousand: no query of /memory/stats counts or sums the messages, but
    for the few past the newest one the index holds."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        stats = api.get("/memory/stats").json()

    assert stats["total_messages"] == 23
    assert stats["total_tokens"] == sum(archive.messages.values_list("tokens", flat=True))
    scans = [
        q["sql"]
        for q in queries
        if "conversations_message" in q["sql"] and ("COUNT(" in q["sql"] or "SUM(" in q["sql"])
    ]
    assert len(scans) == 1 and '"conversations_message"."id" >' in scans[0]


def test_the_token_counter_follows_deleted_messages(api, archive):
    from agent.stats import archive_totals

    doomed = archive.messages.order_by("id")[:3]
    removed = sum(message.tokens for message in doomed)
    before = archive_totals(session=archive)
    archive.messages.filter(id__in=[message.id for message in doomed]).delete()

    assert archive_totals(session=archive) == (before[0] - 3, before[1] - removed, before[2] - 3)


def test_the_counters_are_filled_for_an_archive_from_before_them(archive):
    """memory 0009 fills the token sums of what was archived before the counter existed."""
    import importlib
    from types import SimpleNamespace

    from django.db import connection

    from agent.stats import archive_totals

    upgrade = importlib.import_module("memory.migrations.0009_session_tokens").upgrade
    expected = archive_totals(session=archive)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_search_session SET tokens = 0")
    upgrade(None, SimpleNamespace(connection=connection))  # all it uses of the schema editor

    assert archive_totals(session=archive) == expected
    assert expected[1] == sum(archive.messages.values_list("tokens", flat=True))


def test_stats_say_how_much_search_covers(api, archive, settings):
    from memory import semantic

    settings.BUDDY_SEMANTIC_SEARCH = "off"  # words are indexed as each message is written
    assert api.get("/memory/stats").json()["search_index"] == {"messages": 23, "indexed": 23}
    settings.BUDDY_SEMANTIC_SEARCH = "on"  # a message counts once its vector is written too
    assert api.get("/memory/stats").json()["search_index"] == {"messages": 23, "indexed": 0}
    semantic.vectors_update(archive.pk)
    assert api.get("/memory/stats").json()["search_index"] == {"messages": 23, "indexed": 23}


def test_stats_count_what_left_the_window(api, archive, settings):
    settings.BUDDY_WINDOW_ROWS = 10
    settings.BUDDY_WINDOW_LOW_WATER = 0.5
    stats = api.get("/memory/stats").json()
    assert stats["window_messages"] <= 10
    assert stats["archived_messages"] == 23 - stats["window_messages"] > 0


def test_chats_and_agents(api, user, archive):
    session_get_or_create(user=user, agent_slug="buddy", chat_id="second")
    chats = api.get("/chats").json()
    assert {(c["agent"], c["chat_id"], c["messages"]) for c in chats} == {("buddy", "main", 23), ("buddy", "second", 0)}
    assert api.get("/agents").json() == [{"id": "buddy", "name": "Buddy", "avatar": "🤖"}]


ENDPOINTS = ["/history", "/memory/stats", "/memory/search?q=message"]


@pytest.mark.parametrize("url", ENDPOINTS)
def test_another_users_chat_is_404_and_creates_nothing(url, other_user, archive):
    client = Client()
    client.force_login(other_user)
    response = client.get(url)
    assert response.status_code == 404 and "detail" in response.json()
    assert client.get(url + ("&" if "?" in url else "?") + "chat_id=nope").status_code == 404
    assert not other_user.buddy_sessions.exists()


@pytest.mark.parametrize("url", [*ENDPOINTS, "/chats", "/agents"])
def test_no_credentials_is_401(url, client, archive):
    assert client.get(url).status_code == 401


@pytest.mark.parametrize("url", [*ENDPOINTS, "/chats"])
def test_bearer_tokens_work_on_every_endpoint(url, client, user, archive):
    token = api_token_create(user=user)
    assert client.get(url, headers={"Authorization": f"Bearer {token}"}).status_code == 200


@pytest.mark.django_db(transaction=True)  # /prompt runs its turn on another thread and connection
def test_csrf_is_enforced_for_cookie_auth_but_not_for_bearer_tokens(user, session):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/prompt", {"text": "hi"}, content_type="application/json")
    assert response.status_code == 403
    client.get("/")  # the page sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    ok = client.post("/prompt", {"text": "hi"}, content_type="application/json", headers={"X-CSRFToken": token})
    assert ok.status_code == 200
    bearer = Client(enforce_csrf_checks=True)
    api_key = api_token_create(user=user)
    response = bearer.post(
        "/prompt", {"text": "hi"}, content_type="application/json", headers={"Authorization": f"Bearer {api_key}"}
    )
    assert response.status_code == 200


def test_stats_count_the_newest_messages_before_their_search_documents_are_written(api, archive):
    """A turn writes its search documents once its reply is out (agent.turn): until then the chat's
    totals still count its prompt and reply, and search says it does not cover them yet."""
    from conversations.services import messages_index

    prompt = message_append(session=archive, role="user", content="and the ferry times?", index_later=True)
    reply = message_append(session=archive, role="assistant", content="Every hour from nine.", index_later=True)
    stats = api.get("/memory/stats").json()
    assert stats["total_messages"] == 25 and stats["archived_messages"] >= 0
    assert stats["total_tokens"] == sum(archive.messages.values_list("tokens", flat=True))
    assert stats["search_index"] == {"messages": 25, "indexed": 23}
    messages_index(messages=[prompt, reply])
    after = api.get("/memory/stats").json()
    assert (after["total_messages"], after["total_tokens"]) == (25, stats["total_tokens"])
    assert after["search_index"] == {"messages": 25, "indexed": 25}
