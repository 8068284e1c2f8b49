from __future__ import annotations

import asyncio
import gc
import os
import time
import uuid

import pytest
from channels_redis.core import RedisChannelLayer as StockRedisChannelLayer
from redis.asyncio.client import Redis

from realtime.layers import InMemoryChannelLayer, RedisChannelLayer


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


# --- The Redis layer (REDIS_URL) -------------------------------------------------------------------


@pytest.fixture
async def redis_layers():
    """Two layers on one Redis and a prefix of their own: two server processes' layers."""
    if not os.environ.get("REDIS_URL"):
        pytest.skip("needs REDIS_URL")
    prefix = f"buddy-layer-test-{uuid.uuid4().hex[:8]}"
    made: list[RedisChannelLayer] = []

    def make(**options) -> RedisChannelLayer:
        layer = RedisChannelLayer(hosts=[os.environ["REDIS_URL"]], prefix=prefix, **options)
        made.append(layer)
        return layer

    yield make
    if made:
        await made[0].flush()
    for layer in made:
        await layer.close_pools()


async def _received(layer: RedisChannelLayer, channel: str, count: int) -> list[dict]:
    return [await asyncio.wait_for(layer.receive(channel), timeout=10) for _ in range(count)]


async def _nothing_arrives(layer: RedisChannelLayer, channel: str, timeout: float = 0.5) -> None:
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), timeout=timeout)


@pytest.mark.redis
async def test_every_socket_of_every_process_receives_a_groups_messages_in_order(redis_layers):
    first, second = redis_layers(), redis_layers()
    here = [await first.new_channel() for _ in range(3)]
    there = [await second.new_channel() for _ in range(2)]
    for layer, channel in [(first, c) for c in here] + [(second, c) for c in there]:
        await layer.group_add("chat.1.1.abc", channel)
    messages = [{"type": "frame", "frame": {"version": n}} for n in range(30)]
    for message in messages:
        await first.group_send("chat.1.1.abc", message)
    for layer, channel in [(first, c) for c in here] + [(second, c) for c in there]:
        assert await _received(layer, channel, len(messages)) == messages
    # A message to one channel (channels' send) still reaches only it.
    await second.send(there[0], {"type": "user.logout"})
    assert await _received(second, there[0], 1) == [{"type": "user.logout"}]
    assert second.receive_buffer.get(there[1]) is None


@pytest.mark.redis
async def test_a_send_and_a_receive_each_take_few_trips_and_leave_no_copies(redis_layers, monkeypatch):
    """A group_send whose members have not changed since the last one is one trip, a receive one pop;
    nothing is kept in Redis once received."""
    layer = redis_layers()
    channel = await layer.new_channel()
    await layer.group_add("chat.1.1.abc", channel)
    await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 0}})  # scripts loaded
    await _received(layer, channel, 1)
    commands: list[str] = []
    execute_command = Redis.execute_command

    async def counted(self, *args, **options):
        commands.append(str(args[0]))
        return await execute_command(self, *args, **options)

    monkeypatch.setattr(Redis, "execute_command", counted)
    await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 1}})
    assert commands == ["EVALSHA"]
    commands.clear()
    assert await _received(layer, channel, 1) == [{"type": "frame", "frame": {"version": 1}}]
    assert commands == ["BZPOPMIN"]
    monkeypatch.undo()
    connection = layer.connection(0)
    assert await connection.keys(f"{layer.prefix}specific.*") == []


@pytest.mark.redis
async def test_a_send_reaches_the_members_of_the_moment_whoever_joined_or_left_since_the_last(redis_layers):
    first, second = redis_layers(), redis_layers()
    staying, leaving = await first.new_channel(), await first.new_channel()
    await first.group_add("chat.1.1.abc", staying)
    await first.group_add("chat.1.1.abc", leaving)
    await first.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 1}})
    assert await _received(first, staying, 1) == await _received(first, leaving, 1)
    # Another process's socket joins and one of this process's leaves, by other layers than the sender.
    joining = await second.new_channel()
    await second.group_add("chat.1.1.abc", joining)
    await second.group_discard("chat.1.1.abc", leaving)
    await first.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 2}})
    assert await _received(first, staying, 1) == [{"type": "frame", "frame": {"version": 2}}]
    assert await _received(second, joining, 1) == [{"type": "frame", "frame": {"version": 2}}]
    await _nothing_arrives(first, leaving)
    # Everyone left: the next send reaches nobody.
    await second.group_discard("chat.1.1.abc", staying)
    await second.group_discard("chat.1.1.abc", joining)
    await first.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 3}})
    for layer, channel in [(first, staying), (second, joining)]:
        await _nothing_arrives(layer, channel, timeout=0.3)


@pytest.mark.redis
async def test_a_full_channel_drops_what_comes_past_its_capacity_and_expired_members_leave(redis_layers):
    layer = redis_layers(capacity=2)
    channel = await layer.new_channel()
    await layer.group_add("chat.1.1.abc", channel)
    for version in range(3):
        await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": version}})
    assert [m["frame"]["version"] for m in await _received(layer, channel, 2)] == [0, 1]
    await _nothing_arrives(layer, channel)

    # A membership older than group_expiry is dropped by the next send, which reaches nobody.
    layer.group_expiry = -10
    await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 3}})
    assert await layer.connection(0).zcard(layer._group_key("chat.1.1.abc")) == 0
    await _nothing_arrives(layer, channel)


@pytest.mark.redis
async def test_messages_past_their_expiry_are_dropped_before_the_next_one(redis_layers):
    layer = redis_layers(expiry=60)
    channel = await layer.new_channel()
    await layer.group_add("chat.1.1.abc", channel)
    await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 1}})
    # The first message aged past the expiry (its score is when it was sent).
    key = layer.prefix + layer.non_local_name(channel)
    connection = layer.connection(0)
    [(member, _)] = await connection.zrange(key, 0, -1, withscores=True)
    await connection.zadd(key, {member: time.time() - 120})
    await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 2}})
    assert await _received(layer, channel, 1) == [{"type": "frame", "frame": {"version": 2}}]


@pytest.mark.redis
async def test_a_receive_cancelled_while_waiting_loses_nothing_sent_after(redis_layers):
    layer = redis_layers()
    channel = await layer.new_channel()
    await layer.group_add("chat.1.1.abc", channel)
    waiting = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0.3)  # blocked in its pop
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await layer.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 1}})
    assert await _received(layer, channel, 1) == [{"type": "frame", "frame": {"version": 1}}]


@pytest.mark.redis
async def test_processes_on_channels_redis_own_layer_and_on_this_one_reach_each_other(redis_layers):
    """Same keys, same messages: during a rolling deploy old and new processes still share their frames."""
    ours = redis_layers()
    stock = StockRedisChannelLayer(hosts=[os.environ["REDIS_URL"]], prefix=ours.prefix)
    try:
        ours_channel, stock_channel = await ours.new_channel(), await stock.new_channel()
        await ours.group_add("chat.1.1.abc", ours_channel)
        await stock.group_add("chat.1.1.abc", stock_channel)
        await ours.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 1}})
        await stock.group_send("chat.1.1.abc", {"type": "frame", "frame": {"version": 2}})
        expected = [{"type": "frame", "frame": {"version": 1}}, {"type": "frame", "frame": {"version": 2}}]
        assert await _received(ours, ours_channel, 2) == expected
        assert await _received(stock, stock_channel, 2) == expected
    finally:
        await stock.close_pools()


@pytest.mark.redis
async def test_a_socket_that_closes_never_takes_another_sockets_message_with_it(redis_layers):
    """All sockets of a process share one Redis key. A socket closing (its receive cancelled) just after
    Redis handed over a message for another socket of the process must not lose that message
    (channels_redis#366: with the stock layer, the closing socket's receive is the one popping)."""
    layer = redis_layers()
    staying = await layer.new_channel()
    for version in range(20):
        closing = await layer.new_channel()
        closing_receive = asyncio.ensure_future(layer.receive(closing))
        await asyncio.sleep(0.05)  # its receive is the first of the process: it is the one waiting on Redis
        staying_receive = asyncio.ensure_future(layer.receive(staying))
        await layer.send(staying, {"type": "frame", "frame": {"version": version}})  # Redis hands it over
        closing_receive.cancel()
        assert await asyncio.wait_for(staying_receive, timeout=10) == {"type": "frame", "frame": {"version": version}}
        with pytest.raises(asyncio.CancelledError):
            await closing_receive
    assert set(layer.receive_buffer) == set()


@pytest.mark.redis
async def test_a_waiting_receive_hears_of_a_failed_pop_and_the_next_one_pops_again(redis_layers, monkeypatch):
    layer = redis_layers()
    channel = await layer.new_channel()
    pop = RedisChannelLayer._pop

    async def failing(self, channel):
        raise ConnectionError("Redis went away")

    monkeypatch.setattr(RedisChannelLayer, "_pop", failing)
    loop = asyncio.get_running_loop()
    unhandled: list[dict] = []
    loop.set_exception_handler(lambda loop, context: unhandled.append(context))
    try:
        with pytest.raises(ConnectionError, match="went away"):
            await asyncio.wait_for(layer.receive(channel), timeout=10)
        await asyncio.sleep(0)
        gc.collect()  # a task whose exception nobody retrieved says so when collected
    finally:
        loop.set_exception_handler(None)
    # The pump logged the failure and ended: no "Task exception was never retrieved" on every Redis blip.
    assert unhandled == []
    monkeypatch.setattr(RedisChannelLayer, "_pop", pop)
    await layer.send(channel, {"type": "user.logout"})
    assert await _received(layer, channel, 1) == [{"type": "user.logout"}]


@pytest.mark.redis
async def test_messages_for_a_closed_socket_are_dropped_after_the_layers_expiry(redis_layers):
    layer = redis_layers()
    gone, staying = await layer.new_channel(), await layer.new_channel()
    gone_receive = asyncio.ensure_future(layer.receive(gone))
    await asyncio.sleep(0.05)
    gone_receive.cancel()
    staying_receive = asyncio.ensure_future(layer.receive(staying))
    await layer.send(gone, {"type": "frame", "frame": {"version": 1}})
    await layer.send(staying, {"type": "frame", "frame": {"version": 1}})
    await asyncio.wait_for(staying_receive, timeout=10)
    assert layer.receive_buffer[gone].qsize() == 1  # kept a while: the socket may only be between receives
    layer.expiry = 0
    staying_receive = asyncio.ensure_future(layer.receive(staying))
    await layer.send(staying, {"type": "frame", "frame": {"version": 2}})
    await asyncio.wait_for(staying_receive, timeout=10)
    assert gone not in layer.receive_buffer


@pytest.mark.redis
async def test_two_receives_on_one_channel_each_get_a_message_whichever_takes_the_first(redis_layers):
    """A receive that starts just after the pop that had the first receive's message, and takes that message
    (channels hands a channel's messages to whichever receive comes first), leaves the first receive
    waiting with the layer still popping for it."""
    layer, sender = redis_layers(), redis_layers()
    channel = await layer.new_channel()
    first = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0.2)  # waiting on Redis
    sent = asyncio.ensure_future(sender.send(channel, {"type": "frame", "frame": {"version": 1}}))
    async with asyncio.timeout(10):
        # Looking once per turn of the loop: the pop's message is buffered one turn before the first
        # receive, woken by it, runs.
        while not layer.receive_buffer[channel].qsize():
            await asyncio.sleep(0)
        assert not first.done()
        second = await layer.receive(channel)
    await sent
    await sender.send(channel, {"type": "frame", "frame": {"version": 2}})
    assert [second, await asyncio.wait_for(first, timeout=10)] == [
        {"type": "frame", "frame": {"version": version}} for version in (1, 2)
    ]


@pytest.mark.redis
async def test_every_receive_waiting_when_the_pop_fails_hears_of_it(redis_layers, monkeypatch):
    layer = redis_layers()
    channel = await layer.new_channel()

    async def failing(self, channel):
        await asyncio.sleep(0.1)
        raise ConnectionError("Redis went away")

    monkeypatch.setattr(RedisChannelLayer, "_pop", failing)
    receives = [asyncio.ensure_future(layer.receive(channel)) for _ in range(2)]
    failed = await asyncio.wait_for(asyncio.gather(*receives, return_exceptions=True), timeout=5)
    assert [type(error) for error in failed] == [ConnectionError, ConnectionError]


@pytest.mark.redis
async def test_a_receive_that_had_its_message_before_the_pop_failed_gets_the_next_as_usual(redis_layers, monkeypatch):
    layer = redis_layers()
    served, waiting = await layer.new_channel(), await layer.new_channel()
    pops = iter([(served, {"type": "frame", "frame": {"version": 1}})])

    async def pop_then_fail(self, channel):
        for popped in pops:
            return popped
        raise ConnectionError("Redis went away")

    monkeypatch.setattr(RedisChannelLayer, "_pop", pop_then_fail)
    receives = [asyncio.ensure_future(layer.receive(channel)) for channel in (served, waiting)]
    done = await asyncio.wait_for(asyncio.gather(*receives, return_exceptions=True), timeout=5)
    assert done[0] == {"type": "frame", "frame": {"version": 1}}
    assert isinstance(done[1], ConnectionError)
    monkeypatch.undo()  # Redis is back
    await layer.send(served, {"type": "frame", "frame": {"version": 2}})
    assert await _received(layer, served, 1) == [{"type": "frame", "frame": {"version": 2}}]
