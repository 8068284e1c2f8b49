"""The channel layers: channels' in-memory one for the embedded default (one server process, no Redis),
and channels-redis' for several processes (REDIS_URL) — each with fewer steps per message."""

from __future__ import annotations

import time
from typing import Any

from channels.layers import InMemoryChannelLayer as StockInMemoryChannelLayer
from channels_redis.core import RedisChannelLayer as StockRedisChannelLayer
from channels_redis.core import logger as stock_logger


class InMemoryChannelLayer(StockInMemoryChannelLayer):
    """channels' in-memory layer, sweeping expired messages and memberships at most once a second.

    The stock layer sweeps every channel and every group membership on each receive() and
    group_send(): a broadcast to N sockets makes N receives, so it costs O(N²) — with a thousand sockets
    a single canvas change would be slow to reach them all (docs/benchmarks.md). Expiry only has to happen
    eventually: it frees the messages of channels that nobody reads any more.
    """

    sweep_interval = 1.0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._next_sweep = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_interval
        super()._clean_expired()


# The group's live members, its expired ones dropped first (ZREMRANGEBYSCORE, then ZRANGE).
_GROUP_MEMBERS_LUA = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[1])
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""

# One message per channel key: drop the key's expired messages, then add the message unless the key is at
# its capacity (ARGV: the messages, then the capacities, then the time and the expiry). Returns how many
# keys were at capacity.
_GROUP_DELIVER_LUA = """
local over_capacity = 0
local now = ARGV[#ARGV - 1]
local expiry = ARGV[#ARGV]
local oldest = math.floor(tonumber(now)) - tonumber(expiry)
for i = 1, #KEYS do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, oldest)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[i + #KEYS]) then
        redis.call('ZADD', KEYS[i], now, ARGV[i])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        over_capacity = over_capacity + 1
    end
end
return over_capacity
"""


class RedisChannelLayer(StockRedisChannelLayer):
    """channels-redis' layer, the same messages in the same Redis keys, in fewer trips to Redis.

    Every frame of a turn is one group_send and, in each server process with a socket of the chat, one
    receive; each Redis trip costs the event loop far more than the command costs Redis:

    - group_send reads the group's members in one script and delivers in one script per Redis host, run
      by its digest (EVALSHA): two trips, where the stock layer makes four (two commands, a
      MULTI/EXEC pipeline trimming expired messages, and the whole script's text).
    - receive pops with one BZPOPMIN. The stock layer also copies each popped message into an
      `$inflight` sorted set, removes it from there once returned, and moves whatever is left there back
      before each pop: four trips per message. That copy is made only after the pop has returned, so a
      receive cancelled while it waits on the pop loses the message either way (channels_redis#366);
      it guards nothing but the trip that makes it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scripts: dict[str, Any] = {}

    def _script(self, connection: Any, text: str) -> Any:
        """The script registered once (its digest computed once); run on any of the layer's connections."""
        script = self._scripts.get(text)
        if script is None:
            script = self._scripts[text] = connection.register_script(text)
        return script

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert self.require_valid_group_name(group), "Group name not valid"
        connection = self.connection(self.consistent_hash(group))
        members = await self._script(connection, _GROUP_MEMBERS_LUA)(
            keys=[self._group_key(group)], args=[int(time.time()) - self.group_expiry], client=connection
        )
        channel_names = [member.decode("utf8") for member in members]
        keys_by_connection, message_by_key, capacity_by_key = self._map_channel_keys_to_connection(
            channel_names, message
        )
        for index, channel_keys in keys_by_connection.items():
            connection = self.connection(index)
            args = [message_by_key[key] for key in channel_keys]
            args += [capacity_by_key[key] for key in channel_keys]
            args += [time.time(), int(self.expiry)]
            over_capacity = await self._script(connection, _GROUP_DELIVER_LUA)(
                keys=channel_keys, args=args, client=connection
            )
            if over_capacity > 0:
                # On the stock layer's logger, as it does: a socket that misses a frame asks for a replay.
                stock_logger.info(
                    "%s of %s channels over capacity in group %s", over_capacity, len(channel_names), group
                )

    async def receive_single(self, channel: str) -> tuple[str, dict[str, Any]]:
        """Pop one message off `channel` (the process's channel, for a specific one), waiting for it."""
        assert self.require_valid_channel_name(channel, receive=True), "Channel name invalid"
        if "!" in channel:
            assert channel.endswith("!")
            index = self.consistent_hash(channel)
        else:
            index = next(self._receive_index_generator)
        connection = self.connection(index)
        channel_key = self.prefix + channel
        popped = None
        while popped is None:
            popped = await connection.bzpopmin(channel_key, timeout=self.brpop_timeout)
        message = self.deserialize(popped[1])
        # A message sent to specific channels names them; the caller hands it to each one's buffer.
        if "__asgi_channel__" in message:
            channel = message.pop("__asgi_channel__")
        return channel, message
