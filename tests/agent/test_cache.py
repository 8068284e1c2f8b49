"""Prompt-cache lifetimes (BUDDY_CACHE_TTL): which lifetime each breakpoint gets, and what a chat's
pauses then cost through the fake Messages API, whose cache entries expire on a clock the test moves."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from agent.cache import RECENT_MESSAGES, CacheLifetimes, cache_lifetimes, chat_pace, long_pause_share
from agent.llm import usage_dict
from agent.turn import turn_run
from conversations.models import Message, ModelCall
from conversations.services import message_append
from conversations.window import window_preview

pytestmark = pytest.mark.django_db

ANCHORED = CacheLifetimes(tools="1h", system="1h", history="1h", tail="5m")
REWRITTEN = CacheLifetimes(tools="1h", system="5m", history=None, tail="5m")
ALL_ONE_HOUR = CacheLifetimes(tools="1h", system="1h", history=None, tail="1h")


def chat_with_pauses(session, pauses: list[timedelta]) -> None:
    """Archive one exchange per pause, each prompt coming that long after the reply before it."""
    at = timezone.now() - sum(pauses, timedelta()) - timedelta(minutes=len(pauses) + 1)
    for number, pause in enumerate(pauses):
        at += pause
        prompt = message_append(session=session, role="user", content=f"question {number}")
        reply = message_append(session=session, role="assistant", content=f"answer {number}")
        Message.objects.filter(pk=prompt.pk).update(created_at=at)
        at += timedelta(seconds=20)
        Message.objects.filter(pk=reply.pk).update(created_at=at)
    ModelCall.objects.create(session=session, model="m", created_at=at)


def lifetimes(session, *, window_moved=False, summary_at=None):
    return cache_lifetimes(session=session, window_moved=window_moved, summary_at=summary_at)


def test_a_chat_answered_within_minutes_anchors_at_1_hour_and_keeps_the_tail_at_5_minutes(session, settings):
    settings.BUDDY_CACHE_TTL = "auto"
    chat_with_pauses(session, [timedelta(seconds=40)] * 8 + [timedelta(minutes=12)] * 2)

    assert long_pause_share(session=session) == pytest.approx(3 / 11)  # 9 pauses: the first prompt follows none
    assert lifetimes(session) == ANCHORED


def test_a_chat_that_often_pauses_longer_than_5_minutes_writes_everything_for_1_hour(session, settings):
    settings.BUDDY_CACHE_TTL = "auto"
    chat_with_pauses(session, [timedelta(seconds=40)] * 6 + [timedelta(minutes=12)] * 4)

    assert long_pause_share(session=session) == pytest.approx(5 / 11)
    assert lifetimes(session) == ALL_ONE_HOUR


def test_only_the_last_20_turns_count(session, settings):
    settings.BUDDY_CACHE_TTL = "auto"
    chat_with_pauses(session, [timedelta(hours=2)] * 10 + [timedelta(seconds=30)] * 20)

    assert long_pause_share(session=session) == pytest.approx(1 / 22)


@pytest.mark.parametrize("exchanges", [5, 40])  # the whole chat in the window; more than the pace reads
def test_the_pace_taken_from_the_windows_rows_is_the_pace_the_query_reads(
    session, exchanges, django_assert_num_queries
):
    chat_with_pauses(session, [timedelta(minutes=minutes % 13, seconds=minutes) for minutes in range(exchanges)])
    message_append(session=session, role="user", content="the newest prompt")
    window = window_preview(session=session)
    assert window.recent.newest(RECENT_MESSAGES) is not None
    with django_assert_num_queries(1):  # the previous call's time only
        from_window = chat_pace(session=session, recent=window.recent)
    assert from_window == chat_pace(session=session)
    assert len(from_window.messages) == min(2 * exchanges + 1, RECENT_MESSAGES)
    assert from_window.previous_call_at is not None


def test_the_pace_is_read_when_the_windows_rows_do_not_hold_the_newest_messages(session, settings):
    settings.BUDDY_WINDOW_ROWS = 10
    chat_with_pauses(session, [timedelta(minutes=7)] * 2 + [timedelta(seconds=30)] * 20)
    message_append(session=session, role="user", content="the newest prompt")
    window = window_preview(session=session)
    assert window.recent.newest(RECENT_MESSAGES) is None  # 11 rows read of 45
    assert chat_pace(session=session, recent=window.recent) == chat_pace(session=session)
    assert len(chat_pace(session=session, recent=window.recent).messages) == 45


def test_a_new_chat_starts_at_1_hour(session, settings):
    settings.BUDDY_CACHE_TTL = "auto"

    assert long_pause_share(session=session) == 0.5
    assert lifetimes(session) == ALL_ONE_HOUR


def test_a_prefix_that_is_new_anyway_is_written_for_5_minutes(session, settings):
    settings.BUDDY_CACHE_TTL = "auto"
    chat_with_pauses(session, [timedelta(seconds=40)] * 10)
    previous_call = ModelCall.objects.get()

    assert lifetimes(session, window_moved=True) == REWRITTEN
    assert lifetimes(session, summary_at=previous_call.created_at + timedelta(seconds=1)) == REWRITTEN
    assert lifetimes(session, summary_at=previous_call.created_at - timedelta(seconds=1)) == ANCHORED
    ModelCall.objects.update(created_at=timezone.now() - timedelta(minutes=61))
    assert lifetimes(session) == REWRITTEN  # idle for over an hour: nothing is cached any more


@pytest.mark.parametrize("policy", ["5m", "1h"])
def test_a_fixed_lifetime_is_on_every_breakpoint(session, settings, policy):
    settings.BUDDY_CACHE_TTL = policy
    chat_with_pauses(session, [timedelta(minutes=30)] * 5)

    assert lifetimes(session, window_moved=True) == CacheLifetimes(
        tools=policy, system=policy, history=None, tail=policy
    )


def test_an_unknown_lifetime_setting_stops_the_server_from_starting():
    env = {**os.environ, "BUDDY_CACHE_TTL": "2h", "DJANGO_SETTINGS_MODULE": "buddy.settings"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
        cwd=django_settings.BASE_DIR,
        timeout=60,
    )

    assert result.returncode != 0
    assert "BUDDY_CACHE_TTL must be 5m, 1h or auto" in result.stderr


def test_usage_splits_cache_writes_by_lifetime():
    class Breakdown:
        ephemeral_5m_input_tokens = 30
        ephemeral_1h_input_tokens = 70

    class Usage:
        input_tokens, output_tokens = 5, 9
        cache_read_input_tokens, cache_creation_input_tokens = 400, 100
        cache_creation = Breakdown()

    class UsageWithoutBreakdown(Usage):
        cache_creation = None

    assert usage_dict(Usage()) == {
        "input_tokens": 5,
        "output_tokens": 9,
        "cache_read_input_tokens": 400,
        "cache_creation_input_tokens": 100,
        "cache_creation_5m_input_tokens": 30,
        "cache_creation_1h_input_tokens": 70,
    }
    without = usage_dict(UsageWithoutBreakdown())
    assert (without["cache_creation_5m_input_tokens"], without["cache_creation_1h_input_tokens"]) == (100, 0)


# --- through the fake Messages API -------------------------------------------------------------


def breakpoints(request_body) -> list[str]:
    """The lifetimes of a request's breakpoints, in prompt order (tools, system, messages)."""
    blocks = [*request_body["tools"], *request_body["system"]]
    blocks += [block for message in request_body["messages"] for block in message["content"]]
    return [block["cache_control"].get("ttl", "5m") for block in blocks if "cache_control" in block]


pacing = pytest.mark.django_db(transaction=True)


@pacing
@pytest.mark.parametrize("policy", ["auto", "1h"])
def test_after_a_20_minute_pause_the_conversation_is_still_read_from_the_cache(model, session, settings, policy):
    settings.BUDDY_CACHE_TTL = policy
    for number in range(3):
        turn_run(session=session, text=f"Question {number}: " + "tell me more about the plan. " * 40)
    model.clock.advance(minutes=20)

    turn_run(session=session, text="I am back. What did we say?")

    after_pause = ModelCall.objects.order_by("id").last()
    whole = after_pause.input_tokens + after_pause.cache_read_input_tokens + after_pause.cache_creation_input_tokens
    # Read: everything up to what was said before the last reply (under `auto` the last prompt and
    # reply, never read as 1-hour entries, are written again).
    assert after_pause.cache_read_input_tokens > 0.8 * whole
    assert after_pause.cache_creation_5m_input_tokens + after_pause.cache_creation_1h_input_tokens == (
        after_pause.cache_creation_input_tokens
    )
    assert after_pause.cache_creation_1h_input_tokens > 0


@pacing
def test_with_5_minute_lifetimes_a_20_minute_pause_writes_the_whole_prompt_again(model, session, settings):
    settings.BUDDY_CACHE_TTL = "5m"
    for number in range(3):
        turn_run(session=session, text=f"Question {number}: " + "tell me more about the plan. " * 40)
    model.clock.advance(minutes=20)

    turn_run(session=session, text="I am back. What did we say?")

    after_pause = ModelCall.objects.order_by("id").last()
    assert after_pause.cache_read_input_tokens == 0
    assert after_pause.cache_creation_5m_input_tokens == after_pause.cache_creation_input_tokens > 1024
    assert after_pause.cache_creation_1h_input_tokens == 0


@pacing
def test_auto_requests_put_longer_lifetimes_first_and_step_at_5_minutes(model, session, settings):
    settings.BUDDY_CACHE_TTL = "auto"
    settings.BUDDY_WINDOW_ROWS = 8
    settings.BUDDY_WINDOW_LOW_WATER = 0.5
    for number in range(8):
        turn_run(session=session, text=f"Question {number}")

    bodies = [request["body"] for request in model.requests]
    layouts = [breakpoints(body) for body in bodies]
    steps = [
        index
        for index in range(1, len(bodies))
        if bodies[index]["messages"][0]["content"][0]["text"] != bodies[index - 1]["messages"][0]["content"][0]["text"]
    ]
    assert steps, "the window never stepped"
    assert layouts[0] == ["1h", "1h", "1h"]  # a new chat: nothing known about its pauses yet
    for index, layout in enumerate(layouts[1:], start=1):
        assert len(layout) <= 4 and layout == sorted(layout, key=["1h", "5m"].index)
        assert layout == (["1h", "5m", "5m"] if index in steps else ["1h", "1h", "1h", "5m"])
    # Every request was accepted: the fake refuses a 1-hour breakpoint after a 5-minute one.
    assert ModelCall.objects.exclude(error="").count() == 0
