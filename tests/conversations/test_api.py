"""conversations/api.py: what a client of /history, /chats and /prompt sees."""

from __future__ import annotations

import pytest

from agent.models import ScheduledPrompt, ScheduledRun
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

    prompt_submit(user=user, text="  Plan a three-day trip to Lisbon in May\nwith museums", chat_id="trip")
    prompt_submit(user=user, text="And restaurants?", chat_id="trip")
    prompt_submit(user=user, text="x" * 300, chat_id="long")
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
    assert response.status_code == 404 and response.json() == {"detail": "No such chat."}


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
        assert response.status_code == 404 and response.json() == {"detail": "No such chat."}, path


def test_memory_search_without_a_query_is_422(api, session):
    assert api.get("/memory/search").status_code == 422
    assert api.get("/memory/search", {"q": ""}).status_code == 422


def test_a_bad_bearer_token_is_told_apart_from_no_credentials(client, user, agent):
    response = client.get("/chats", HTTP_AUTHORIZATION="Bearer bdy_not-a-token")
    assert response.status_code == 401 and "token is invalid or has been revoked" in response.json()["detail"]
    response = client.get("/chats")
    assert response.status_code == 401 and response.json() == {
        "detail": "Authentication credentials were not provided."
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
