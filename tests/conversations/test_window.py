"""The window sent to the model (docs/window.md), built from the archive in the database."""

from __future__ import annotations

import itertools
import random

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from conversations.content import dumps_compact
from conversations.models import Message, Session
from conversations.services import message_append, session_get_or_create
from conversations.window import (
    Window,
    window_build,
    window_limits,
    window_next_step,
    window_preview,
    window_render,
)
from conversations.window import services as window_services
from devtools.window_rules import assert_valid_window
from tests.window_archives import archives, limits

pytestmark = pytest.mark.django_db

chat_numbers = itertools.count()


def use_limits(settings, window_limits_value) -> None:
    settings.BUDDY_CONTEXT_TOKENS = window_limits_value.budget
    settings.BUDDY_WINDOW_ROWS = window_limits_value.rows
    settings.BUDDY_WINDOW_LOW_WATER = window_limits_value.low_water
    settings.BUDDY_MAX_PROMPT_TOKENS = window_limits_value.block_cap


def archive_of(session: Session, since: int = 0) -> list[Message]:
    return list(Message.objects.filter(session=session, id__gte=since).order_by("id"))


def stored_start(session: Session) -> int:
    return Session.objects.values_list("window_start_id", flat=True).get(pk=session.pk)


def same_messages(a: Window, b: Window) -> bool:
    return dumps_compact(a.messages) == dumps_compact(b.messages) and a.message_ids == b.message_ids


@hypothesis_settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_every_rule_holds_after_every_append(settings, user, agent, data):
    chosen = data.draw(limits(max_budget=3000, max_rows=16))
    use_limits(settings, chosen)
    session = session_get_or_create(user=user, agent_slug="buddy", chat_id=f"prop-{next(chat_numbers)}")
    previous = None
    for role, content in data.draw(archives(chosen.block_cap * 4, max_turns=6)):
        message_append(session=session, role=role, content=content)
        before = stored_start(session)
        preview = window_preview(session=session)
        assert stored_start(session) == before, "a preview never writes"
        window = window_build(session=session)
        archive = archive_of(session)
        assert_valid_window(window, archive=archive, limits=chosen, stored_before=before, previous=previous)
        # The preview showed exactly this window; the stored start is what the window says.
        assert same_messages(preview, window) and preview.moved == window.moved
        assert stored_start(session) == window.stored_start_id == (window.start_id if window.moved else before)
        # Another process (or a restart) with a fresh session object sends the same bytes, and the start
        # does not move again.
        again = window_build(session=Session.objects.get(pk=session.pk))
        assert same_messages(again, window) and not again.moved
        previous = window


def conversation(rng: random.Random, turns: int, *, words: tuple[int, int], tools: bool):
    """A clean conversation: every turn complete, some with tool rounds."""
    ids = itertools.count()
    for number in range(turns):
        yield "user", f"prompt {number}: " + "word " * rng.randint(*words)
        if tools and rng.random() < 0.4:
            calls = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(ids)}",
                    "name": "canvas_add_card",
                    "input": {"id": "c"},
                }
                for _ in range(rng.randint(1, 3))
            ]
            yield "assistant", calls
            yield (
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": call["id"],
                        "content": "done " * rng.randint(*words),
                    }
                    for call in calls
                ],
            )
        yield "assistant", f"reply {number}: " + "word " * rng.randint(*words)


def run_conversation(settings, session: Session, messages, *, budget: int, rows: int, low_water: float):
    """Append every message and build the window as the turn does before each model call (the newest
    message is then a user message); returns the moves as (tokens, rows appended since the last move)
    and checks every rule on every window."""
    settings.BUDDY_CONTEXT_TOKENS = budget
    settings.BUDDY_WINDOW_ROWS = rows
    settings.BUDDY_WINDOW_LOW_WATER = low_water
    settings.BUDDY_MAX_PROMPT_TOKENS = budget // 4
    chosen = window_limits()
    moves = []
    tokens_since = rows_since = 0
    previous = None
    predicted = None
    for role, content in messages:
        message = message_append(session=session, role=role, content=content)
        tokens_since += message.tokens
        rows_since += 1
        if role != "user":
            continue
        before = stored_start(session)
        window = window_build(session=session)
        assert_valid_window(
            window,
            archive=archive_of(session, since=before),
            limits=chosen,
            stored_before=before,
            previous=previous,
        )
        if window.moved:
            assert window.mode == "step"
            if predicted is not None:  # the summariser's prediction: the step goes at least that far
                assert window.start_id >= predicted
            moves.append((tokens_since, rows_since))
            tokens_since = rows_since = 0
        step = window_next_step(session=session)
        assert step.start_id == window.start_id and step.next_start_id == window.next_start_id
        assert step.tokens_until_step == chosen.budget - window.tokens
        predicted = step.next_start_id
        previous = window
    return moves


def test_the_start_moves_at_most_once_per_step_of_tokens_over_500_turns(settings, session):
    budget, low_water = 3000, 0.7
    messages = list(conversation(random.Random(7), 500, words=(5, 60), tools=True))
    moves = run_conversation(settings, session, messages, budget=budget, rows=10_000, low_water=low_water)
    total = sum(Message.objects.filter(session=session).values_list("tokens", flat=True))
    assert len(moves) >= 10, "the conversation is long enough to move many times"
    # After a step the window holds at most low-water × budget; it must take in more than the rest of
    # the budget before the next step.
    for tokens_since, _rows_since in moves[1:]:
        assert tokens_since > (1 - low_water) * budget
    assert len(moves) <= total / ((1 - low_water) * budget) + 1


def test_the_start_moves_at_most_once_per_step_of_rows_when_the_row_cap_binds(settings, session):
    rows, low_water = 40, 0.7
    messages = list(conversation(random.Random(11), 500, words=(1, 3), tools=True))
    moves = run_conversation(settings, session, messages, budget=1_000_000, rows=rows, low_water=low_water)
    assert len(moves) >= 10
    for _tokens_since, rows_since in moves[1:]:
        assert rows_since > rows - int(low_water * rows)
    assert len(moves) <= len(messages) / ((1 - low_water) * rows) + 1


def test_a_window_that_fits_stays_put_and_writes_nothing(settings, session, django_assert_num_queries):
    settings.BUDDY_CONTEXT_TOKENS = 10_000
    for number in range(5):
        message_append(session=session, role="user", content=f"question {number}")
        message_append(session=session, role="assistant", content=f"answer {number}")
    window_build(session=session)
    # The stored start (a primary-key read) and one range query: no count, no write.
    with django_assert_num_queries(2):
        window = window_build(session=session)
    assert (window.mode, window.moved, window.rows, stored_start(session)) == ("stored", False, 10, 0)


def test_a_preview_shows_a_due_step_but_only_a_build_stores_it(settings, session):
    settings.BUDDY_CONTEXT_TOKENS = 300
    settings.BUDDY_MAX_PROMPT_TOKENS = 75
    for number in range(12):
        message_append(session=session, role="user", content=f"question {number} " + "x" * 80)
        message_append(session=session, role="assistant", content=f"answer {number} " + "y" * 80)
    preview = window_preview(session=session)
    assert preview.moved and stored_start(session) == 0
    window = window_build(session=session)
    assert same_messages(window, preview) and stored_start(session) == window.start_id > 0
    assert window_preview(session=session).moved is False


def test_the_stored_start_never_moves_backwards_when_another_process_moved_it(settings, session, monkeypatch):
    settings.BUDDY_CONTEXT_TOKENS = 300
    settings.BUDDY_MAX_PROMPT_TOKENS = 75
    for number in range(12):
        message_append(session=session, role="user", content=f"question {number} " + "x" * 80)
        message_append(session=session, role="assistant", content=f"answer {number} " + "y" * 80)
    newest_prompt = Message.objects.filter(session=session, role="user").latest("id").id
    real_compute = window_services.window_compute
    calls = []

    def compute_then_lose_the_race(**kwargs):
        window = real_compute(**kwargs)
        if not calls:  # another process steps further while this one computes
            Session.objects.filter(pk=session.pk).update(window_start_id=newest_prompt)
        calls.append(window.start_id)
        return window

    monkeypatch.setattr(window_services, "window_compute", compute_then_lose_the_race)
    window = window_build(session=session)
    assert calls[0] < newest_prompt, "this process computed a smaller step"
    assert stored_start(session) == newest_prompt, "and did not store it over the further one"
    assert window.start_id == newest_prompt and session.window_start_id == newest_prompt


def test_a_stale_session_object_gets_the_stored_start(settings, session):
    for number in range(4):
        message_append(session=session, role="user", content=f"question {number}")
        message_append(session=session, role="assistant", content=f"answer {number}")
    third_prompt = Message.objects.filter(session=session, role="user").order_by("id")[2].id
    Session.objects.filter(pk=session.pk).update(window_start_id=third_prompt)
    window = window_build(session=session)  # session.window_start_id is still 0 in memory
    assert window.start_id == third_prompt and window.rows == 4


def test_an_import_of_many_messages_steps_without_loading_the_archive(settings, session, django_assert_max_num_queries):
    settings.BUDDY_WINDOW_ROWS = 20
    message_append(session=session, role="assistant", content="imported: it begins with a reply")
    for number in range(200):
        message_append(session=session, role="user", content=f"question {number}")
        message_append(session=session, role="assistant", content=f"answer {number}")
    with django_assert_max_num_queries(5):
        window = window_build(session=session)
    assert window.mode == "step" and len(window.messages) <= 14 and window.rows == len(window.messages)
    assert window.message_ids[-1] == Message.objects.filter(session=session).latest("id").id


def test_render_gives_copies_the_turn_can_annotate(session):
    message_append(session=session, role="user", content="hello")
    window = window_build(session=session)
    rendered = window_render(window)
    rendered[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    rendered[-1]["content"].append({"type": "text", "text": "context"})
    assert window.messages == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert Message.objects.get(session=session).content == [{"type": "text", "text": "hello"}]


def test_settings_below_the_floors_are_a_clear_configuration_error(settings, session):
    settings.BUDDY_WINDOW_ROWS = 1
    with pytest.raises(ImproperlyConfigured, match="BUDDY_WINDOW_ROWS must be at least 2"):
        window_build(session=session)


def test_the_window_query_is_a_range_scan_of_the_session_id_index(session):
    if connection.vendor != "sqlite":
        pytest.skip("the plan of PostgreSQL depends on table statistics; see docs/bench-window.md")
    from conversations.window.selectors import window_rows_query

    plan = window_rows_query(session_id=session.pk, stored_start=0, limit=201).explain()
    assert "message_session_id" in plan and "TEMP B-TREE" not in plan, plan


def test_interleaved_sessions_each_get_only_their_own_tail(settings, user, agent):
    settings.BUDDY_WINDOW_ROWS = 6
    ours = session_get_or_create(user=user, agent_slug="buddy", chat_id="ours")
    theirs = session_get_or_create(user=user, agent_slug="buddy", chat_id="theirs")
    for number in range(10):
        for session in (ours, theirs):
            message_append(session=session, role="user", content=f"{session.chat_id} question {number}")
            message_append(session=session, role="assistant", content=f"{session.chat_id} answer {number}")
    for session in (ours, theirs):
        before = stored_start(session)
        window = window_build(session=session)
        assert_valid_window(window, archive=archive_of(session), limits=window_limits(), stored_before=before)
        assert all(session.chat_id in message["content"][0]["text"] for message in window.messages)
        assert window_build(session=session).start_id == window.start_id
