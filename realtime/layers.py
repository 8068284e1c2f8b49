"""The channel layers: channels' in-memory one for the embedded default (one server process, no Redis),
and channels-redis' for several processes (REDIS_URL) — each with fewer steps per message."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
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


# A group_send in one script, if the group's members are the ones the sender expects: it drops the
# group's expired members, compares, and delivers one message per channel key (each key's expired
# messages dropped first, the message added unless the key is at its capacity). Else it delivers nothing
# and answers the members, for the sender to build the messages again.
# KEYS: the group, then the channel keys. ARGV: the oldest membership kept, the number of members
# expected, the members, one message per channel key, one capacity per channel key, the time, the expiry.
# Answers {1, how many keys were at capacity} or {0, the members}.
_GROUP_SEND_LUA = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[1])
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local expected = tonumber(ARGV[2])
if #members ~= expected then
    return {0, members}
end
for i = 1, expected do
    if members[i] ~= ARGV[2 + i] then
        return {0, members}
    end
end
local keys = #KEYS - 1
local at = 2 + expected
local now = ARGV[at + 2 * keys + 1]
local expiry = ARGV[at + 2 * keys + 2]
local oldest = math.floor(tonumber(now)) - tonumber(expiry)
local over_capacity = 0
for i = 1, keys do
    local key = KEYS[i + 1]
    redis.call('ZREMRANGEBYSCORE', key, 0, oldest)
    if redis.call('ZCOUNT', key, '-inf', '+inf') < tonumber(ARGV[at + keys + i]) then
        redis.call('ZADD', key, now, ARGV[at + i])
        redis.call('EXPIRE', key, expiry)
    else
        over_capacity = over_capacity + 1
    end
end
return {1, over_capacity}
"""


class RedisChannelLayer(StockRedisChannelLayer):
    """channels-redis' layer, the same messages in the same Redis keys, in fewer trips to Redis.

    Every frame of a turn is one group_send and, in each server process with a socket of the chat, one
    receive; each Redis trip costs the event loop far more than the command costs Redis:

    - group_send is one script run by its digest (EVALSHA), given the members this process last saw in
      the group: it checks them and delivers in the same step, or answers the group's members when they
      changed (one more trip). The stock layer makes four trips: two commands, a MULTI/EXEC pipeline
      trimming expired messages, and the whole script's text. With several Redis hosts a channel's key
      may live on another host than its group: the stock group_send then.
    - receive pops with one BZPOPMIN. The stock layer also copies each popped message into an
      `$inflight` sorted set, removes it from there once returned, and moves whatever is left there back
      before each pop: four trips per message. That copy is made only after the pop has returned, so it
      guards nothing but the trip that makes it.

    All the sockets of a process share one Redis key. In the stock layer, whichever socket's receive
    comes first pops for all of them; when that socket closes, its receive is cancelled, and a message
    Redis had already handed over — to any socket of the process — is lost (channels_redis#366). Here
    the pops are made by a task of the layer's own (the pump), which no socket's cancellation reaches:
    a receive only waits on its channel's buffer.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scripts: dict[str, Any] = {}
        self._members: dict[str, list[str]] = {}  # group → its members at this process's last send
        self._pump: asyncio.Task | None = None
        self._waiting: Counter[str] = Counter()  # channel → receives waiting on it
        self._unread_since: dict[str, float] = {}  # channel with buffered messages and no receive → since

    def _script(self, connection: Any, text: str) -> Any:
        """The script registered once (its digest computed once); run on any of the layer's connections."""
        script = self._scripts.get(text)
        if script is None:
            script = self._scripts[text] = connection.register_script(text)
        return script

    # Groups whose members this process remembers, at most: past it, it starts again from none (a group it
    # forgot costs one more trip on its next send).
    members_remembered = 10_000
    # Tries of the script, each with the members the last one answered, before a group whose members keep
    # changing is sent to the stock way (members read, then delivered).
    group_send_attempts = 3

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if self.ring_size > 1:
            await super().group_send(group, message)
            return
        assert self.require_valid_group_name(group), "Group name not valid"
        connection = self.connection(0)
        script = self._script(connection, _GROUP_SEND_LUA)
        members = self._members.get(group, [])
        for _ in range(self.group_send_attempts):
            _, message_by_key, capacity_by_key = self._map_channel_keys_to_connection(members, message)
            channel_keys = list(message_by_key)
            args = [int(time.time()) - self.group_expiry, len(members), *members, *message_by_key.values()]
            args += [capacity_by_key[key] for key in channel_keys]
            args += [time.time(), int(self.expiry)]
            sent, answer = await script(keys=[self._group_key(group), *channel_keys], args=args, client=connection)
            if sent:
                self._members_remember(group, members)
                if answer > 0:
                    # On the stock layer's logger, as it does: a socket that misses a frame asks for a replay.
                    stock_logger.info("%s of %s channels over capacity in group %s", answer, len(members), group)
                return
            members = [member.decode("utf8") for member in answer]
        self._members.pop(group, None)
        await super().group_send(group, message)

    def _members_remember(self, group: str, members: list[str]) -> None:
        if not members:
            self._members.pop(group, None)
            return
        if group not in self._members and len(self._members) >= self.members_remembered:
            self._members.clear()
        self._members[group] = members

    async def receive(self, channel: str) -> dict[str, Any]:
        if "!" not in channel:
            return (await self.receive_single(channel))[1]
        assert self.require_valid_channel_name(channel), "Channel name not valid"
        real_channel = self.non_local_name(channel)
        assert real_channel.endswith(self.client_prefix + "!"), "Wrong client prefix"
        buffer = self.receive_buffer[channel]
        self._unread_since.pop(channel, None)
        # A buffered message may be the one a waiting receive was just woken for: when this receive takes it
        # first, that receive is left waiting, and the pump must go on for it.
        if buffer.qsize() <= self._waiting[channel]:
            self._pump_start(real_channel)
        self._waiting[channel] += 1
        try:
            message = await buffer.get()  # a cancelled get takes nothing off the buffer
        finally:
            self._waiting[channel] -= 1
            if not self._waiting[channel]:
                del self._waiting[channel]
                if buffer.empty():
                    if self.receive_buffer.get(channel) is buffer:
                        del self.receive_buffer[channel]
                else:
                    self._unread_since[channel] = time.monotonic()
        if isinstance(message, _PumpFailed):
            raise message.error
        return message

    def _pump_start(self, real_channel: str) -> None:
        loop = asyncio.get_running_loop()
        pump = self._pump
        if pump is not None and not pump.done():
            if pump.get_loop() is loop:
                return
            if pump.get_loop().is_running():
                raise RuntimeError("Two event loops are trying to receive() on one channel layer at once!")
        self._pump = loop.create_task(self._pump_run(real_channel), name="channel-layer-pump")

    async def _pump_run(self, real_channel: str) -> None:
        """Pop the process's messages into their channels' buffers while a receive waits for one."""
        try:
            while True:
                popped = await self._pop(real_channel)
                if popped is not None:
                    channels, message = popped
                    for channel in channels if isinstance(channels, list) else [channels]:
                        self.receive_buffer[channel].put_nowait(message)
                        if channel not in self._waiting:
                            self._unread_since.setdefault(channel, time.monotonic())
                self._unread_drop()
                if not any(count > self.receive_buffer[c].qsize() for c, count in self._waiting.items()):
                    return  # every waiting receive has its message; the next receive starts a pump again
        except Exception as error:
            # One failure for each receive still without a message; a receive whose message came first
            # gets it, and the next receive on its channel pops again.
            for channel, count in self._waiting.items():
                buffer = self.receive_buffer[channel]
                for _ in range(count - buffer.qsize()):
                    buffer.put_nowait(_PumpFailed(error))
            # Said here, once: the receives raise it, and nobody awaits the pump to hear it again.
            stock_logger.warning("could not pop the process's messages: %r", error)
        finally:
            if self._pump is asyncio.current_task():
                self._pump = None

    def _unread_drop(self) -> None:
        """Drop the buffers of channels nobody received from for the layer's expiry (a closed socket's), as
        Redis drops the messages of a channel nobody reads."""
        oldest = time.monotonic() - self.expiry
        for channel in [c for c, since in self._unread_since.items() if since < oldest]:
            del self._unread_since[channel]
            self.receive_buffer.pop(channel, None)

    async def receive_single(self, channel: str) -> tuple[str, dict[str, Any]]:
        """Pop one message off `channel` (the process's channel, for a specific one), waiting for it."""
        popped = None
        while popped is None:
            popped = await self._pop(channel)
        return popped

    async def _pop(self, channel: str) -> tuple[str | list[str], dict[str, Any]] | None:
        """One message off `channel`, or None when none came within `brpop_timeout`."""
        assert self.require_valid_channel_name(channel, receive=True), "Channel name invalid"
        if "!" in channel:
            assert channel.endswith("!")
            index = self.consistent_hash(channel)
        else:
            index = next(self._receive_index_generator)
        popped = await self.connection(index).bzpopmin(self.prefix + channel, timeout=self.brpop_timeout)
        if popped is None:
            return None
        message = self.deserialize(popped[1])
        # A message sent to specific channels names them; the pump hands it to each one's buffer.
        if "__asgi_channel__" in message:
            channel = message.pop("__asgi_channel__")
        return channel, message


@dataclass
class _PumpFailed:
    """Put in a waiting receive's buffer when the pump failed: that receive raises `error`."""

    error: Exception
