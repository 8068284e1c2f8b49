"""The WebSocket through a real server process (buddy.server, daphne with bounded reads and writes)."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from websockets.asyncio.client import connect

from agent.canvas import canvas_command_run
from devtools.servers import daphne
from realtime.limits import MAX_FRAME_BYTES
from tests.web.test_consumer import login_cookie

pytestmark = pytest.mark.django_db(transaction=True)


def open_socket(url: str, cookie: str, *, slow_reader: bool = False, **options: Any):
    """A client socket; a `slow_reader` stops reading from the network as soon as one message waits
    (max_queue=1) and has a small kernel receive buffer, as a client on a slow link would."""
    host = url.removeprefix("http://")
    if slow_reader:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.connect(("127.0.0.1", int(host.rsplit(":", 1)[1])))
        sock.setblocking(False)
        options.update(sock=sock, max_queue=1)
    return connect(
        f"ws://{host}/ws/",
        origin=url,
        additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"},
        open_timeout=20,
        max_size=None,
        **options,
    )


async def receive(ws) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=20))


async def test_frames_over_the_transport_limit_and_invalid_utf8_get_an_error_frame(session):
    cookie = await login_cookie(session.user)
    with daphne() as url:
        async with open_socket(url, cookie) as ws:
            assert (await receive(ws))["command"] == "canvas_set_mode"
            padded = json.dumps({"type": "prompt", "text": "x" * (2 * 1024 * 1024)})  # 2 MiB: over daphne's 1 MiB
            await ws.send(padded)
            frame = await receive(ws)
            assert (frame["type"], frame["code"]) == ("error", "frame_too_large")
            assert str(MAX_FRAME_BYTES) in frame["detail"]
            await ws.send(b'{"type": "prompt", "text": "a\xff\xfeb"}', text=True)  # not UTF-8
            frame = await receive(ws)
            assert (frame["type"], frame["code"]) == ("error", "invalid_unicode")
            await ws.send(json.dumps({"type": "replay"}))  # the socket is still open and answers
            assert (await receive(ws))["command"] == "canvas_set_mode"


async def add_cards(session, count: int, body_chars: int) -> None:
    await database_sync_to_async(
        lambda: [
            canvas_command_run(
                session=session,
                command="canvas_add_card",
                params={"id": f"c{i}", "title": "t", "body": "b" * body_chars},
            )
            for i in range(count)
        ]
    )()


async def test_a_client_that_does_not_read_cannot_make_the_server_queue_its_requests_answers(session):
    """While a client reads nothing, the server reads nothing more from it either: the replays it asked
    for meanwhile are read when it reads again, and coalesced, instead of waiting in memory."""
    await add_cards(session, 40, 15_000)
    cookie = await login_cookie(session.user)
    with daphne(BUDDY_WS_REPLAY_INTERVAL="0.01") as url:
        async with open_socket(url, cookie, slow_reader=True) as ws:
            for _ in range(41):  # the connect replay, read as a browser would
                await receive(ws)
            requests = 60  # 36 MB of replays if the server answered each as it came
            for _ in range(requests):
                await ws.send(json.dumps({"type": "replay"}))
                await asyncio.sleep(0.05)
            clears = 0
            try:
                while True:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=3))
                    clears += frame.get("command") == "canvas_set_mode"
            except TimeoutError:
                pass
    assert 1 <= clears < requests / 2


def test_a_socket_whose_client_reads_nothing_is_dropped_once_too_much_waits_for_it(settings, monkeypatch):
    """What is sent while the transport's own buffer is full is counted; past
    BUDDY_WS_SEND_BUFFER_BYTES the connection is dropped instead of buffering more."""
    from daphne.ws_protocol import WebSocketProtocol
    from twisted.internet.testing import StringTransport

    from buddy.server import BoundedWebSocketProtocol, _WriteBacklog

    settings.BUDDY_WS_SEND_BUFFER_BYTES = 100_000
    sent: list[str] = []
    monkeypatch.setattr(WebSocketProtocol, "serverSend", lambda self, content, binary=False: sent.append(content))
    protocol = BoundedWebSocketProtocol()
    protocol.client_addr = ["127.0.0.1", 1]
    protocol.transport = StringTransport()
    dropped: list[bool] = []
    monkeypatch.setattr(protocol, "dropConnection", lambda abort=False: dropped.append(abort))
    backlog = _WriteBacklog(protocol)

    frame = "x" * 30_000
    for _ in range(10):
        protocol.serverSend(frame)  # the client reads: the transport never says its buffer is full
    assert len(sent) == 10 and not dropped

    backlog.pauseProducing()  # the transport's buffer is full: the client stopped reading
    assert protocol.transport.producerState == "paused"  # nor does the server read its requests
    for _ in range(3):
        protocol.serverSend(frame)
    assert len(sent) == 13 and not dropped
    backlog.resumeProducing()  # it read again: the count starts over
    assert protocol.transport.producerState == "producing"
    backlog.pauseProducing()
    for _ in range(5):
        protocol.serverSend(frame)
    assert dropped == [True]  # the fourth frame went past 100,000 bytes
    assert len(sent) == 16  # and nothing more was buffered


def test_a_socket_is_not_read_while_its_application_has_too_many_of_its_messages(monkeypatch):
    """A flood waits in the client's TCP buffers, not in the server: past MAX_QUEUED_MESSAGES waiting for
    the consumer, the transport stops reading; once half of them are handled it reads again (unless
    the client's own reading holds it back too)."""
    from twisted.internet.task import Clock
    from twisted.internet.testing import StringTransport

    from buddy import server
    from buddy.server import MAX_QUEUED_MESSAGES, BoundedWebSocketProtocol, _WriteBacklog

    clock = Clock()
    monkeypatch.setattr(server, "_reactor", lambda: clock)
    protocol = BoundedWebSocketProtocol()
    protocol.transport = StringTransport()
    protocol.application_queue = asyncio.Queue()
    protocol.muted = False
    for index in range(MAX_QUEUED_MESSAGES - 1):
        protocol.onMessage(b'{"type": "prompt", "text": "%d"}' % index, False)
    assert protocol.transport.producerState == "producing"
    protocol.onMessage(b'{"type": "prompt", "text": "one more"}', False)
    assert protocol.transport.producerState == "paused"
    assert protocol.application_queue.qsize() == MAX_QUEUED_MESSAGES  # every message read is kept
    clock.advance(1)
    assert protocol.transport.producerState == "paused"  # nothing handled yet
    for _ in range(MAX_QUEUED_MESSAGES // 2):
        protocol.application_queue.get_nowait()
    _WriteBacklog(protocol).pauseProducing()  # meanwhile the client stopped reading its answers
    clock.advance(0.02)
    assert protocol.transport.producerState == "paused"
    _WriteBacklog(protocol).resumeProducing()
    assert protocol.transport.producerState == "producing"
