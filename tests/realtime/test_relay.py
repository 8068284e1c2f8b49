"""Frames from a process without sockets (the task worker) reach the server's sockets through the
database when the channel layer is the in-memory one (realtime/push.py, realtime/relay.py)."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from realtime import push, relay
from realtime.frames import AssistantDeltaFrame
from realtime.models import RelayedFrame
from realtime.push import layer_is_in_memory, push_frame

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def in_memory_layer():
    if not layer_is_in_memory():
        pytest.skip("with Redis, every process reaches every socket through the layer itself")
    return get_channel_layer()


async def test_a_frame_pushed_where_no_socket_is_open_reaches_the_servers_sockets(
    session, in_memory_layer, settings, monkeypatch
):
    settings.BUDDY_FRAME_RELAY = True
    monkeypatch.setattr(push, "_serves_sockets", False)  # this process plays the worker
    from realtime.push import session_group

    group = await database_sync_to_async(session_group)(session)
    socket_channel = await in_memory_layer.new_channel()
    await in_memory_layer.group_add(group, socket_channel)
    relay.relay_ensure_started()
    try:
        await asyncio.sleep(relay.RELAY_POLL_SECONDS)
        # As the worker does: no socket in this process, so the frame is written to the database.
        await database_sync_to_async(push_frame)(session, AssistantDeltaFrame(text="from the worker"))
        assert await database_sync_to_async(RelayedFrame.objects.count)() == 1
        message = await asyncio.wait_for(in_memory_layer.receive(socket_channel), timeout=10)
        assert message == {"type": "frame", "frame": {"type": "assistant_delta", "text": "from the worker"}}
        # Relayed once, not on every poll.
        await asyncio.sleep(relay.RELAY_POLL_SECONDS * 4)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(in_memory_layer.receive(socket_channel), timeout=0.3)
    finally:
        relay._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await relay._task


def test_the_process_serving_the_sockets_writes_no_rows_when_none_is_open(session, in_memory_layer, monkeypatch):
    """Nobody could receive them: the server's sockets are its own, and no other process reads its frames."""
    monkeypatch.setattr(push, "_local_sockets", 0)
    monkeypatch.setattr(push, "_serves_sockets", False)
    push_frame(session, AssistantDeltaFrame(text="to the worker's readers"))
    assert RelayedFrame.objects.count() == 1
    monkeypatch.setattr(push, "_serves_sockets", True)
    push_frame(session, AssistantDeltaFrame(text="to nobody"))
    assert RelayedFrame.objects.count() == 1
