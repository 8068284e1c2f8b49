"""Hostile and wrong input on the HTTP API: never a 500 for bad input, always JSON `{"code", "detail"}` (a
422 adds `errors` naming the fields as the client sent them) with the status the README gives, the same
bad input answered the same way on every endpoint, and an OpenAPI schema that documents each answer.
Runs on SQLite and, in CI's second run, on PostgreSQL (which refuses NUL in text)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import get_args

import pytest
from django.test import Client

from agent.models import IdempotencyKey
from buddy.api import FRAMEWORK_ERRORS, error_status
from conversations.errors import DomainError
from conversations.models import Message, Session
from conversations.schemas import ErrorCode
from conversations.services import message_append, session_get_or_create
from conversations.tokens import api_token_create, api_tokens_revoke

pytestmark = pytest.mark.django_db

SURROGATE, NUL = "x\\ud800y", "a\\u0000b"  # as they arrive in a JSON body
README = Path(__file__).resolve().parent.parent / "README.md"


def post_prompt(client: Client, body: str, **headers: str):
    return client.post("/prompt", data=body, content_type="application/json", headers=headers)


def assert_error(response, status: int, code: str) -> dict:
    """The one error shape: `code` and `detail`, plus `errors` exactly on a 422."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code and isinstance(body["detail"], str) and body["detail"], body
    assert set(body) == ({"code", "detail", "errors"} if status == 422 else {"code", "detail"}), body
    return body


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (f'{{"text": "{SURROGATE}"}}', "invalid_field", "text"),
        (f'{{"text": "{NUL}"}}', "invalid_field", "text"),
        (f'{{"text": "hi", "agent": "{SURROGATE}"}}', "invalid_agent", "agent"),
        (f'{{"text": "hi", "agent": "{NUL}"}}', "invalid_agent", "agent"),
        (f'{{"text": "hi", "chat_id": "{SURROGATE}"}}', "invalid_chat_id", "chat_id"),
        (f'{{"text": "hi", "chat_id": "{NUL}"}}', "invalid_chat_id", "chat_id"),
        # A canvas title through the offline model's grammar: the surrogate is in the prompt's text.
        (
            f'{{"text": "CANVAS: [{{\\"name\\": \\"canvas_add_card\\", \\"input\\": {{\\"id\\": \\"c\\", '
            f'\\"title\\": \\"{SURROGATE}\\"}}}}]"}}',
            "invalid_field",
            "text",
        ),
    ],
)
def test_prompts_that_are_not_valid_unicode_or_hold_nul_are_422_and_not_archived(api, body, code, field):
    error = assert_error(post_prompt(api, body), 422, code)
    assert [item["field"] for item in error["errors"]] == [field]
    if field == "text":
        assert "NUL" in error["detail"] or "not valid Unicode" in error["detail"]
    assert not Message.objects.exists() and not Session.objects.exists()


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("/history?agent=x%00y", "invalid_agent"),
        ("/history?chat_id=a%00", "invalid_chat_id"),
        ("/memory/search?q=x&agent=x%00y", "invalid_agent"),
        ("/search?q=x&agent=x%00y", "invalid_agent"),
        ("/search?q=x%00y", "invalid_field"),
        ("/memory/stats?agent=x%00y", "invalid_agent"),
        ("/memory/notes?chat_id=a%00", "invalid_chat_id"),
    ],
)
def test_query_parameters_holding_nul_are_422(api, session, url, code):
    message_append(session=session, role="user", content="a b")
    assert_error(api.get(url), 422, code)


# One chat named in each endpoint's own way: (method, path, how it takes the chat, extra fields).
CHAT_ENDPOINTS = [
    ("post", "/prompt", "body", {"text": "hi"}),
    ("get", "/history", "query", {}),
    ("get", "/memory/search", "query", {"q": "x"}),
    ("get", "/memory/stats", "query", {}),
    ("patch", "/chats", "body", {"title": "New name"}),
    ("get", "/memory/notes", "query", {}),
    ("put", "/memory/notes", "body", {"scope": "chat", "path": "/memories/a.md", "content": "x"}),
    ("delete", "/memory/notes", "query", {"scope": "chat", "path": "/memories/a.md"}),
    ("get", "/memory/notes/versions", "query", {"scope": "chat", "path": "/memories/a.md"}),
]


def call(client: Client, method: str, path: str, where: str, fields: dict):
    if where == "body":
        return getattr(client, method)(path, data=json.dumps(fields), content_type="application/json")
    return getattr(client, method)(path, query_params=fields)


@pytest.mark.parametrize(("method", "path", "where", "extra"), CHAT_ENDPOINTS, ids=lambda value: str(value))
def test_an_invalid_chat_id_is_422_invalid_chat_id_on_every_endpoint(api, session, method, path, where, extra):
    for chat_id in ("no spaces", "x" * 65, "semi;colon", "main\n"):  # a trailing newline is no chat id either
        error = assert_error(call(api, method, path, where, {**extra, "chat_id": chat_id}), 422, "invalid_chat_id")
        assert error["errors"][0]["field"] == "chat_id"
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)  # POST /prompt's turn runs on a worker thread
@pytest.mark.parametrize(("method", "path", "where", "extra"), CHAT_ENDPOINTS, ids=lambda value: str(value))
def test_an_unknown_chat_or_agent_is_404_not_found_on_every_endpoint(api, user, other_user, method, path, where, extra):
    theirs = session_get_or_create(user=other_user, agent_slug="buddy", chat_id="secret")
    message_append(session=theirs, role="user", content="Bob's secret")
    answers = []
    cases = [{"agent": "nobody"}]
    if path != "/prompt":  # a prompt creates its chat: only its agent can be unknown
        cases += [{"chat_id": "nope"}, {"chat_id": "secret"}]  # missing, and another user's
    for chat in cases:
        answers.append(assert_error(call(api, method, path, where, {**extra, **chat}), 404, "not_found"))
    if path != "/prompt":
        assert answers[1] == answers[2] == {"code": "not_found", "detail": "No such chat."}  # nothing revealed
    assert not Session.objects.filter(user=user).exists()


def test_a_422_names_the_fields_as_the_client_sent_them(api, session):
    error = assert_error(post_prompt(api, '{"text": "", "chat_id": "ok"}'), 422, "invalid_field")
    assert [item["field"] for item in error["errors"]] == ["text"]
    error = assert_error(post_prompt(api, '{"chat_id": "ok"}'), 422, "invalid_field")
    assert error["errors"] == [{"field": "text", "message": "Field required"}]
    error = assert_error(api.get("/history", {"limit": "0"}), 422, "invalid_field")
    assert [item["field"] for item in error["errors"]] == ["limit"]
    error = assert_error(post_prompt(api, '"just a string"'), 422, "invalid_field")
    assert error["errors"] == [{"field": None, "message": "The body must be a JSON object."}]  # the whole body
    # Not an object, so not a rename: ninja alone would read `title` off the string (str.title()).
    renamed = api.patch("/chats", data='"just a string"', content_type="application/json")
    assert_error(renamed, 422, "invalid_field")
    session.refresh_from_db()
    assert session.title == ""
    for body in (post_prompt(api, '{"text": ""}').content, api.get("/history", {"limit": "x"}).content):
        assert b"payload" not in body and b'"body"' not in body and b'"query"' not in body


def test_a_body_that_is_not_json_is_422_invalid_json(api):
    error = assert_error(post_prompt(api, '{"text": '), 422, "invalid_json")
    assert error["errors"] == [{"field": None, "message": "The request body is not valid JSON."}]


def test_a_search_query_is_any_text_nul_included(api, session):
    message_append(session=session, role="user", content="a pelican")
    assert api.get("/memory/search?q=pelican%00x").status_code == 200


def test_an_idempotency_key_with_nul_is_422(api):
    # Django's test client passes the header through as given (a real server may refuse it earlier).
    error = assert_error(
        post_prompt(api, '{"text": "hi"}', **{"Idempotency-Key": "k\x00"}), 422, "invalid_idempotency_key"
    )
    assert error["errors"][0]["field"] == "Idempotency-Key"
    assert not Message.objects.exists()


def test_a_body_over_the_upload_limit_is_413_json(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
    body = '{"text": "' + "x" * 2_700_000 + '"}'
    error = assert_error(post_prompt(api, body), 413, "too_large")
    assert "larger than 2,621,440 bytes" in error["detail"]
    assert not Message.objects.exists()


def test_a_body_django_itself_refuses_outside_the_api_is_413_json(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    error = assert_error(
        client.post("/accounts/login/", data={"username": "a", "password": "x" * 5000}), 413, "too_large"
    )
    assert "larger than 1,000 bytes" in error["detail"]


def test_no_credentials_on_post_prompt_is_401_not_a_csrf_403():
    client = Client(enforce_csrf_checks=True)
    response = post_prompt(client, '{"text": "hi"}')
    error = assert_error(response, 401, "not_authenticated")
    assert error["detail"] == "Authentication credentials were not provided."
    assert response["WWW-Authenticate"] == 'Bearer realm="buddy"'


def test_a_logged_in_session_without_the_csrf_token_is_403_json(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert_error(post_prompt(client, '{"text": "hi"}'), 403, "csrf_failed")
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)  # the turn runs on a worker thread, with its own connection
def test_a_revoked_or_unknown_token_is_401_saying_the_token_is_invalid(user):
    client = Client(enforce_csrf_checks=True)
    token = api_token_create(user=user)
    assert post_prompt(client, '{"text": "hi"}', Authorization=f"Bearer {token}").status_code == 200
    api_tokens_revoke(user=user)
    for value in (f"Bearer {token}", "Bearer bdy_nonsense"):
        error = assert_error(post_prompt(client, '{"text": "hi"}', Authorization=value), 401, "not_authenticated")
        assert error["detail"] == "The bearer token is invalid or has been revoked."


def test_an_authorization_header_without_bearer_is_401_and_never_logged(client, user, settings, caplog):
    settings.DEBUG = True  # ninja logs such a header whole at ERROR when DEBUG is on
    token = api_token_create(user=user)
    with caplog.at_level(logging.DEBUG):
        response = client.get("/agents", headers={"Authorization": token})
    assert (
        assert_error(response, 401, "not_authenticated")["detail"]
        == "The Authorization header must be `Bearer <token>`."
    )
    assert token not in caplog.text and token[4:20] not in caplog.text


@pytest.mark.django_db(transaction=True)
def test_an_idempotency_key_reused_for_another_request_is_422(api):
    first = post_prompt(api, '{"text": "hello"}', **{"Idempotency-Key": "k1"})
    assert first.status_code == 200
    assert post_prompt(api, '{"text": "hello"}', **{"Idempotency-Key": "k1"}).json() == first.json()
    for body in ('{"text": "goodbye"}', '{"text": "hello", "chat_id": "other"}'):
        error = assert_error(post_prompt(api, body, **{"Idempotency-Key": "k1"}), 422, "invalid_idempotency_key")
        assert "different request" in error["detail"]
    assert Message.objects.count() == 2 and IdempotencyKey.objects.count() == 1


def test_other_methods_are_a_json_405_that_lists_only_what_the_endpoint_answers(api, client):
    schema = api.get("/api/openapi.json").json()
    for path, operations in schema["paths"].items():
        allowed = ", ".join(sorted(method.upper() for method in operations))
        for method in ("options", "put", "trace") if path == "/prompt" else ("options",):
            response = api.generic(method.upper(), path)
            assert_error(response, 405, "method_not_allowed")
            assert response["Allow"] == allowed, path
    response = api.get("/prompt")
    assert response["Allow"] == "POST" and "POST" in assert_error(response, 405, "method_not_allowed")["detail"]
    client.logout()
    assert_error(client.get("/prompt"), 401, "not_authenticated")  # no credentials: 401 whatever the method


@pytest.mark.django_db(transaction=True)
def test_an_unexpected_failure_in_a_turn_is_a_json_500_and_logged(api, monkeypatch, caplog):
    import agent.turn

    def broken(**kwargs):
        raise RuntimeError("a bug in the turn")

    monkeypatch.setattr(agent.turn, "_turn_loop", broken)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = post_prompt(api, '{"text": "hi"}')
    assert_error(response, 500, "internal_error")
    assert "a bug in the turn" not in response.content.decode()  # no traceback leaks to the client
    assert "a bug in the turn" in caplog.text


def test_the_schema_has_one_error_schema_with_its_codes_and_every_answer_documented(api):
    schema = api.get("/api/openapi.json").json()
    schemas = schema["components"]["schemas"]
    assert not [name for name in schemas if "Error" in name and name not in {"ErrorOut", "FieldErrorOut"}]
    assert set(schemas["ErrorOut"]["required"]) == {"code", "detail"}
    assert set(schemas["ErrorOut"]["properties"]["code"]["enum"]) == set(get_args(ErrorCode))
    assert set(schemas["FieldErrorOut"]["properties"]) == {"field", "message"}
    expected = {
        ("/prompt", "post"): {"200", "401", "403", "404", "409", "413", "422", "429", "502"},
        ("/history", "get"): {"200", "401", "404", "422"},
        ("/memory/search", "get"): {"200", "401", "404", "422"},
        ("/search", "get"): {"200", "401", "404", "422"},
        ("/memory/stats", "get"): {"200", "401", "404", "422"},
        ("/chats", "get"): {"200", "401"},
        ("/chats", "patch"): {"200", "401", "403", "404", "413", "422"},
        ("/agents", "get"): {"200", "401"},
    }
    for (path, method), codes in expected.items():
        responses = schema["paths"][path][method]["responses"]
        assert set(responses) == codes, path
        for code in codes - {"200"}:
            assert responses[code]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorOut")


def _domain_errors() -> set[type[DomainError]]:
    import web.consumers  # noqa: F401  (every app's exceptions imported)

    found, pending = set(), [DomainError]
    while pending:
        for kind in pending.pop().__subclasses__():
            found.add(kind)
            pending.append(kind)
    return found


def test_the_readme_lists_every_code_with_its_status_and_the_schema_the_same_codes():
    section = README.read_text().split("## HTTP API", 1)[1].split("\n## ", 1)[0]
    listed = {(code, int(status)) for code, status in re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", section, re.M)}
    answered = set(FRAMEWORK_ERRORS.items())
    socket_only = set()
    for kind in filter(lambda kind: hasattr(kind, "code"), _domain_errors()):
        status = error_status(kind)
        if status is None:
            socket_only.add(kind.__name__)
        else:
            answered.add((kind.code, status))
    assert socket_only == {"LoginNoLongerValid"}  # the socket's own (realtime.frames)
    assert listed == answered
    assert {code for code, _ in listed} == set(get_args(ErrorCode))


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
    from canvas.selectors import canvas_replay

    session = Session.objects.get()
    card = [change for change in canvas_replay(session=session) if change.command == "canvas_add_card"][0]
    assert "\ufffd" in card.params["title"]
