"""conversations/api.py: what a client of /history, /chats and /prompt sees."""

from __future__ import annotations

import pytest

from agent.models import ScheduledPrompt, ScheduledRun
from conversations.refs import ChatRef
from conversations.services import message_append

pytestmark = pytest.mark.django_db


def test_history_says_what_started_each_turn(api, session, user, agent):
    typed = message_append(session=session, role="user", content="Plan my day")
    reply = message_append(session=session, role="assistant", content="Sure.")
    answer = message_append(session=session, role="user", content="[confirmation deploy: confirmed]")
    scheduled = message_append(session=session, role="user", content="Morning briefing")
    schedule = ScheduledPrompt.objects.create(user=user, agent=agent, text="Morning briefing")
    ScheduledRun.objects.create(schedule=schedule, due_at=schedule.created_at, prompt=scheduled)
    kinds = {message["id"]: message["kind"] for message in api.get("/history").json()["messages"]}
    assert kinds == {typed.id: "typed", reply.id: None, answer.id: "confirmation", scheduled.id: "scheduled"}


def test_a_new_chat_is_named_by_its_first_prompt_and_can_be_renamed(api, user, agent):
    from agent.submit import prompt_submit

    prompt_submit(
        user=user, text="  Plan a three-day trip to Lisbon in May\nwith museums", chat=ChatRef(chat_id="trip")
    )
    prompt_submit(user=user, text="And restaurants?", chat=ChatRef(chat_id="trip"))
    prompt_submit(user=user, text="x" * 300, chat=ChatRef(chat_id="long"))
    titles = {chat["chat_id"]: chat["title"] for chat in api.get("/chats").json()}
    assert titles["trip"] == "Plan a three-day trip to Lisbon in May"
    assert len(titles["long"]) == 60 and titles["long"].endswith("…")

    response = api.patch("/chats", {"chat_id": "trip", "title": "Lisbon"}, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["title"] == "Lisbon" and response.json()["messages"] == 4
    assert {chat["chat_id"]: chat["title"] for chat in api.get("/chats").json()}["trip"] == "Lisbon"

    for title in ["", "   ", "x" * 101]:
        response = api.patch("/chats", {"chat_id": "trip", "title": title}, content_type="application/json")
        assert response.status_code == 422, title
    response = api.patch("/chats", {"chat_id": "nope", "title": "X"}, content_type="application/json")
    assert response.status_code == 404 and response.json() == {"code": "not_found", "detail": "No such chat."}


def test_renaming_needs_the_csrf_token_with_the_session_cookie(user, session):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.patch("/chats", {"title": "Mine"}, content_type="application/json")
    assert response.status_code == 403
    session.refresh_from_db()
    assert session.title == ""


def test_unknown_chats_are_404_with_the_same_words_everywhere(api):
    for path, params in [("/history", {}), ("/memory/stats", {}), ("/memory/search", {"q": "x"})]:
        response = api.get(path, {"chat_id": "nope", **params})
        assert response.status_code == 404 and response.json() == {"code": "not_found", "detail": "No such chat."}, path


def test_memory_search_without_a_query_is_422(api, session):
    assert api.get("/memory/search").status_code == 422
    assert api.get("/memory/search", {"q": ""}).status_code == 422


def test_a_bad_bearer_token_is_told_apart_from_no_credentials(client, user, agent):
    response = client.get("/chats", HTTP_AUTHORIZATION="Bearer bdy_not-a-token")
    assert response.status_code == 401 and "token is invalid or has been revoked" in response.json()["detail"]
    response = client.get("/chats")
    assert response.status_code == 401 and response.json() == {
        "code": "not_authenticated",
        "detail": "Authentication credentials were not provided.",
    }


def test_get_prompt_is_a_json_405(api, client):
    response = api.get("/prompt")
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert response["Content-Type"].startswith("application/json") and "POST" in response.json()["detail"]
    client.logout()
    assert client.get("/prompt").status_code == 401


def test_a_chat_that_began_before_its_first_prompt_is_not_named_by_a_later_one(api, session, user):
    from agent.submit import prompt_submit

    message_append(session=session, role="user", content="Imported first line")
    message_append(session=session, role="assistant", content="Imported reply")
    prompt_submit(user=user, text="A later prompt")
    assert api.get("/chats").json()[0]["title"] == ""


BIDI_CONTROLS = [chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]


@pytest.mark.parametrize("control", BIDI_CONTROLS, ids=lambda char: f"U+{ord(char):04X}")
def test_a_title_with_a_bidi_override_or_isolate_is_refused_and_changes_nothing(api, session, control):
    """Such a character reorders what follows it: "\u202egpj.exe" shows as "exe.jpg" in the chat list."""
    session.title = "Mine"
    session.save(update_fields=["title"])
    response = api.patch("/chats", {"title": f"Invoice {control}gpj.exe"}, content_type="application/json")
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_field"
    assert [error["field"] for error in response.json()["errors"]] == ["title"]
    session.refresh_from_db()
    assert session.title == "Mine"
    # Directional marks (U+200E, U+200F) are not overrides: a right-to-left title keeps them.
    renamed = api.patch("/chats", {"title": "\u05e9\u05dc\u05d5\u05dd \u200f(1)"}, content_type="application/json")
    assert renamed.status_code == 200 and renamed.json()["title"] == "\u05e9\u05dc\u05d5\u05dd \u200f(1)"


def test_a_title_made_from_the_first_prompt_leaves_bidi_overrides_and_isolates_out(api, user, agent):
    from agent.submit import prompt_submit

    text = "Pay " + "".join(BIDI_CONTROLS) + "\u202eInvoice gpj.exe"
    prompt_submit(user=user, text=text, chat=ChatRef(chat_id="bidi"))
    title = {chat["chat_id"]: chat["title"] for chat in api.get("/chats").json()}["bidi"]
    assert title == "Pay Invoice gpj.exe"
    # The prompt itself is archived whole.
    assert api.get("/history", {"chat_id": "bidi"}).json()["messages"][0]["content"][0]["text"] == text


def test_a_title_is_checked_as_sent_as_the_schema_says(api, session):
    """1–100 characters as sent (runs of spaces are made one only after), not only spaces."""
    schema = api.get("/api/openapi.json").json()["components"]["schemas"]["ChatRenameIn"]["properties"]["title"]
    assert (schema["minLength"], schema["maxLength"]) == (1, 100) and "pattern" in schema
    assert api.patch("/chats", {"title": "a" + " " * 150 + "b"}, content_type="application/json").status_code == 422
    response = api.patch("/chats", {"title": "a" + " " * 50 + "b"}, content_type="application/json")
    assert response.status_code == 200 and response.json()["title"] == "a b"
