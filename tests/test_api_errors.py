"""Hostile input on the HTTP API: never a 500, always JSON `{"detail": ...}` with the status the README
gives (401, 403, 413, 422), and an OpenAPI schema that documents each answer. Runs on SQLite and, in CI's
second run, on PostgreSQL (which refuses NUL in text: the case that used to be a 500 there)."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from agent.models import IdempotencyKey
from conversations.models import Message, Session
from conversations.services import message_append
from conversations.tokens import api_token_create, api_tokens_revoke

pytestmark = pytest.mark.django_db

SURROGATE, NUL = "x\\ud800y", "a\\u0000b"  # as they arrive in a JSON body


def post_prompt(client: Client, body: str, **headers: str):
    return client.post("/prompt", data=body, content_type="application/json", headers=headers)


@pytest.mark.parametrize(
    "body",
    [
        f'{{"text": "{SURROGATE}"}}',
        f'{{"text": "{NUL}"}}',
        f'{{"text": "hi", "agent": "{SURROGATE}"}}',
        f'{{"text": "hi", "agent": "{NUL}"}}',
        f'{{"text": "hi", "chat_id": "{SURROGATE}"}}',
        f'{{"text": "hi", "chat_id": "{NUL}"}}',
        # A canvas title through the offline model's grammar: the surrogate is in the prompt's text.
        f'{{"text": "CANVAS: [{{\\"name\\": \\"canvas_add_card\\", \\"input\\": {{\\"id\\": \\"c\\", '
        f'\\"title\\": \\"{SURROGATE}\\"}}}}]"}}',
    ],
)
def test_prompts_that_are_not_valid_unicode_or_hold_nul_are_422_and_not_archived(api, body):
    response = post_prompt(api, body)
    assert response.status_code == 422, response.content
    detail = response.json()["detail"]
    text = str(detail)
    assert "NUL" in text or "not valid Unicode" in text
    assert not Message.objects.exists() and not Session.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "/history?agent=x%00y",
        "/history?chat_id=a%00",
        "/memory/search?agent=x%00y",
        "/memory/stats?agent=x%00y",
    ],
)
def test_query_parameters_holding_nul_are_422(api, session, url):
    message_append(session=session, role="user", content="a b")
    response = api.get(url)
    assert response.status_code == 422, response.content
    assert "NUL" in str(response.json()["detail"])


def test_a_search_query_is_any_text_nul_included(api, session):
    message_append(session=session, role="user", content="a pelican")
    assert api.get("/memory/search?q=pelican%00x").status_code == 200


def test_an_idempotency_key_with_nul_is_422(api):
    # Django's test client passes the header through as given (a real server may refuse it earlier).
    response = post_prompt(api, '{"text": "hi"}', **{"Idempotency-Key": "k\x00"})
    assert response.status_code == 422 and not Message.objects.exists()


def test_a_body_over_the_upload_limit_is_413_json(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
    body = '{"text": "' + "x" * 2_700_000 + '"}'
    response = post_prompt(api, body)
    assert response.status_code == 413
    assert "larger than 2,621,440 bytes" in response.json()["detail"]
    assert not Message.objects.exists()


def test_a_body_django_itself_refuses_outside_the_api_is_413_json(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = client.post("/accounts/login/", data={"username": "a", "password": "x" * 5000})
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "larger than 1,000 bytes" in response.json()["detail"]


def test_no_credentials_on_post_prompt_is_401_not_a_csrf_403():
    client = Client(enforce_csrf_checks=True)
    response = post_prompt(client, '{"text": "hi"}')
    assert response.status_code == 401
    assert response.json()["detail"] == "Authentication credentials were not provided."


def test_a_logged_in_session_without_the_csrf_token_is_403(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = post_prompt(client, '{"text": "hi"}')
    assert response.status_code == 403 and not Message.objects.exists()


@pytest.mark.django_db(transaction=True)  # the turn runs on a worker thread, with its own connection
def test_a_revoked_or_unknown_token_is_401_saying_the_token_is_invalid(user):
    client = Client(enforce_csrf_checks=True)
    token = api_token_create(user=user)
    assert post_prompt(client, '{"text": "hi"}', Authorization=f"Bearer {token}").status_code == 200
    api_tokens_revoke(user=user)
    for value in (f"Bearer {token}", "Bearer bdy_nonsense"):
        response = post_prompt(client, '{"text": "hi"}', Authorization=value)
        assert response.status_code == 401
        assert response.json()["detail"] == "The bearer token is invalid or has been revoked."


def test_an_authorization_header_without_bearer_is_401_and_never_logged(client, user, settings, caplog):
    settings.DEBUG = True  # ninja logs such a header whole at ERROR when DEBUG is on
    token = api_token_create(user=user)
    with caplog.at_level(logging.DEBUG):
        response = client.get("/agents", headers={"Authorization": token})
    assert response.status_code == 401
    assert response.json()["detail"] == "The Authorization header must be `Bearer <token>`."
    assert token not in caplog.text and token[4:20] not in caplog.text


@pytest.mark.django_db(transaction=True)
def test_an_idempotency_key_reused_for_another_request_is_422(api):
    first = post_prompt(api, '{"text": "hello"}', **{"Idempotency-Key": "k1"})
    assert first.status_code == 200
    assert post_prompt(api, '{"text": "hello"}', **{"Idempotency-Key": "k1"}).json() == first.json()
    for body in ('{"text": "goodbye"}', '{"text": "hello", "chat_id": "other"}'):
        response = post_prompt(api, body, **{"Idempotency-Key": "k1"})
        assert response.status_code == 422
        assert "different request" in response.json()["detail"]
    assert Message.objects.count() == 2 and IdempotencyKey.objects.count() == 1


def test_the_schema_has_one_error_schema_and_every_answer_documented(api):
    schema = api.get("/api/openapi.json").json()
    schemas = schema["components"]["schemas"]
    assert "ErrorOut" in schemas and not [name for name in schemas if "Error" in name and name != "ErrorOut"]
    expected = {
        ("/prompt", "post"): {"200", "401", "403", "404", "409", "413", "422", "429", "502"},
        ("/history", "get"): {"200", "401", "404", "422"},
        ("/memory/search", "get"): {"200", "401", "404", "422"},
        ("/memory/stats", "get"): {"200", "401", "404", "422"},
        ("/chats", "get"): {"200", "401"},
        ("/agents", "get"): {"200", "401"},
    }
    for (path, method), codes in expected.items():
        responses = schema["paths"][path][method]["responses"]
        assert set(responses) == codes, path
        for code in codes - {"200"}:
            assert responses[code]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorOut")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("title", ["a\\u0000b", "x\\ud800y"], ids=["NUL", "surrogate"])
def test_a_canvas_title_the_model_writes_with_nul_or_a_surrogate_is_stored_replaced(user, title):
    """The offline model's CANVAS grammar decodes the escape: the model, not the person, writes the
    character (as a prompt-injected model could). It is archived and drawn as U+FFFD, not a 500."""
    client = Client()
    client.force_login(user)
    text = 'CANVAS: [{"name": "canvas_add_card", "input": {"id": "c", "title": "' + title + '"}}]'
    response = post_prompt(client, json.dumps({"text": text}))
    assert response.status_code == 200, response.content
    from canvas.selectors import canvas_replay_frames

    session = Session.objects.get()
    card = [f for f in canvas_replay_frames(session=session) if f["command"] == "canvas_add_card"][0]
    assert "\ufffd" in card["params"]["title"]
