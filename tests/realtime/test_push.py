"""Frames handed from a turn's thread to the server's event loop (realtime.push.group_sends_handed_off)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.layers import get_channel_layer

from realtime import push
from realtime.frames import AssistantDeltaFrame


@pytest.fixture(autouse=True)
def server_process(monkeypatch):
    monkeypatch.setattr(push, "_serves_sockets", True)  # as in the server process (buddy/asgi.py)


async def test_a_thread_hands_its_frames_to_the_loop_without_waiting_for_it_and_they_arrive_in_order():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("handoff-test", channel)
    push.group_sends_handed_off()
    texts = [f"piece {n}" for n in range(20)]
    pushed = threading.Event()

    def turn_thread() -> None:
        for text in texts:
            push._group_send("handoff-test", push._frame_message(AssistantDeltaFrame(text=text)))
        pushed.set()

    thread = threading.Thread(target=turn_thread)
    thread.start()
    # The loop is held here, blocked: a sender that waited for it (one loop round trip per frame)
    # would never finish; a hand-off finishes at once.
    finished = pushed.wait(timeout=30)
    thread.join(timeout=30)
    assert finished, "the thread waited for the event loop to send its frames"
    # Everything queued while the loop was busy goes out as one message, in order.
    message = await asyncio.wait_for(layer.receive(channel), timeout=10)
    assert message["type"] == "frames"
    assert [frame["text"] for frame in message["frames"]] == texts
    await layer.group_discard("handoff-test", channel)


async def test_frames_queued_for_different_groups_keep_their_order_and_their_groups():
    layer = get_channel_layer()
    chat, lists = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("handoff-chat", chat)
    await layer.group_add("handoff-lists", lists)
    push.group_sends_handed_off()

    def turn_thread() -> None:
        for group, text in [
            ("handoff-chat", "a"),
            ("handoff-chat", "b"),
            ("handoff-lists", "c"),
            ("handoff-chat", "d"),
        ]:
            push._group_send(group, push._frame_message(AssistantDeltaFrame(text=text)))

    thread = threading.Thread(target=turn_thread)
    thread.start()
    thread.join(timeout=30)  # the loop is held: all four are queued before the first is sent

    async def texts(channel: str, messages: int) -> list[list[str]]:
        received = [await asyncio.wait_for(layer.receive(channel), timeout=10) for _ in range(messages)]
        return [[f["text"] for f in m["frames"]] if m["type"] == "frames" else [m["frame"]["text"]] for m in received]

    assert await texts(chat, 2) == [["a", "b"], ["d"]]
    assert await texts(lists, 1) == [["c"]]
    await layer.group_discard("handoff-chat", chat)
    await layer.group_discard("handoff-lists", lists)


async def test_without_a_running_loop_handed_to_a_sender_waits_for_its_send():
    """A thread of a process whose loop has gone (or a process without one) sends itself."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("handoff-test", channel)
    push._handoff = push._Handoff(asyncio.new_event_loop())  # a loop that does not run

    def worker() -> None:
        push._group_send("handoff-test", push._frame_message(AssistantDeltaFrame(text="sent")))

    await asyncio.to_thread(worker)
    assert (await asyncio.wait_for(layer.receive(channel), timeout=10))["frame"]["text"] == "sent"
    push._handoff.loop.close()
    push._handoff = None
    await layer.group_discard("handoff-test", channel)
