from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_auth(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_healthz_reports_a_failing_channel_layer(client, settings):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}
    }
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    try:
        response = client.get("/healthz")
    finally:
        channel_layers.backends.clear()
    assert response.status_code == 503
    assert response.json()["failing"] == ["channel layer"]


def test_api_docs_are_served_without_a_cdn(client):
    response = client.get("/api/docs")
    assert response.status_code == 200
    page = response.content.decode()
    assert "cdn" not in page.lower() and "/static/ninja/" in page
    assert client.get("/api/openapi.json").json()["info"]["title"] == "Buddy API"


def test_login_page_is_served_and_index_needs_login(client):
    assert client.get("/accounts/login/").status_code == 200
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_api_without_credentials_is_401(client):
    response = client.get("/agents")
    assert response.status_code == 401
    assert "detail" in response.json()


def test_bearer_token_authenticates_and_revocation_ends_it(client, user):
    from conversations.tokens import api_token_create, api_tokens_revoke

    token = api_token_create(user=user)
    response = client.get("/agents", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.json() == [{"id": "buddy", "name": "Buddy", "avatar": "🤖"}]
    assert client.get("/agents", headers={"Authorization": "Bearer wrong"}).status_code == 401
    api_tokens_revoke(user=user)
    assert client.get("/agents", headers={"Authorization": f"Bearer {token}"}).status_code == 401


@pytest.mark.django_db(transaction=True)
async def test_the_server_answers_healthz_before_django_whatever_the_host():
    """buddy.asgi answers /healthz itself: no middleware, and a load balancer may probe by address."""
    from channels.testing import HttpCommunicator

    from buddy.asgi import application

    probe = HttpCommunicator(application, "GET", "/healthz", headers=[(b"host", b"10.0.0.7:8000")])
    response = await probe.get_response(timeout=10)
    assert response["status"] == 200
    assert json.loads(response["body"]) == {"status": "ok"}


@pytest.mark.django_db(transaction=True)
async def test_a_bearer_prompt_crosses_from_the_loop_to_its_request_thread_once(model, user, monkeypatch):
    """buddy/handlers.py: the middleware chain and the view run in one call on the request's thread (no
    trip back to the loop in between), the turn on a turn thread, and its frames go through the loop
    (realtime.push.group_sends_handed_off) although the view never touched it."""
    import asyncio
    import threading

    from asgiref import sync
    from channels.testing import HttpCommunicator

    from agent import api as agent_api
    from buddy.asgi import application
    from conversations.tokens import api_token_create
    from realtime import push

    token = await sync.sync_to_async(api_token_create)(user=user)
    monkeypatch.setattr(push, "_handoff", None)
    trips = {"to a thread": 0, "to the loop": 0}
    to_thread, to_loop = sync.SyncToAsync.__call__, sync.AsyncToSync.__call__

    async def counted_to_thread(self, *args, **kwargs):
        trips["to a thread"] += 1
        return await to_thread(self, *args, **kwargs)

    def counted_to_loop(self, *args, **kwargs):
        trips["to the loop"] += 1
        return to_loop(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counted_to_thread)
    monkeypatch.setattr(sync.AsyncToSync, "__call__", counted_to_loop)
    threads = {}
    real_submit = agent_api.prompt_submit

    def prompt_submit(**kwargs):
        threads["turn"] = threading.current_thread().name
        return real_submit(**kwargs)

    monkeypatch.setattr(agent_api, "prompt_submit", prompt_submit)
    body = json.dumps({"text": "hello", "chat_id": "one-trip"}).encode()
    headers = [
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"host", b"testserver"),
    ]
    response = await HttpCommunicator(application, "POST", "/prompt", body=body, headers=headers).get_response(30)
    assert response["status"] == 200, response["body"]
    assert json.loads(response["body"])["chat_id"] == "one-trip"
    assert dict(response["headers"])[b"X-Frame-Options"] == b"DENY"  # the middleware still ran
    # request_started's receivers, then the middleware chain with the view (and maybe response.close).
    assert trips["to the loop"] == 0
    assert trips["to a thread"] <= 3
    assert threads["turn"].startswith("buddy-turn")
    assert push._handoff is not None and push._handoff.loop is asyncio.get_running_loop()


@pytest.mark.django_db(transaction=True)
async def test_requests_run_on_threads_that_outlive_them_and_keep_their_connection(user, monkeypatch):
    """buddy/handlers.py: one request after another is served by the same long-lived request thread,
    which keeps its database connection (SQLite) or borrows one from psycopg's pool each time
    (PostgreSQL) — never a thread and a new connection made for every request."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from asgiref import sync
    from channels.testing import HttpCommunicator
    from django.db import connection, connections
    from django.db.backends.signals import connection_created

    from buddy import handlers
    from buddy.asgi import application
    from conversations.tokens import api_token_create

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="buddy-request")
    monkeypatch.setattr(handlers, "request_executor", lambda: executor)
    token = await sync.sync_to_async(api_token_create)(user=user)
    if connection.vendor == "sqlite":  # the test process closes its connections after use (tests/settings.py)
        monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 600)
    opened: list[str] = []

    def on_connection_created(sender, **kwargs):
        opened.append(threading.current_thread().name)

    connection_created.connect(on_connection_created)
    try:
        for _ in range(5):
            headers = [(b"authorization", f"Bearer {token}".encode()), (b"host", b"testserver")]
            response = await HttpCommunicator(application, "GET", "/chats", headers=headers).get_response(30)
            assert response["status"] == 200, response["body"]
    finally:
        connection_created.disconnect(on_connection_created)
        executor.submit(connections.close_all).result()  # the one request thread's
        executor.shutdown()
    assert len(set(opened)) == 1 and opened[0].startswith("buddy-request"), opened
    if connection.vendor == "sqlite":
        assert len(opened) == 1  # kept (BUDDY_DB_CONN_MAX_AGE)
