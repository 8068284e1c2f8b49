from __future__ import annotations

import asyncio

from realtime.layers import InMemoryChannelLayer


async def test_a_broadcast_reaches_every_member_once_and_expiry_still_happens():
    layer = InMemoryChannelLayer(expiry=60)
    channels = [await layer.new_channel() for _ in range(300)]
    for channel in channels:
        await layer.group_add("chat.1.1.abc", channel)
    await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 1}})
    received = await asyncio.gather(*(layer.receive(channel) for channel in channels))
    assert received == [{"type": "frame", "frame": {"version": 1}}] * len(channels)

    # A member that never reads has its message expire and leaves the group, as with the stock layer.
    layer.expiry = -1
    await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 2}})
    layer._next_sweep = 0.0  # the next sweep is due
    layer._clean_expired()
    assert layer.channels == {}
    assert layer.groups.get("chat.1.1.abc", {}) == {}
