"""The Redis channel layer as configured: a socket with nothing to receive keeps waiting."""

from __future__ import annotations

import asyncio
import os

import pytest

pytestmark = pytest.mark.redis


async def test_an_idle_receive_outlasts_the_blocking_pop():
    """With redis-py 8's default 5 s read timeout, channels-redis' 5 s BZPOPMIN raises TimeoutError in
    every quiet consumer and closes its WebSocket with 1011: the settings' read timeout must outlast it."""
    if not os.environ.get("REDIS_URL"):
        pytest.skip("needs REDIS_URL")
    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

    layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
    channel = await layer.new_channel()
    try:
        # Still waiting after a whole blocking pop and more: no error from the read timeout.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(layer.receive(channel), timeout=layer.brpop_timeout + 1.5)
        # And the layer still delivers on the same connection pool afterwards.
        await layer.send(channel, {"type": "after.idle"})
        assert (await asyncio.wait_for(layer.receive(channel), timeout=5))["type"] == "after.idle"
    finally:
        await layer.close_pools()
