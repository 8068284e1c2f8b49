"""The window's pure core: rendering, repairs, shortening and where the window starts (no database)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.content import estimate_tokens
from conversations.window.blocks import (
    INTERRUPTED_RESULT,
    NO_REPLY,
    omission_marker,
    shorten_block,
)
from conversations.window.plan import Limits, Row, effective_start_id, plan_window, row_from_content
from conversations.window.selectors import window_from_plan
from conversations.window.types import Window, window_render
from devtools.window_rules import assert_api_valid, assert_valid_window
from tests.window_archives import archives, limits


def make_archive(messages: list[tuple[str, list[dict] | str]]) -> list[Row]:
    archive = []
    for number, (role, content) in enumerate(messages, start=1):
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        archive.append(row_from_content(number * 10, role, blocks))  # ids with gaps, as in a shared table
    return archive


def build(archive: list[Row], stored: int, limits: Limits) -> tuple[Window, list[Row]]:
    """What the selector does, over an in-memory archive: the newest rows+1 rows from the stored start,
    content as JSON text, decoded lazily."""
    eligible = [row for row in archive if row.id >= stored]
    fetched = eligible[-(limits.rows + 1) :]
    rows = [
        Row(
            row.id,
            row.role,
            row.tokens,
            row.is_turn_start,
            row.largest_block_tokens,
            raw=json.dumps(row.content),
        )
        for row in fetched
    ]
    plan = plan_window(rows, effective_start_id=effective_start_id(eligible, stored), limits=limits)
    return window_from_plan(plan, rows, stored), rows


def replay(archive: list[Row], limits: Limits) -> list[Window]:
    """Append the archive one message at a time, building (and storing the start) after each, checking
    every rule each time."""
    stored, previous, windows = 0, None, []
    for count in range(1, len(archive) + 1):
        window, rows = build(archive[:count], stored, limits)
        assert_valid_window(window, archive=archive[:count], limits=limits, stored_before=stored, previous=previous)
        if window.mode == "stored":
            # The steady state decodes only the rows the window sends.
            decoded = [row.id for row in rows if row.decoded]
            assert decoded == [row.id for row in rows if row.id >= window.start_id]
        if window.moved:
            assert window.start_id > stored
            stored = window.start_id
        previous = window
        windows.append(window)
    return windows


LIMITS = Limits(budget=1000, rows=20, low_water=0.5, block_cap=250)


@settings(max_examples=150)
@given(data=st.data())
def test_every_rule_holds_after_every_append(data):
    window_limits = data.draw(limits())
    archive_messages = data.draw(archives(window_limits.block_cap * 4))
    replay(make_archive(archive_messages), window_limits)


@settings(max_examples=40)
@given(data=st.data())
def test_every_rule_holds_with_tight_row_caps(data):
    window_limits = data.draw(limits(max_budget=20_000, max_rows=4))
    replay(make_archive(data.draw(archives(window_limits.block_cap * 4))), window_limits)


# --- shortening ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": 'é"\\\n…🙂x' * 500},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "log line\n" * 600},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "is_error": True,
            "content": [{"type": "text", "text": "x" * 5000}],
        },
        {
            "type": "tool_use",
            "id": "toolu_2",
            "name": "canvas_show_text",
            "input": {"id": "t", "content": "y" * 5000},
        },
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 5000}},
    ],
    ids=["text", "tool_result", "tool_result_blocks", "tool_use", "image"],
)
def test_a_block_over_the_cap_is_shortened_to_the_cap_with_the_marker(block):
    shortened = shorten_block(block, cap_tokens=200, message_id=42)
    assert estimate_tokens(shortened) <= 200
    assert json.dumps(shortened).count("omitted from message 42") == 1
    assert shortened == shorten_block(json.loads(json.dumps(block)), cap_tokens=200, message_id=42)
    if block["type"] in {"tool_result", "tool_use"}:  # the pairing survives the shortening
        assert shortened["type"] == block["type"]
        assert shortened.get("id") == block.get("id") and shortened.get("tool_use_id") == block.get("tool_use_id")


def test_the_marker_counts_the_characters_left_out():
    text = "0123456789" * 300
    shortened = shorten_block({"type": "text", "text": text}, cap_tokens=100, message_id=7)
    kept, marker = shortened["text"].split("\n")
    assert text.startswith(kept) and len(kept) > 250
    assert marker == omission_marker(len(text) - len(kept), 7)


def test_a_block_within_the_cap_is_sent_as_archived():
    block = {"type": "text", "text": "short"}
    assert shorten_block(block, cap_tokens=64, message_id=1) is block


# --- repairs -----------------------------------------------------------------------------------------


def window_of(messages, limits=LIMITS, stored=0):
    window, _rows = build(make_archive(messages), stored, limits)
    return window


def tool_use(tool_id, name="canvas_add_card"):
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"id": "c", "title": "T"}}


def tool_result(tool_id, content="ok"):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def test_a_call_interrupted_before_its_result_gets_an_error_result_first_in_the_next_prompt():
    window = window_of([("user", "show a card"), ("assistant", [tool_use("t1")]), ("user", "hello again")])
    assert_api_valid(window.messages)
    last = window.messages[-1]["content"]
    assert last[0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "is_error": True,
        "content": INTERRUPTED_RESULT,
    }
    assert last[1] == {"type": "text", "text": "hello again"}
    assert window.message_ids == [10, 20, 30]


def test_a_newest_call_without_result_is_answered_by_a_synthetic_message():
    window = window_of(
        [("user", "go"), ("assistant", [{"type": "text", "text": "on it"}, tool_use("t1"), tool_use("t2")])]
    )
    assert_api_valid(window.messages)
    assert window.message_ids == [10, 20, None]
    assert [block["tool_use_id"] for block in window.messages[-1]["content"]] == ["t1", "t2"]


def test_a_confirmation_cut_off_midway_is_repaired_when_the_answer_arrives():
    window = window_of(
        [
            ("user", "delete everything?"),
            ("assistant", [tool_use("t1", "canvas_show_confirmation")]),
            ("user", "[confirmation c1: confirmed]"),
        ]
    )
    assert_api_valid(window.messages)
    assert window.messages[-1]["content"][0]["is_error"] is True
    assert window.messages[-1]["content"][1]["text"] == "[confirmation c1: confirmed]"


def test_a_prompt_with_no_reply_gets_a_synthetic_reply():
    window = window_of([("user", "first"), ("user", "second")])
    assert_api_valid(window.messages)
    assert window.messages[1] == {"role": "assistant", "content": [{"type": "text", "text": NO_REPLY}]}
    assert window.message_ids == [10, None, 20]


def test_a_result_whose_call_is_missing_becomes_a_note():
    window = window_of(
        [
            ("user", "hi"),
            ("assistant", [tool_use("t1")]),
            ("user", [tool_result("t1"), tool_result("ghost", "boo")]),
        ]
    )
    assert_api_valid(window.messages)
    content = window.messages[-1]["content"]
    assert content[0] == tool_result("t1")
    assert content[1] == {"type": "text", "text": "[result of tool call ghost]\nboo"}


def test_the_archive_is_never_changed_by_repairs():
    archive = make_archive([("user", "a"), ("assistant", [tool_use("t1")]), ("user", "b")])
    before = json.dumps([row.content for row in archive])
    window, _rows = build(archive, 0, LIMITS)
    window_render(window)[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert json.dumps([row.content for row in archive]) == before
    assert "cache_control" not in json.dumps(window.messages)


# --- where the window starts ---------------------------------------------------------------------


def test_an_archive_that_begins_with_an_assistant_message_starts_at_the_first_prompt():
    window = window_of([("assistant", "imported reply"), ("user", "hello"), ("assistant", "hi")])
    assert (window.start_id, window.mode, window.moved) == (20, "stored", False)
    assert window.message_ids == [20, 30]


def test_the_newest_message_may_be_an_assistant_message():
    window = window_of([("user", "hello"), ("assistant", "hi")])
    assert window.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    assert window.tokens == estimate_tokens([{"type": "text", "text": "hello"}]) + estimate_tokens(
        [{"type": "text", "text": "hi"}]
    )


def test_no_turn_start_at_all_starts_inside_at_the_results():
    window = window_of([("assistant", [tool_use("t0")]), ("user", [tool_result("t0", "r")]), ("assistant", "ok")])
    assert (window.start_id, window.mode, window.moved) == (20, "inside_turn", True)
    assert window.messages[0]["content"] == [{"type": "text", "text": "[result of tool call t0]\nr"}]


def test_no_user_message_at_all_gives_an_empty_window():
    window = window_of([("assistant", "imported"), ("assistant", "more")])
    assert (window.start_id, window.mode, window.messages) == (None, "empty", [])


def test_the_start_stays_while_the_window_fits_then_steps_to_the_low_water_mark():
    limits = Limits(budget=1000, rows=200, low_water=0.5, block_cap=250)
    turn = [("user", "q" * 400), ("assistant", "a" * 400)]  # about 210 tokens a turn
    archive = make_archive(turn * 4)
    window, _rows = build(archive, 0, limits)
    assert (window.start_id, window.mode) == (10, "stored")
    archive = make_archive(turn * 5)  # over 1000: the first turn start under 500 is the fourth turn
    window, _rows = build(archive, 0, limits)
    assert (window.start_id, window.mode) == (70, "step") and window.tokens <= 500
    assert window.next_start_id == 90  # a step due now would leave one turn more


def test_a_turn_larger_than_the_budget_starts_inside_it_and_keeps_to_the_budget():
    limits = Limits(budget=600, rows=50, low_water=0.7, block_cap=150)
    messages = [("user", "do a lot")]
    for number in range(8):
        messages += [
            ("assistant", [tool_use(f"t{number}")]),
            ("user", [tool_result(f"t{number}", "r" * 400)]),
        ]
    archive = make_archive(messages)
    windows = replay(archive, limits)
    assert [window.mode for window in windows].count("inside_turn") >= 2  # it steps inside the turn too
    assert all(window.tokens <= 600 for window in windows)
    assert windows[-1].start_id != 10  # not the prompt: a message of tool results, sent as a note
    first = windows[-1].messages[0]["content"]
    assert first[0]["type"] == "text" and first[0]["text"].startswith("[result of tool call")


def test_a_single_message_larger_than_the_budget_is_squeezed_into_it():
    limits = Limits(budget=400, rows=10, low_water=0.7, block_cap=100)
    results = [tool_result(f"t{n}", "x" * 2000) for n in range(6)]
    archive = make_archive([("user", "go"), ("assistant", [tool_use(f"t{n}") for n in range(6)]), ("user", results)])
    windows = replay(archive, limits)
    assert windows[-1].mode == "squeezed" and windows[-1].tokens <= 400


def test_settings_below_the_floors_are_refused():
    with pytest.raises(ValueError, match="BUDDY_CONTEXT_TOKENS"):
        Limits(budget=100, rows=10, low_water=0.7, block_cap=64)
    with pytest.raises(ValueError, match="BUDDY_WINDOW_LOW_WATER"):
        Limits(budget=1000, rows=10, low_water=0, block_cap=64)
    with pytest.raises(ValueError, match="BUDDY_WINDOW_ROWS"):
        Limits(budget=1000, rows=1, low_water=0.7, block_cap=64)
