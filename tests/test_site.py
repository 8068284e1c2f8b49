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
