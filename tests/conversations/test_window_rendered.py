"""The process-wide cache of rendered window rows (conversations/window/rendered.py): a row changed in
the archive is rendered again, the bound holds, the block cap's setting is honoured, threads share it
safely, and what the window's users do with a window leaves the cached rows as they were."""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings as django_settings
from django.db.models import TextField
from django.db.models.functions import Cast

from agent.prompt import request_build
from conversations.content import dumps_compact, estimate_tokens
from conversations.models import Message
from conversations.services import message_append
from conversations.window import window_preview, window_render
from conversations.window.blocks import text_block
from conversations.window.plan import Limits, Row, plan_window, row_from_content
from conversations.window.rendered import RenderedRow, RenderedRows, rendered_rows

LIMITS = Limits(budget=100_000, rows=50, low_water=0.7, block_cap=20_000)


def exchange_rows(turns: int, *, first_id: int = 1, text_length: int = 40) -> list[Row]:
    rows = []
    for turn in range(turns):
        message_id = first_id + 2 * turn
        rows.append(
            row_from_content(message_id, "user", [text_block(f"question {turn} " + "q" * text_length)], stored=True)
        )
        rows.append(
            row_from_content(
                message_id + 1, "assistant", [text_block(f"answer {turn} " + "a" * text_length)], stored=True
            )
        )
    return rows


def entry(raw: str) -> RenderedRow:
    return RenderedRow(raw, "user", 1, [], [])


def test_the_bound_holds_and_the_least_recently_used_row_goes_first():
    cache = RenderedRows(max_chars=100)
    for message_id in (1, 2):
        cache.put(message_id, 10, entry("x" * 40))
    assert cache.get(1, 10, raw="x" * 40, role="user", largest_block_tokens=1) is not None  # 1 is now the newer
    cache.put(3, 10, entry("x" * 40))
    assert cache.chars == 80 and len(cache) == 2
    assert cache.get(2, 10, raw="x" * 40, role="user", largest_block_tokens=1) is None
    assert cache.get(1, 10, raw="x" * 40, role="user", largest_block_tokens=1) is not None
    cache.put(4, 10, entry("x" * 101))  # longer than the whole bound: never kept
    assert cache.chars == 80 and len(cache) == 2
    cache.put(1, 10, entry("y" * 60))  # a row rendered again replaces its entry
    assert cache.chars == 100 and len(cache) == 2


def test_an_entry_serves_only_the_very_text_and_facts_it_was_made_from():
    cache = RenderedRows()
    cache.put(7, 10, RenderedRow('[{"type":"text","text":"a"}]', "user", 1, [], []))
    assert cache.get(7, 10, raw='[{"type":"text","text":"a"}]', role="user", largest_block_tokens=1) is not None
    assert cache.get(7, 10, raw='[{"type":"text","text":"b"}]', role="user", largest_block_tokens=1) is None
    assert cache.get(7, 10, raw='[{"type":"text","text":"a"}]', role="assistant", largest_block_tokens=1) is None
    assert cache.get(7, 10, raw='[{"type":"text","text":"a"}]', role="user", largest_block_tokens=2) is None
    assert cache.get(7, 11, raw='[{"type":"text","text":"a"}]', role="user", largest_block_tokens=1) is None


def test_a_plan_with_the_cache_sends_what_a_plan_without_it_sends_and_renders_each_row_once():
    cache = RenderedRows()
    first = plan_window(exchange_rows(10), effective_start_id=1, limits=LIMITS, shared=cache)
    assert len(cache) == 20
    again_rows = exchange_rows(10)
    again = plan_window(again_rows, effective_start_id=1, limits=LIMITS, shared=cache)
    uncached = plan_window(exchange_rows(10), effective_start_id=1, limits=LIMITS)
    assert dumps_compact(again.messages) == dumps_compact(first.messages) == dumps_compact(uncached.messages)
    assert again.tokens == first.tokens == uncached.tokens
    # No row of the second plan was decoded from its text again: the rows after the first are sent as
    # cached, and a row rendered as a window's first (the turn starts) took the cached content.
    assert cache.pieces() == 19
    for row in again_rows:
        if row.decoded:
            cached = cache.get(
                row.id, LIMITS.block_cap, raw=row.raw, role=row.role, largest_block_tokens=row.largest_block_tokens
            )
            assert row.content is cached.content
    assert again_rows[0].decoded and sum(row.decoded for row in again_rows) < len(again_rows) // 2


def test_a_row_is_sent_again_as_the_row_before_it_now_asks():
    """A tool result after a tool call is sent as such; once the call is gone from the row before
    (the same ids, the text changed), the same stored result is sent as a note."""
    cache = RenderedRows()
    call = {"type": "tool_use", "id": "toolu_1", "name": "search_history", "input": {"query": "x"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}

    def rows(assistant_content: list[dict]) -> list[Row]:
        return [
            row_from_content(1, "user", [text_block("look it up")], stored=True),
            row_from_content(2, "assistant", assistant_content, stored=True),
            row_from_content(3, "user", [result], stored=True),
            row_from_content(4, "assistant", [text_block("done")], stored=True),
            row_from_content(5, "user", [text_block("thanks")], stored=True),
        ]

    for content in ([call], [text_block("no call after all")], [call]):
        cached = plan_window(rows(content), effective_start_id=1, limits=LIMITS, shared=cache)
        alone = plan_window(rows(content), effective_start_id=1, limits=LIMITS)
        assert dumps_compact(cached.messages) == dumps_compact(alone.messages)
        assert cached.tokens == alone.tokens
        assert (cached.messages[2]["content"][0]["type"] == "tool_result") == (content == [call])


def test_threads_sharing_a_small_cache_get_the_windows_they_would_get_alone():
    cache = RenderedRows(max_chars=3_000)  # far below the rows' texts: entries come and go all the time
    archives = [exchange_rows(12, first_id=1000 * n, text_length=20 + 7 * n) for n in range(8)]
    expected = [
        dumps_compact(plan_window(rows, effective_start_id=rows[0].id, limits=LIMITS).messages) for rows in archives
    ]
    start = threading.Barrier(16)

    def work(worker: int) -> list[bool]:
        start.wait()
        same = []
        for round_number in range(40):
            n = (worker + round_number) % len(archives)
            rows = exchange_rows(12, first_id=1000 * n, text_length=20 + 7 * n)
            plan = plan_window(rows, effective_start_id=rows[0].id, limits=LIMITS, shared=cache)
            same.append(dumps_compact(plan.messages) == expected[n])
        return same

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between almost any two bytecodes: races show
    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            results = [same for batch in pool.map(work, range(16)) for same in batch]
    finally:
        sys.setswitchinterval(switch_interval)
    assert all(results)
    assert cache.chars == cache.chars_counted() <= cache.max_chars
    assert cache.pieces() <= len(cache)  # a row as sent leaves with its entry


@pytest.mark.django_db
def test_a_message_changed_in_the_archive_is_not_served_stale(session):
    message_append(session=session, role="user", content="the first question")
    reply = message_append(session=session, role="assistant", content="the first answer")
    message_append(session=session, role="user", content="the second question")
    assert "the first answer" in dumps_compact(window_preview(session=session).messages)
    changed = [{"type": "text", "text": "[redacted]"}]
    Message.objects.filter(pk=reply.pk).update(content=changed, tokens=estimate_tokens(changed))
    sent = dumps_compact(window_preview(session=session).messages)
    assert "[redacted]" in sent and "the first answer" not in sent


@pytest.mark.django_db
def test_a_changed_block_cap_setting_is_honoured(session, settings):
    long_text = "word " * 3_000  # about 3,750 tokens
    message_append(session=session, role="user", content=long_text)
    message_append(session=session, role="assistant", content="noted")
    message_append(session=session, role="user", content="and now?")
    settings.BUDDY_MAX_PROMPT_TOKENS = 10_000
    assert window_preview(session=session).messages[0]["content"][0]["text"] == long_text
    settings.BUDDY_MAX_PROMPT_TOKENS = 1_000
    shortened = window_preview(session=session).messages[0]["content"][0]["text"]
    assert shortened != long_text and "characters omitted" in shortened
    assert len(shortened) <= 1_000 * 4
    settings.BUDDY_MAX_PROMPT_TOKENS = 10_000
    assert window_preview(session=session).messages[0]["content"][0]["text"] == long_text


@pytest.mark.django_db
def test_what_the_windows_users_add_leaves_the_cached_rows_as_stored(session):
    for number in range(3):
        message_append(session=session, role="user", content=f"question {number}")
        message_append(session=session, role="assistant", content=f"answer {number}")
    message_append(session=session, role="user", content="the newest question")
    window = window_preview(session=session)
    request_build(session=session, window_messages=window.messages)
    for message in window_render(window):
        message["content"][-1]["cache_control"] = {"type": "ephemeral"}
    for message in Message.objects.filter(session=session).order_by("id"):
        raw = _stored_text(message.pk)
        cached = rendered_rows.get(
            message.pk,
            django_settings.BUDDY_MAX_PROMPT_TOKENS,
            raw=raw,
            role=message.role,
            largest_block_tokens=message.largest_block_tokens,
        )
        assert cached is not None, f"message {message.pk} was not cached"
        assert dumps_compact(cached.blocks) == dumps_compact(json.loads(raw))
        assert dumps_compact(cached.content) == dumps_compact(json.loads(raw))


def _stored_text(message_id: int) -> str:
    """The message's content as the window's query reads it."""
    return (
        Message.objects.filter(pk=message_id)
        .annotate(raw=Cast("content", output_field=TextField()))
        .values_list("raw", flat=True)
        .get()
    )


def test_a_row_as_sent_keeps_the_texts_its_entries_count():
    """A row as sent made in a later plan than its entry (the row opened the window before) holds the
    entries' own strings, not the later query's copies: the bound counts them."""
    cache = RenderedRows()
    older = exchange_rows(3)
    plan_window(older[2:], effective_start_id=older[2].id, limits=LIMITS, shared=cache)  # row 3 opens it
    plan_window(exchange_rows(3), effective_start_id=1, limits=LIMITS, shared=cache)  # row 3 after row 2
    sent = cache._sent_after[(older[2].id, LIMITS.block_cap)]
    entry = cache.get(
        older[2].id, LIMITS.block_cap, raw=older[2].raw, role="user", largest_block_tokens=older[2].largest_block_tokens
    )
    before = cache.get(
        older[1].id,
        LIMITS.block_cap,
        raw=older[1].raw,
        role="assistant",
        largest_block_tokens=older[1].largest_block_tokens,
    )
    assert sent.facts[0] is entry.raw and sent.previous[0] is before.raw
