"""A flood of prompt frames on one socket is refused in memory (docs/security.md, "Floods"): no database
write per refused frame, the socket stays open, and another user's turn still completes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from channels.db import database_sync_to_async
from django.db.backends import utils as backend_utils

from agent.limits import PromptBucket, RateLimited
from conversations.models import Message
from tests.canvas.examples import ADD_EXAMPLES
from tests.web.test_consumer import apply, login_cookie, opened, stored_state
from tests.web.test_consumer_turns import frames_until

pytestmark = pytest.mark.django_db(transaction=True)

FLOOD = 100


@contextmanager
def statements() -> Iterator[list[str]]:
    """Every SQL statement any thread runs meanwhile (a refusal may run on any of the consumer's threads)."""
    seen: list[str] = []
    lock = threading.Lock()
    execute, executemany = backend_utils.CursorWrapper.execute, backend_utils.CursorWrapper.executemany

    def recorded(method):
        def wrapper(self, sql, *args, **kwargs):
            with lock:
                seen.append(str(sql))
            return method(self, sql, *args, **kwargs)

        return wrapper

    backend_utils.CursorWrapper.execute = recorded(execute)
    backend_utils.CursorWrapper.executemany = recorded(executemany)
    try:
        yield seen
    finally:
        backend_utils.CursorWrapper.execute, backend_utils.CursorWrapper.executemany = execute, executemany


async def replies_indexed() -> None:
    """Wait for what the turns answered so far write after their reply is out: their search documents
    (agent.turn)."""
    unindexed = database_sync_to_async(lambda: Message.objects.filter(search_document__isnull=True).exists())
    for _ in range(400):
        if not await unindexed():
            return
        await asyncio.sleep(0.025)
    raise AssertionError("the turns' messages were never indexed")


def writes(sql: list[str]) -> list[str]:
    return [s for s in sql if s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]


async def refusals(socket, count: int) -> list[str]:
    """The codes of the next `count` error frames (other frames skipped)."""
    codes: list[str] = []
    while len(codes) < count:
        frame = await socket.receive_json_from(timeout=30)
        if frame["type"] == "error":
            codes.append(frame["code"])
    return codes


async def test_a_prompt_flood_past_the_rate_limit_writes_nothing_and_another_users_turn_completes(
    user, other_user, agent, settings
):
    settings.BUDDY_PROMPTS_PER_MINUTE = 2
    mine, theirs = await login_cookie(user), await login_cookie(other_user)
    async with opened(mine) as flooder, opened(theirs) as neighbour:
        for text in ("one", "two"):
            await flooder.send_json_to({"type": "prompt", "text": text})
            await frames_until(flooder, "assistant_message")
        await replies_indexed()
        with statements() as sql:
            for index in range(FLOOD):
                await flooder.send_json_to({"type": "prompt", "text": f"flood {index}"})
            codes = await refusals(flooder, FLOOD)
        assert set(codes) == {"rate_limited"}
        assert writes(sql) == []  # one counter UPDATE per refused frame would show here
        await neighbour.send_json_to({"type": "prompt", "text": "hello during the flood"})
        reply = await frames_until(neighbour, "assistant_message")
        assert "hello during the flood" in reply[-1]["text"]
        await flooder.send_json_to({"type": "replay"})  # the flooded socket stays open
        while (frame := await flooder.receive_json_from(timeout=10))["type"] != "canvas_command":
            assert frame["type"] == "chats_changed"  # its own turns', which may come after refusals


async def test_a_prompt_flood_while_a_turn_runs_is_refused_without_the_database(user, agent, fake_anthropic, settings):
    settings.BUDDY_LLM_RETRIES = 0
    fake_anthropic.queue_text("slow " * 60)
    fake_anthropic.delay_stream(1.5)  # ~10 events: a turn of some 15 s, longer than the flood takes
    cookie = await login_cookie(user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "prompt", "text": "first"})
        await frames_until(tab, "assistant_delta")
        with statements() as sql:
            for index in range(FLOOD):
                await tab.send_json_to({"type": "prompt", "text": f"flood {index}"})
            codes = await refusals(tab, FLOOD)
        assert set(codes) == {"turn_running"}
        # The running turn itself writes (its deltas' lease renewals); the refusals neither count a
        # prompt nor check the login nor try the lease.
        assert not [s for s in sql if "ratecounter" in s.lower()]
        assert not [s for s in sql if "auth_user" in s.lower() and s.lstrip().upper().startswith("SELECT")]
        await frames_until(tab, "assistant_message")
        fake_anthropic.delay_stream(0)
        # Once the turn has ended, the next prompt runs.
        await tab.send_json_to({"type": "prompt", "text": "after"})
        assert "after" in (await frames_until(tab, "assistant_message"))[-1]["text"]


async def test_a_flood_of_answers_past_the_rate_limit_takes_no_lock_and_leaves_the_question_open(session, settings):
    """Answering a confirmation runs a turn: past the bucket it is refused before the answer's
    transaction (which locks the chat's canvas), and the question stays to be answered."""
    settings.BUDDY_PROMPTS_PER_MINUTE = 1
    await apply(session, "canvas_show_confirmation", **ADD_EXAMPLES["canvas_show_confirmation"])
    cookie = await login_cookie(session.user)
    async with opened(cookie) as tab:
        await tab.send_json_to({"type": "prompt", "text": "spends the minute's prompt"})
        await frames_until(tab, "assistant_message")
        await replies_indexed()
        with statements() as sql:
            for _ in range(FLOOD):
                await tab.send_json_to({"type": "confirmation_response", "id": "go", "confirmed": True})
            codes = await refusals(tab, FLOOD)
        assert set(codes) == {"rate_limited"}
        assert writes(sql) == []
        assert not [s for s in sql if "canvas" in s.lower()]  # not even the canvas lock's read
    assert "answered" not in (await stored_state(session))["elements"][0]


def test_the_bucket_refills_evenly_and_says_when_the_next_prompt_is_allowed():
    now = [0.0]
    bucket = PromptBucket(per_minute=3, clock=lambda: now[0])
    for _ in range(3):
        bucket.take()
    with pytest.raises(RateLimited) as refused:
        bucket.take()
    assert refused.value.retry_after == 20
    now[0] = 19.0
    with pytest.raises(RateLimited):
        bucket.take()
    now[0] = 20.0
    bucket.take()
    now[0] = 1000.0  # a long pause refills at most a minute's prompts
    for _ in range(3):
        bucket.take()
    with pytest.raises(RateLimited):
        bucket.take()


def test_a_bucket_of_zero_is_no_limit():
    bucket = PromptBucket(per_minute=0)
    for _ in range(100):
        bucket.take()
