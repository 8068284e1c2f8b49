"""Turns over the WebSocket: prompt, streaming, cancel, refusals, confirmations."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import AsyncExitStack
from typing import Any

import pytest
from channels.db import database_sync_to_async

from canvas.services import canvas_apply
from conversations.models import Message, Session
from tests.web.test_consumer import login_cookie, opened

pytestmark = pytest.mark.django_db(transaction=True)


async def frames_until(socket, kind: str, timeout: float = 20) -> list[dict[str, Any]]:
    """Every frame up to and including the first of type `kind`, skipping the connect replay."""
    frames = []
    while True:
        frame = await socket.receive_json_from(timeout=timeout)
        if frame.get("type") == "canvas_command" and frame.get("command") == "canvas_set_mode" and not frames:
            continue
        frames.append(frame)
        if frame.get("type") == kind:
            return frames


@database_sync_to_async
def archived() -> list[tuple[str, list]]:
    return list(Message.objects.order_by("id").values_list("role", "content"))


async def test_a_prompt_frame_streams_the_reply_to_every_tab(user, agent):
    cookie = await login_cookie(user)
    async with opened(cookie) as tab, opened(cookie) as other_tab:
        await tab.send_json_to({"type": "prompt", "text": "hello over the socket"})
        frames = await frames_until(tab, "assistant_message")
        kinds = [f["type"] for f in frames]
        assert kinds[0] == "user_message" and frames[0]["text"] == "hello over the socket"
        assert "assistant_delta" in kinds
        streamed = "".join(f["text"] for f in frames if f["type"] == "assistant_delta")
        assert frames[-1]["text"] == streamed == "(offline demo) You said: hello over the socket"
        assert isinstance(frames[-1]["message_id"], int)
        seen_by_other = await frames_until(other_tab, "assistant_message")
        assert seen_by_other[0]["type"] == "user_message" and seen_by_other[-1]["text"] == streamed
    assert [role for role, _ in await archived()] == ["user", "assistant"]


async def test_a_prompt_creates_the_chat_a_socket_was_already_watching(user, agent):
    cookie = await login_cookie(user)
    async with opened(cookie, "?chat_id=fresh") as tab:
        grammar = 'CANVAS: [{"name": "canvas_add_card", "input": {"id": "n", "title": "New"}}]'
        await tab.send_json_to({"type": "prompt", "text": grammar})
        frames = await frames_until(tab, "assistant_message")
        cards = [f for f in frames if f["type"] == "canvas_command" and f["command"] == "canvas_add_card"]
        assert cards and cards[0]["params"]["title"] == "New" and cards[0]["version"] == 1


async def test_cancel_over_the_socket_stops_the_turn(user, agent, fake_anthropic, settings):
    settings.BUDDY_LLM_RETRIES = 0
    full = "word " * 300
    fake_anthropic.queue_text(full)
    fake_anthropic.delay_stream(0.7)
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "prompt", "text": "talk slowly"})
        first = await frames_until(tab, "assistant_delta")
        assert first[0]["type"] == "user_message"
        await tab.send_json_to({"type": "cancel"})
        frames = await frames_until(tab, "assistant_message")
        assert len(frames[-1]["text"]) < len(full)
    fake_anthropic.delay_stream(0)
    roles = [role for role, _ in await archived()]
    assert roles in (["user"], ["user", "assistant"])


async def test_cancel_without_a_running_turn_is_an_error_frame(user, agent):
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "cancel"})
        frame = await tab.receive_json_from(timeout=10)
        while frame["type"] == "canvas_command":
            frame = await tab.receive_json_from(timeout=10)
        assert frame == {"type": "error", "code": "no_turn_running", "detail": frame["detail"]}


async def test_a_second_prompt_while_a_turn_runs_is_refused(user, agent, fake_anthropic, settings):
    settings.BUDDY_LLM_RETRIES = 0
    fake_anthropic.queue_text("slow " * 50)
    fake_anthropic.delay_stream(0.5)
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "prompt", "text": "first"})
        await frames_until(tab, "user_message")
        await tab.send_json_to({"type": "prompt", "text": "second"})
        frames = await frames_until(tab, "error")
        assert frames[-1]["code"] == "turn_running"
        await frames_until(tab, "assistant_message")
    fake_anthropic.delay_stream(0)
    assert [c[0]["text"] for r, c in await archived() if r == "user"] == ["first"]


async def test_a_model_failure_reaches_the_socket_as_an_error_frame(user, agent, fake_anthropic, settings):
    settings.BUDDY_LLM_RETRIES = 0
    fake_anthropic.fail_next(529)
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "prompt", "text": "are you there?"})
        frames = await frames_until(tab, "error")
        assert frames[-1]["code"] == "model_failed" and "overloaded" in frames[-1]["detail"]
        await tab.send_json_to({"type": "prompt", "text": "and now?"})
        assert (await frames_until(tab, "assistant_message"))[-1]["text"] == "Echo: and now?"


async def test_a_confirmation_answer_marks_the_element_and_runs_a_turn(session):
    await database_sync_to_async(
        lambda: canvas_apply(
            session=session,
            command="canvas_show_confirmation",
            params={"id": "ship", "title": "Ship?", "message": "Go?"},
        )
    )()
    cookie = await login_cookie(session.user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "confirmation_response", "id": "ship", "confirmed": True})
        frames = await frames_until(tab, "assistant_message")
        marked = [f for f in frames if f["type"] == "canvas_command" and "answered" in f["params"]]
        assert marked[0]["params"]["answered"] == "confirmed" and marked[0]["params"]["id"] == "ship"
        prompts = [f for f in frames if f["type"] == "user_message"]
        assert prompts[0]["text"] == "[confirmation ship: confirmed]"
        await tab.send_json_to({"type": "confirmation_response", "id": "ship", "confirmed": False})
        frame = await frames_until(tab, "error")
        assert frame[-1]["code"]  # already answered: refused, nothing runs
    prompts = [c[0]["text"] for r, c in await archived() if r == "user"]
    assert prompts == ["[confirmation ship: confirmed]"]


async def test_the_socket_keeps_working_after_a_turn_task_finished(user, agent):
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        for text in ("one", "two"):
            await tab.send_json_to({"type": "prompt", "text": text})
            frames = await frames_until(tab, "assistant_message")
            assert frames[-1]["text"].endswith(text)
        await asyncio.sleep(0)


async def test_slow_model_calls_do_not_starve_a_new_sockets_replay(user, agent, fake_anthropic, settings):
    """Turns run on their own threads: eight slow model calls in flight (more than the default thread
    pool holds on a small machine) leave the threads that serve replays free."""
    settings.BUDDY_LLM_RETRIES = 0
    fake_anthropic.delay_stream(0.4)
    cookie = await login_cookie(user)
    async with AsyncExitStack() as stack:
        tabs = [await stack.enter_async_context(opened(cookie, f"?chat_id=slow{index}")) for index in range(8)]
        for tab in tabs:
            await tab.receive_json_from(timeout=10)  # the connect replay
            await tab.send_json_to({"type": "prompt", "text": "take your time"})
        await asyncio.sleep(0.5)  # every turn is streaming, or waiting for a thread
        started = time.monotonic()
        async with opened(cookie, "?chat_id=fresh") as fresh:
            frame = await fresh.receive_json_from(timeout=10)
            waited = time.monotonic() - started
        assert frame["command"] == "canvas_set_mode"
        assert waited < 1.0, f"a new socket's replay waited {waited:.2f} s behind the turns"
        fake_anthropic.delay_stream(0)
        for tab in tabs:
            await frames_until(tab, "assistant_message", timeout=60)


@database_sync_to_async
def change_user(user, **fields) -> None:
    fresh = type(user).objects.get(pk=user.pk)
    for name, value in fields.items():
        if name == "password":
            fresh.set_password(value)
        else:
            setattr(fresh, name, value)
    fresh.save()


@pytest.mark.parametrize("change", [{"password": "a-new-secret-77"}, {"is_active": False}])
async def test_a_password_change_or_deactivation_closes_the_users_sockets(user, other_user, agent, change):
    cookie, other_cookie = await login_cookie(user), await login_cookie(other_user)
    async with opened(cookie) as tab, opened(cookie, "?chat_id=other") as second, opened(other_cookie) as bobs:
        for socket in (tab, second, bobs):
            await socket.receive_json_from(timeout=10)
        await change_user(user, first_name="Alicia")  # not a credential: nothing closes
        assert await tab.receive_nothing(timeout=0.3)
        await change_user(user, **change)
        for socket in (tab, second):
            assert await socket.receive_output(timeout=10) == {"type": "websocket.close", "code": 4401}
        assert await bobs.receive_nothing(timeout=0.3)  # another user's socket stays


async def test_a_deactivated_users_running_turn_stops(user, agent, fake_anthropic, settings):
    settings.BUDDY_LLM_RETRIES = 0
    full = "word " * 300
    fake_anthropic.queue_text(full)
    fake_anthropic.delay_stream(1.0)  # about ten seconds of streaming
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "prompt", "text": "talk slowly"})
        await frames_until(tab, "user_message")
        started = time.monotonic()
        await change_user(user, is_active=False)
        session = await Session.objects.aget(user=user)
        while session.turn_lease_id:  # the turn lets go of its chat as soon as it sees the change
            assert time.monotonic() - started < 5, "the turn went on after its user was deactivated"
            await asyncio.sleep(0.1)
            await session.arefresh_from_db()
    fake_anthropic.delay_stream(0)
    said = [content for role, content in await archived() if role == "assistant"]
    assert all(len(json.dumps(content)) < len(full) for content in said)


async def test_a_socket_whose_login_was_revoked_runs_no_turn_even_if_the_close_was_lost(user, agent, monkeypatch):
    import realtime.signals

    monkeypatch.setattr(realtime.signals, "user_sockets_close", lambda user_id: None)  # the layer lost it
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.receive_json_from(timeout=10)
        await change_user(user, password="a-new-secret-77")
        await tab.send_json_to({"type": "prompt", "text": "still me?"})
        frame = await tab.receive_json_from(timeout=10)
        assert (frame["type"], frame["code"]) == ("error", "logged_out")
        assert await tab.receive_output(timeout=10) == {"type": "websocket.close", "code": 4401}
    assert await archived() == []


async def test_a_turn_shows_its_tool_calls_and_results_live_and_says_what_started_it(user, agent):
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        calls = (
            '[{"name": "canvas_add_card", "input": {"id": "n", "title": "New"}},'
            ' {"name": "canvas_remove_element", "input": {"id": "missing"}}]'
        )
        await tab.send_json_to({"type": "prompt", "text": f"CANVAS: {calls}"})
        frames = await frames_until(tab, "assistant_message")
    assert frames[0]["type"] == "user_message" and frames[0]["kind"] == "typed"
    uses = [frame for frame in frames if frame["type"] == "tool_use"]
    results = [frame for frame in frames if frame["type"] == "tool_result"]
    assert [(use["name"], use["input"]) for use in uses] == [
        ("canvas_add_card", {"id": "n", "title": "New"}),
        ("canvas_remove_element", {"id": "missing"}),
    ]
    assert [result["tool_use_id"] for result in results] == [use["id"] for use in uses]
    assert [result["is_error"] for result in results] == [False, True]
    assert "missing" in results[1]["summary"]
    # The same ids as in the archive, so a reload shows the same turn.
    archived_uses = [block for _, content in await archived() for block in content if block["type"] == "tool_use"]
    assert [block["id"] for block in archived_uses] == [use["id"] for use in uses]


async def test_a_confirmation_answer_starts_a_turn_of_kind_confirmation(user, agent):
    cookie = await login_cookie(user)

    @database_sync_to_async
    def confirmation() -> None:
        from conversations.services import session_get_or_create

        chat = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
        canvas_apply(
            session=chat, command="canvas_show_confirmation", params={"id": "go", "title": "Go?", "message": "?"}
        )

    await confirmation()
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "confirmation_response", "id": "go", "confirmed": True})
        frames = await frames_until(tab, "assistant_message")
    started = [frame for frame in frames if frame["type"] == "user_message"]
    assert started == [
        {
            "type": "user_message",
            "text": "[confirmation go: confirmed]",
            "message_id": started[0]["message_id"],
            "kind": "confirmation",
        }
    ]
