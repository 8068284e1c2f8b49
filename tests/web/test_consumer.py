"""The WebSocket through the real ASGI application (origin check, session auth, routing)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from agent import canvas as agent_canvas
from agent.canvas import canvas_command_run, canvas_confirmation_answer
from buddy.asgi import application
from canvas.selectors import canvas_state
from conversations.models import Message, Session
from conversations.services import session_get_or_create
from realtime.limits import MAX_FRAME_BYTES
from tests.canvas.examples import ADD_EXAMPLES, CanvasMirror
from web.consumers import CanvasConsumer

pytestmark = pytest.mark.django_db(transaction=True)

PROBE = {"type": "probe-end-of-frames"}


@database_sync_to_async
def login_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def communicator(
    cookie: str | None,
    query: str = "",
    origin: str | None = "http://testserver",
    extra_headers: list[tuple[bytes, bytes]] = (),
):
    headers = [(b"host", b"testserver"), *extra_headers]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if cookie is not None:
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, f"/ws/{query}", headers=headers)


@asynccontextmanager
async def opened(cookie: str, query: str = "") -> AsyncIterator[WebsocketCommunicator]:
    socket = communicator(cookie, query)
    connected, _ = await socket.connect(timeout=10)
    assert connected
    try:
        yield socket
    finally:
        await socket.disconnect()


async def frames_until_probe(socket: WebsocketCommunicator) -> list[dict[str, Any]]:
    """Every frame the server sends before answering a probe sent now. The consumer handles one event
    at a time, so this is exactly what it sent in answer to what came before the probe."""
    await socket.send_json_to(PROBE)
    frames = []
    while True:
        frame = await socket.receive_json_from(timeout=10)
        if frame.get("type") == "error" and frame.get("code") == "unknown_type" and PROBE["type"] in frame["detail"]:
            return frames
        frames.append(frame)


async def replay_into(socket: WebsocketCommunicator, mirror: CanvasMirror | None = None) -> CanvasMirror:
    frames = await frames_until_probe(socket)
    assert frames[0]["command"] == "canvas_set_mode" and frames[0]["params"] == {"mode": "clear"}
    mirror = mirror or CanvasMirror()
    for frame in frames:
        assert frame["version"] == frames[0]["version"]
        mirror.apply(frame)
    return mirror


apply = database_sync_to_async(
    lambda session, command, **params: canvas_command_run(session=session, command=command, params=params)
)


@database_sync_to_async
def stored_state(session) -> dict[str, Any]:
    state = canvas_state(session=session)
    return {"elements": state["elements"], "theme": state["theme"], "version": state["version"]}


# --- handshake -------------------------------------------------------------------------------------


async def test_refused_without_a_login_or_with_an_unknown_session_cookie(user):
    for cookie in (None, "not-a-session-key"):
        socket = communicator(cookie)
        connected, _ = await socket.connect(timeout=10)
        assert not connected
        await socket.disconnect()


async def test_refused_with_a_foreign_or_missing_origin(user):
    cookie = await login_cookie(user)
    for origin in ("http://evil.example", None):
        socket = communicator(cookie, origin=origin)
        connected, _ = await socket.connect(timeout=10)
        assert not connected
        await socket.disconnect()


@pytest.mark.parametrize(
    "origin",
    [
        "http://testserver:8080",  # another port of the same host
        "https://testserver",  # another scheme (and port)
        "http://testserver.evil.example",
        "http://user@testserver",
        "null",
    ],
)
async def test_refused_from_another_port_or_scheme_of_the_same_host(user, origin):
    socket = communicator(await login_cookie(user), origin=origin)
    connected, _ = await socket.connect(timeout=10)
    assert not connected
    await socket.disconnect()


async def test_accepted_from_the_own_origin_or_a_trusted_one(user, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.example.com", "https://*.corp.example"]
    cookie = await login_cookie(user)
    for origin in ("http://testserver", "http://TestServer:80", "https://app.example.com", "https://a.corp.example"):
        socket = communicator(cookie, origin=origin)
        connected, _ = await socket.connect(timeout=10)
        assert connected, origin
        await socket.disconnect()
    socket = communicator(cookie, origin="http://app.example.com")  # trusted for https only
    connected, _ = await socket.connect(timeout=10)
    assert not connected
    await socket.disconnect()


async def test_behind_a_tls_proxy_the_own_origin_is_https(user, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    cookie = await login_cookie(user)
    proxied = [(b"x-forwarded-proto", b"https")]
    for origin, allowed in (("https://testserver", True), ("http://testserver", False)):
        socket = communicator(cookie, origin=origin, extra_headers=proxied)
        connected, _ = await socket.connect(timeout=10)
        assert connected is allowed, origin
        await socket.disconnect()


@pytest.mark.parametrize(
    ("query", "code", "close_code"),
    [
        ("?chat_id=no%20spaces", "invalid_chat_id", 4400),
        ("?chat_id=" + "x" * 65, "invalid_chat_id", 4400),
        ("?agent=nobody", "not_found", 4404),
        ("?agent=x%00y", "invalid_agent", 4400),
        ("?agent=no%20spaces", "invalid_agent", 4400),
        ("?chat_id=x%00y", "invalid_chat_id", 4400),
    ],
)
async def test_an_invalid_query_gets_an_error_frame_then_a_close(user, agent, query, code, close_code):
    cookie = await login_cookie(user)
    socket = communicator(cookie, query)
    connected, _ = await socket.connect(timeout=10)
    assert connected
    frame = await socket.receive_json_from(timeout=10)
    assert frame["type"] == "error" and frame["code"] == code and frame["detail"]
    assert await socket.receive_output(timeout=10) == {"type": "websocket.close", "code": close_code}
    await socket.disconnect()


# --- replay and live frames ----------------------------------------------------------------------


async def test_replay_equals_the_stored_state_after_every_kind_of_command(session):
    cookie = await login_cookie(session.user)
    commands: list[tuple[str, dict[str, Any]]] = [
        *ADD_EXAMPLES.items(),
        ("canvas_add_card", {"id": "poem", "title": "Replaced in place"}),
        ("canvas_update_card", {"id": "sales", "chart_type": "line"}),
        ("canvas_update_card", {"id": "plan", "body": None}),
        ("canvas_remove_element", {"id": "people"}),
        ("canvas_set_theme", {"theme": "dark"}),
        ("canvas_show_notification", {"message": "Saved", "level": "success"}),
        ("canvas_set_mode", {"mode": "content"}),
        ("confirm", {"id": "go"}),
        ("canvas_set_mode", {"mode": "clear"}),
        ("canvas_add_card", {"id": "again", "title": "After the clear"}),
        ("canvas_set_theme", {"theme": ""}),
    ]
    async with opened(cookie) as live:
        mirror = await replay_into(live)
        assert mirror.version == 0
        for command, params in commands:
            if command == "confirm":
                await database_sync_to_async(canvas_confirmation_answer)(
                    session=session, element_id="go", confirmed=True
                )
            else:
                await apply(session, command, **params)
            frame = await live.receive_json_from(timeout=10)
            assert frame["version"] == mirror.version + 1  # no gap, no duplicate
            mirror.apply(frame)
            stored = await stored_state(session)
            assert mirror.state() == stored
            async with opened(cookie) as fresh:
                assert (await replay_into(fresh)).state() == stored
    assert mirror.notifications == [{"message": "Saved", "level": "success"}]


async def test_a_notification_reaches_open_sockets_and_is_never_replayed(session):
    cookie = await login_cookie(session.user)
    async with opened(cookie) as first, opened(cookie) as second:
        await replay_into(first)
        await replay_into(second)
        await apply(session, "canvas_show_notification", message="Build finished")
        for socket in (first, second):
            frame = await socket.receive_json_from(timeout=10)
            assert frame["command"] == "canvas_show_notification"
            assert frame["params"] == {"message": "Build finished", "level": "info"}
        async with opened(cookie) as late:
            frames = await frames_until_probe(late)
            assert [frame["command"] for frame in frames] == ["canvas_set_mode"]


async def test_frames_queued_together_reach_the_socket_one_by_one_in_order(session):
    from channels.layers import get_channel_layer

    from realtime.frames import AssistantDeltaFrame
    from realtime.push import session_group

    cookie = await login_cookie(session.user)
    async with opened(cookie) as socket:
        await replay_into(socket)
        frames = [AssistantDeltaFrame(text=text).dump() for text in ("one ", "two ", "three")]
        await get_channel_layer().group_send(session_group(session), {"type": "frames", "frames": frames})
        assert [await socket.receive_json_from(timeout=10) for _ in frames] == frames
        assert await frames_until_probe(socket) == []


async def test_a_missed_frame_shows_as_a_version_gap_and_replay_recovers(session, monkeypatch):
    cookie = await login_cookie(session.user)
    async with opened(cookie) as socket:
        mirror = await replay_into(socket)
        await apply(session, "canvas_add_card", id="a", title="A")
        mirror.apply(await socket.receive_json_from(timeout=10))
        # The channel layer drops one message (channels-redis does past its capacity).
        monkeypatch.setattr(agent_canvas, "push_frame_on_commit", lambda session, frame: None)
        await apply(session, "canvas_add_card", id="lost", title="never pushed")
        monkeypatch.undo()
        await apply(session, "canvas_add_card", id="c", title="C")
        frame = await socket.receive_json_from(timeout=10)
        assert frame["version"] == mirror.version + 2  # the client sees the gap …
        await socket.send_json_to({"type": "replay"})  # … and asks for a replay
        mirror = await replay_into(socket)
        assert [element["id"] for element in mirror.elements] == ["a", "lost", "c"]
        assert mirror.state() == await stored_state(session)


async def test_a_chat_that_does_not_exist_replays_empty_and_gets_its_frames_once_created(user, agent):
    cookie = await login_cookie(user)
    async with opened(cookie, "?chat_id=later:1") as socket:
        frames = await frames_until_probe(socket)
        assert frames == [
            {"type": "canvas_command", "command": "canvas_set_mode", "params": {"mode": "clear"}, "version": 0}
        ]
        assert not await Session.objects.filter(chat_id="later:1").aexists()
        # A prompt creates the chat later; its canvas frames reach the socket that was already open.
        session = await database_sync_to_async(session_get_or_create)(user=user, agent_slug=None, chat_id="later:1")
        await apply(session, "canvas_add_card", id="hello", title="Hello")
        frame = await socket.receive_json_from(timeout=10)
        assert frame["command"] == "canvas_add_card" and frame["version"] == 1


async def test_a_stale_agent_hint_still_follows_the_right_chat(session, monkeypatch):
    """The process remembers slug → agent id to join early; a wrong memory must not misroute."""
    from web import consumers

    cookie = await login_cookie(session.user)
    monkeypatch.setitem(consumers._agent_id_hints, "buddy", session.agent_id + 1000)
    await apply(session, "canvas_add_card", id="a", title="A")
    async with opened(cookie) as socket:
        assert [element["id"] for element in (await replay_into(socket)).elements] == ["a"]
        await apply(session, "canvas_add_card", id="b", title="B")
        assert (await socket.receive_json_from(timeout=10))["params"]["id"] == "b"
    assert consumers._agent_id_hints["buddy"] == session.agent_id


async def test_switch_agent_answers_the_agent_and_its_canvas_and_follows_it(session, helper_agent):
    cookie = await login_cookie(session.user)
    helper = await database_sync_to_async(session_get_or_create)(user=session.user, agent_slug="helper", chat_id="main")
    await apply(session, "canvas_add_card", id="mine", title="Buddy's")
    await apply(helper, "canvas_add_card", id="theirs", title="Helper's")
    await apply(helper, "canvas_set_theme", theme="forest")
    async with opened(cookie) as socket:
        assert [element["id"] for element in (await replay_into(socket)).elements] == ["mine"]
        await socket.send_json_to({"type": "switch_agent", "agent": "helper"})
        frames = await frames_until_probe(socket)
        assert frames[0] == {"type": "agent_switch", "agent": {"id": "helper", "name": "Helper", "avatar": "🦉"}}
        mirror = CanvasMirror()
        for frame in frames[1:]:
            mirror.apply(frame)
        assert mirror.state() == await stored_state(helper)
        # From now on the socket follows the helper's canvas of the same chat, not buddy's.
        await apply(session, "canvas_add_card", id="buddy-only", title="not for this socket")
        await apply(helper, "canvas_add_card", id="helper-too", title="for this socket")
        frame = await socket.receive_json_from(timeout=10)
        assert frame["params"]["id"] == "helper-too"
        # An unknown agent is an error; the socket stays on the helper.
        await socket.send_json_to({"type": "switch_agent", "agent": "nobody"})
        frames = await frames_until_probe(socket)
        assert frames == [{"type": "error", "code": "not_found", "detail": "No agent 'nobody'."}]
        # An agent no slug can be is invalid, as over HTTP.
        await socket.send_json_to({"type": "switch_agent", "agent": "no body"})
        frames = await frames_until_probe(socket)
        assert [(frame["type"], frame["code"]) for frame in frames] == [("error", "invalid_agent")]
        # An empty agent means the default one.
        await socket.send_json_to({"type": "switch_agent", "agent": ""})
        frames = await frames_until_probe(socket)
        assert frames[0]["agent"]["id"] == "buddy"
        assert [frame["params"].get("id") for frame in frames[2:]] == ["mine", "buddy-only"]


async def test_another_users_chat_is_unreachable(session, other_user):
    cookie = await login_cookie(session.user)
    theirs = await database_sync_to_async(session_get_or_create)(user=other_user, agent_slug="buddy", chat_id="main")
    await apply(theirs, "canvas_show_confirmation", id="secret", title="Bob's", message="Bob's question")
    async with opened(cookie, "?agent=buddy&chat_id=main") as socket:
        frames = await frames_until_probe(socket)
        assert [frame["command"] for frame in frames] == ["canvas_set_mode"]  # Alice's own, empty canvas
        await apply(theirs, "canvas_add_card", id="bob-only", title="not for Alice")
        await apply(session, "canvas_add_card", id="alice", title="for Alice")
        assert (await socket.receive_json_from(timeout=10))["params"]["id"] == "alice"
        await socket.send_json_to({"type": "confirmation_response", "id": "secret", "confirmed": True})
        frames = await frames_until_probe(socket)
        assert frames[0]["type"] == "error" and frames[0]["code"] == "unknown_element"
    assert "answered" not in (await stored_state(theirs))["elements"][0]


# --- client frames -------------------------------------------------------------------------------


@pytest.fixture
def turns(monkeypatch) -> list[str]:
    """Record what would run as a turn (the turn itself is the conversations app's business)."""
    started: list[str] = []

    async def start_turn(self, text: str, kind: str = "typed") -> None:
        started.append(text)
        # The test's own frame, not one of the server's: sent past the check of server frames (conftest).
        await AsyncJsonWebsocketConsumer.send_json(self, {"type": "test_turn_started", "text": text, "kind": kind})

    monkeypatch.setattr(CanvasConsumer, "start_turn", start_turn)
    return started


async def test_a_confirmation_answer_is_marked_broadcast_and_runs_as_a_turn(session, turns):
    cookie = await login_cookie(session.user)
    await apply(session, "canvas_show_confirmation", **ADD_EXAMPLES["canvas_show_confirmation"])
    async with opened(cookie) as answering, opened(cookie) as watching:
        await replay_into(answering)
        await replay_into(watching)
        await answering.send_json_to({"type": "confirmation_response", "id": "go", "confirmed": False})
        expected = {
            "type": "canvas_command",
            "command": "canvas_update_card",
            "params": {**ADD_EXAMPLES["canvas_show_confirmation"], "answered": "declined"},
            "version": 2,
        }
        assert await watching.receive_json_from(timeout=10) == expected
        received = [await answering.receive_json_from(timeout=10) for _ in range(2)]
        assert (
            expected in received
            and {
                "type": "test_turn_started",
                "text": "[confirmation go: declined]",
                "kind": "confirmation",
            }
            in received
        )
        assert turns == ["[confirmation go: declined]"]

        await answering.send_json_to({"type": "confirmation_response", "id": "go", "confirmed": True})
        frames = await frames_until_probe(answering)
        assert [(frame["type"], frame.get("code")) for frame in frames] == [("error", "already_answered")]
        assert turns == ["[confirmation go: declined]"]
    assert (await stored_state(session))["elements"][0]["answered"] == "declined"


async def test_a_prompt_frame_starts_a_turn_with_its_text(session, turns):
    cookie = await login_cookie(session.user)
    async with opened(cookie) as socket:
        await replay_into(socket)
        await socket.send_json_to({"type": "prompt", "text": "Plan my trip"})
        assert await frames_until_probe(socket) == [
            {"type": "test_turn_started", "text": "Plan my trip", "kind": "typed"}
        ]
        assert turns == ["Plan my trip"]


def _padded_replay_frame(size: int) -> str:
    """A valid `replay` frame of exactly `size` UTF-8 bytes (extra fields are ignored)."""
    bare = json.dumps({"type": "replay", "pad": ""})
    return json.dumps({"type": "replay", "pad": "x" * (size - len(bare))})


BAD_FRAMES = [
    ("text", "{not json", "invalid_json"),
    ("text", "", "invalid_json"),
    ("bytes", b'{"type": "replay"}', "binary_frame"),
    ("text", "[1, 2]", "invalid_frame"),
    ("text", '"replay"', "invalid_frame"),
    ("text", '{"text": "no type"}', "invalid_frame"),
    ("text", '{"type": 5}', "invalid_frame"),
    ("text", '{"type": "dance"}', "unknown_type"),
    ("text", '{"type": "prompt"}', "invalid_field"),
    ("text", '{"type": "prompt", "text": 5}', "invalid_field"),
    ("text", '{"type": "prompt", "text": "   "}', "invalid_field"),
    ("text", '{"type": "switch_agent", "agent": ["buddy"]}', "invalid_field"),
    ("text", '{"type": "confirmation_response", "id": "go"}', "invalid_field"),
    ("text", '{"type": "confirmation_response", "id": "go", "confirmed": "yes"}', "invalid_field"),
    ("text", '{"type": "confirmation_response", "confirmed": true}', "invalid_field"),
    ("text", '{"type": "confirmation_response", "id": "bad id", "confirmed": true}', "invalid_field"),
    ("text", '{"type": "confirmation_response", "id": "nope", "confirmed": true}', "unknown_element"),
    ("text", _padded_replay_frame(MAX_FRAME_BYTES + 1), "frame_too_large"),
    ("text", '{"type": "prompt", "text": "' + "é" * (MAX_FRAME_BYTES // 2) + '"}', "frame_too_large"),
    # Lone surrogates, as JSON escapes or as raw text, anywhere in a frame.
    ("text", '{"type": "prompt", "text": "x\\ud800y"}', "invalid_unicode"),
    ("text", '{"type": "switch_agent", "agent": "x\\udfffy"}', "invalid_unicode"),
    ("text", '{"type": "confirmation_response", "id": "\\ud800", "confirmed": true}', "invalid_unicode"),
    ("text", '{"type": "prompt", "text": "x\ud800y"}', "invalid_unicode"),
    ("text", '{"type": "prompt", "x\\ud800": 1, "text": "hi"}', "invalid_unicode"),
    # NUL (PostgreSQL cannot store it in text).
    ("text", '{"type": "prompt", "text": "a\\u0000b"}', "nul_character"),
    ("text", '{"type": "switch_agent", "agent": "x\\u0000y"}', "nul_character"),
    # 969 nested arrays in 1,960 bytes; and nesting just past the limit.
    ("text", '{"type": "prompt", "text": "hi", "x": ' + "[" * 969 + "]" * 969 + "}", "too_deep"),
    ("text", '{"type": "prompt", "text": "hi", "x": ' + "[" * 32 + "]" * 32 + "}", "too_deep"),
]


async def test_bad_input_gets_an_error_frame_and_the_socket_stays_usable(session, turns, settings):
    settings.BUDDY_WS_REPLAY_INTERVAL = 0.01  # a replay after every frame
    cookie = await login_cookie(session.user)
    await apply(session, "canvas_add_card", id="a", title="A")
    async with opened(cookie) as socket:
        expected_replay = (await replay_into(socket)).state()
        for kind, payload, code in BAD_FRAMES:
            # send_input: the communicator's send_to() refuses an empty text frame.
            await socket.send_input({"type": "websocket.receive", kind: payload})
            frame = await socket.receive_json_from(timeout=10)
            assert frame["type"] == "error" and frame["code"] == code, (payload[:80], frame)
            assert isinstance(frame["detail"], str) and frame["detail"]
            await socket.send_json_to({"type": "replay"})
            assert (await replay_into(socket)).state() == expected_replay, payload[:80]
        # Exactly 64 KiB is still a frame.
        await socket.send_to(text_data=_padded_replay_frame(MAX_FRAME_BYTES))
        assert (await replay_into(socket)).state() == expected_replay
    assert turns == []


async def test_bad_frames_on_a_prompt_archive_nothing(session):
    cookie = await login_cookie(session.user)
    async with opened(cookie) as socket:
        await replay_into(socket)
        for text in ("x\ud800y", "a\x00b"):
            await socket.send_to(text_data=json.dumps({"type": "prompt", "text": text}))
            frame = await socket.receive_json_from(timeout=10)
            assert frame["type"] == "error" and frame["code"] in {"invalid_unicode", "nul_character"}
        assert await frames_until_probe(socket) == []  # still open
    assert not await Message.objects.aexists()


async def test_replays_requested_without_reading_are_coalesced(session, settings):
    """A client that asks for hundreds of replays without reading gets one now and one per
    BUDDY_WS_REPLAY_INTERVAL after it, not one per request. How many intervals the 300 requests span
    depends on how busy the machine is, so the count is held to what the elapsed time allows."""
    settings.BUDDY_WS_REPLAY_INTERVAL = 0.3
    for index in range(20):
        await apply(session, "canvas_add_card", id=f"c{index}", title="x" * 200, body="y" * 4000)
    cookie = await login_cookie(session.user)
    async with opened(cookie) as socket:
        await replay_into(socket)
        clock = asyncio.get_running_loop().time
        started = clock()
        for _ in range(300):
            await socket.send_json_to({"type": "replay"})
        frames = []
        while not await socket.receive_nothing(timeout=4):
            frames.append(await socket.receive_json_from())
            received = clock()
        clears = [frame for frame in frames if frame.get("command") == "canvas_set_mode"]
        assert 1 <= len(clears) <= 1 + (received - started) / settings.BUDDY_WS_REPLAY_INTERVAL
        assert len(frames) == len(clears) * 21  # every replay is complete
        mirror = CanvasMirror()
        for frame in frames[-21:]:
            mirror.apply(frame)
        assert mirror.state() == await stored_state(session)


async def test_logging_out_closes_the_users_sockets(session, other_user):
    cookie = await login_cookie(session.user)
    other_cookie = await login_cookie(other_user)
    async with opened(cookie) as socket, opened(cookie, "?chat_id=other") as second, opened(other_cookie) as bobs:
        for each in (socket, second, bobs):
            await replay_into(each)

        @database_sync_to_async
        def log_out() -> int:
            client = Client()
            client.cookies[settings.SESSION_COOKIE_NAME] = cookie
            return client.post("/accounts/logout/").status_code

        assert await log_out() == 302
        for each in (socket, second):
            assert await each.receive_output(timeout=10) == {"type": "websocket.close", "code": 4401}
        # Bob's socket is not affected.
        await bobs.send_json_to({"type": "replay"})
        assert (await replay_into(bobs)).version == 0
    # The session cookie is dead now: a new socket is refused.
    refused = communicator(cookie)
    connected, _ = await refused.connect(timeout=10)
    assert not connected
    await refused.disconnect()


async def test_an_idle_socket_outlives_the_redis_layers_blocking_receive(session):
    """channels-redis waits for messages with a 5 s BZPOPMIN; redis-py 8 reads with a 5 s socket
    timeout by default, which tore every idle socket down (channels_redis#422) unless settings raise it."""
    if not settings.REDIS_URL:
        pytest.skip("needs REDIS_URL")
    import asyncio

    cookie = await login_cookie(session.user)
    async with opened(cookie) as socket:
        await replay_into(socket)
        await asyncio.sleep(7)  # longer than one blocking receive
        assert await socket.receive_nothing(timeout=0.1)  # no close frame
        await apply(session, "canvas_add_card", id="late", title="Still here")
        assert (await socket.receive_json_from(timeout=10))["params"]["id"] == "late"
