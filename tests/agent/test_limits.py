"""Rate limits (README, Limits): prompts per user per minute over HTTP and the WebSocket together."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client

from agent.limits import RateLimited, prompt_rate_check, rate_record
from conversations.models import Message, Session
from tests.web.test_consumer import login_cookie, opened
from tests.web.test_consumer_turns import frames_until

pytestmark = pytest.mark.django_db(transaction=True)


def prompt(client: Client, text: str):
    return client.post("/prompt", data={"text": text}, content_type="application/json")


def test_prompts_over_the_per_minute_limit_are_429_with_retry_after(client, user, settings):
    settings.BUDDY_PROMPTS_PER_MINUTE = 3
    client.force_login(user)
    assert [prompt(client, f"p{i}").status_code for i in range(3)] == [200, 200, 200]
    refused = prompt(client, "one too many")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "at most 3 a minute" in refused.json()["detail"]
    assert Message.objects.filter(role="user").count() == 3  # the refused prompt is not archived
    to_a_new_chat = client.post("/prompt", data={"text": "x", "chat_id": "new"}, content_type="application/json")
    assert to_a_new_chat.status_code == 429
    assert not Session.objects.filter(chat_id="new").exists()  # nor does it create a chat


def test_the_limit_is_per_user(client, user, other_user, settings):
    settings.BUDDY_PROMPTS_PER_MINUTE = 1
    client.force_login(user)
    assert prompt(client, "mine").status_code == 200
    assert prompt(client, "again").status_code == 429
    client.force_login(other_user)
    assert prompt(client, "theirs").status_code == 200


async def test_the_same_limit_over_the_websocket_is_a_rate_limited_error_frame(client, user, agent, settings):
    settings.BUDDY_PROMPTS_PER_MINUTE = 1
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "prompt", "text": "first"})
        await frames_until(tab, "assistant_message")
        await tab.send_json_to({"type": "prompt", "text": "second"})
        frames = await frames_until(tab, "error")
        assert frames[-1]["code"] == "rate_limited"
        assert "Try again in" in frames[-1]["detail"]
        await tab.send_json_to({"type": "replay"})  # the socket stays open
        while (frame := await tab.receive_json_from(timeout=10))["type"] != "canvas_command":
            assert frame["type"] == "chats_changed"  # the first turn's, which may come after the refusal


def test_counters_are_per_fixed_window(user):
    minute = datetime(2026, 11, 24, 10, 0, 5, tzinfo=UTC)
    assert [rate_record(key="k", period=60, now=minute) for _ in range(3)] == [1, 2, 3]
    assert rate_record(key="k", period=60, now=minute.replace(minute=1)) == 1
    assert rate_record(key="other", period=60, now=minute) == 1


def test_zero_turns_the_prompt_limit_off(user, settings):
    settings.BUDDY_PROMPTS_PER_MINUTE = 0
    for _ in range(5):
        prompt_rate_check(user_id=user.pk)
    settings.BUDDY_PROMPTS_PER_MINUTE = 1
    prompt_rate_check(user_id=user.pk)
    with pytest.raises(RateLimited):
        prompt_rate_check(user_id=user.pk)


def login(client: Client, username: str, password: str, address: str = "10.0.0.1", url: str = "/accounts/login/"):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_failed_logins_of_one_name_are_limited_with_429_and_retry_after(client, user, settings):
    settings.BUDDY_LOGIN_FAILURES = 3
    for _ in range(3):
        assert login(client, "alice", "wrong").status_code == 200  # the form again, with its error
    refused = login(client, "alice", "wonderland-pass-1")  # even the right password is not checked now
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= settings.BUDDY_LOGIN_WINDOW_SECONDS
    assert "Too many failed logins" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    # Another name from another address is not affected; the address limit is separate.
    assert login(client, "bob", "wrong", address="10.0.0.2").status_code == 200


def test_failed_logins_from_one_address_are_limited_across_names(client, user, settings):
    settings.BUDDY_LOGIN_FAILURES_PER_IP = 4
    for i in range(4):
        login(client, f"guess{i}", "wrong")
    assert login(client, "alice", "wonderland-pass-1").status_code == 429
    assert login(client, "alice", "wonderland-pass-1", address="10.0.0.9").status_code == 302  # logged in


def test_the_admin_login_is_limited_too(client, staff_user, settings):
    settings.BUDDY_LOGIN_FAILURES = 2
    for _ in range(2):
        login(client, "root", "wrong", url="/admin/login/")
    response = login(client, "root", "root-pass-1", url="/admin/login/")
    assert response.status_code == 200 and "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session
