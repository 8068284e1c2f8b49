"""Checks of the window's rules (docs/window.md), shared by the window, turn and soak tests.

`assert_valid_window(window, archive=..., limits=...)` checks everything a window must satisfy:
validity as the Messages API judges it, the budget and the row cap as sent, the block cap, contiguity,
the start rule (stays while it fits, else moves to the first turn start at the low-water mark, with the
documented fallbacks) and — against a previous window — a byte-identical prefix.

The start rule is checked against `reference_messages`, a plain forward rendering of the archive from
a given start, written independently of the window's walk (which only looks at the rows it needs and
counts with stored estimates). The texts of repairs and the shortening itself come from
`conversations.window.blocks`: they are the spec, the structure around them is re-derived here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from conversations.content import TOOL_USE_ID_RE, dumps_compact, estimate_tokens
from conversations.window.blocks import (
    EMPTY_REPLY,
    EMPTY_USER_MESSAGE,
    NO_REPLY,
    NO_USER_MESSAGE,
    interrupted_result,
    is_blank_text,
    orphan_result_note,
    shorten_block,
    text_block,
)
from conversations.window.plan import Limits
from conversations.window.types import Window

NORMAL_MODES = {"stored", "step", "inside_turn"}


class Archived(Protocol):
    id: int
    role: str
    content: Any
    is_turn_start: bool


# --- validity as the API judges it -------------------------------------------------------------------


def assert_api_valid(messages: Sequence[dict[str, Any]]) -> None:
    """The request rules of the Messages API that the window must keep."""
    assert messages, "a request needs at least one message"
    assert messages[0]["role"] == "user", "the first message must be a user message"
    seen_tool_ids: set[str] = set()
    for index, message in enumerate(messages):
        role, content = message["role"], message["content"]
        assert set(message) == {"role", "content"}, message.keys()
        assert role in {"user", "assistant"}
        if index:
            assert role != messages[index - 1]["role"], f"message {index}: roles must alternate"
        assert isinstance(content, list) and content, f"message {index}: content must be a non-empty list"
        for block in content:
            assert isinstance(block, dict) and "type" in block, f"message {index}: not a block: {block!r}"
            if block["type"] == "text":
                assert isinstance(block["text"], str) and block["text"].strip(), f"message {index}: blank text"
            if block["type"] == "tool_use":
                assert role == "assistant", f"message {index}: tool_use outside an assistant message"
                assert block["id"] not in seen_tool_ids, f"message {index}: repeated tool_use id {block['id']}"
                seen_tool_ids.add(block["id"])
            if block["type"] == "tool_result":
                assert role == "user", f"message {index}: tool_result outside a user message"
        results = [block for block in content if block["type"] == "tool_result"]
        leading = content[: len(results)]
        assert all(block["type"] == "tool_result" for block in leading), f"message {index}: results not first"
        uses = [block["id"] for block in content if block["type"] == "tool_use"]
        if uses:
            assert index + 1 < len(messages), f"message {index}: tool_use without a following message"
            answer = messages[index + 1]["content"]
            answered = [block["tool_use_id"] for block in answer if block["type"] == "tool_result"]
            assert sorted(answered) == sorted(uses), f"message {index + 1} must answer exactly {uses}"
        if results:
            assert index > 0, "the first message cannot hold tool results"
            asked = {block["id"] for block in messages[index - 1]["content"] if block["type"] == "tool_use"}
            for block in results:
                assert block["tool_use_id"] in asked, f"message {index}: result for unknown {block['tool_use_id']}"


# --- an independent rendering of the archive --------------------------------------------------------


def _reference_blocks(row: Archived, cap: int) -> list[dict[str, Any]]:
    out = []
    tool_ids: set[str] = set()
    for block in row.content:
        if not isinstance(block, dict):
            continue
        block = shorten_block(block, cap_tokens=cap, message_id=row.id)
        if block.get("type") == "text" and is_blank_text(block):
            continue
        if block.get("type") == "tool_use":
            tool_id = block.get("id")
            if (
                row.role != "assistant"
                or not isinstance(tool_id, str)
                or not TOOL_USE_ID_RE.fullmatch(tool_id)
                or tool_id in tool_ids
                or not isinstance(block.get("name"), str)
                or not block["name"]
                or not isinstance(block.get("input"), dict)
            ):
                block = text_block(f"[tool call {tool_id} ({block.get('name')}) not sent: invalid here]")
            else:
                tool_ids.add(tool_id)
        elif block.get("type") == "tool_result" and row.role != "user":
            block = shorten_block(orphan_result_note(block), cap_tokens=cap, message_id=row.id)
        out.append(block)
    return out


def reference_messages(archive: Sequence[Archived], start: int, cap: int) -> list[dict[str, Any]]:
    """The window from archive[start] to the newest message, rendered in one forward pass."""
    messages: list[dict[str, Any]] = []
    previous: Archived | None = None
    previous_uses: list[str] = []
    for row in archive[start:]:
        blocks = _reference_blocks(row, cap)
        if row.role == "user":
            if previous is not None and previous.role == "user":
                messages.append({"role": "assistant", "content": [text_block(NO_REPLY)]})
            expected = previous_uses if previous is not None else []
            answers: dict[str, dict[str, Any]] = {}
            others = []
            for block in blocks:
                tool_id = block.get("tool_use_id")
                if block.get("type") == "tool_result" and tool_id in expected and tool_id not in answers:
                    answers[tool_id] = block
                elif block.get("type") == "tool_result":
                    others.append(shorten_block(orphan_result_note(block), cap_tokens=cap, message_id=row.id))
                else:
                    others.append(block)
            missing = [interrupted_result(tool_id) for tool_id in expected if tool_id not in answers]
            content = list(answers.values()) + missing + others or [text_block(EMPTY_USER_MESSAGE)]
            previous_uses = []
        else:
            assert previous is not None, "the reference never starts at an assistant message"
            if previous.role == "assistant":
                synthetic = [interrupted_result(tool_id) for tool_id in previous_uses]
                messages.append({"role": "user", "content": synthetic or [text_block(NO_USER_MESSAGE)]})
            content = blocks or [text_block(EMPTY_REPLY)]
            previous_uses = [block["id"] for block in content if block.get("type") == "tool_use"]
        messages.append({"role": row.role, "content": content})
        previous = row
    if previous_uses:
        messages.append({"role": "user", "content": [interrupted_result(tool_id) for tool_id in previous_uses]})
    return messages


def reference_cost(archive: Sequence[Archived], start: int, cap: int) -> tuple[int, int]:
    messages = reference_messages(archive, start, cap)
    return sum(estimate_tokens(message["content"]) for message in messages), len(messages)


def _fits(cost: tuple[int, int], max_tokens: int, max_rows: int) -> bool:
    return cost[0] <= max_tokens and cost[1] <= max_rows


def reference_effective_start(archive: Sequence[Archived], stored: int) -> int | None:
    """The index the stored start means: the stored user row itself, else the first turn start after."""
    for index, row in enumerate(archive):
        if row.id == stored and row.role == "user":
            return index
    return next((i for i, row in enumerate(archive) if row.id >= stored and row.is_turn_start), None)


# --- the whole check ----------------------------------------------------------------------------------


def _dumped(message: dict[str, Any]) -> str:
    return dumps_compact(message)


def assert_valid_window(
    window: Window,
    *,
    archive: Sequence[Archived],
    limits: Limits,
    stored_before: int = 0,
    previous: Window | None = None,
    check_start_rule: bool = True,
) -> None:
    """Every rule of the window (docs/window.md) for `window`, built over `archive` (all messages of the session, oldest
    first, as stored) with the stored start `stored_before`. `previous`: the window of an earlier call
    with the same limits, for the prefix-stability check."""
    ids = [row.id for row in archive]
    if window.start_id is None:
        tail = [row for row in archive if row.id >= stored_before][-(limits.rows + 1) :]
        assert all(row.role == "assistant" for row in tail), "an empty window although a user message exists"
        assert window.messages == [] and window.tokens == 0 and window.mode == "empty"
        return

    # Validity, budget, row cap, block cap.
    assert_api_valid(window.messages)
    assert len(window.messages) == len(window.message_ids)
    tokens = sum(estimate_tokens(message["content"]) for message in window.messages)
    assert tokens == window.tokens, f"window.tokens {window.tokens} but the messages as sent are {tokens}"
    assert tokens <= limits.budget, f"{tokens} tokens over the budget {limits.budget}"
    assert len(window.messages) <= limits.rows, f"{len(window.messages)} messages over the cap {limits.rows}"
    for message in window.messages:
        for block in message["content"]:
            assert estimate_tokens(block) <= limits.block_cap, f"a block over the cap: {estimate_tokens(block)}"

    # A contiguous tail of the archive, ending with the newest message, starting at the stored start or
    # after it.
    assert window.start_id in ids
    start = ids.index(window.start_id)
    covered = ids[start:]
    assert window.rows == len(covered)
    sources = [message_id for message_id in window.message_ids if message_id is not None]
    assert sources[0] == window.start_id and sources[-1] == ids[-1], "the window must end with the newest"
    if archive[-1].role == "user":
        assert window.message_ids[-1] == ids[-1], "the newest (user) message must be the last one sent"
    if sources != covered:
        assert window.mode == "squeezed" and len(window.messages) <= 2, "sources must be the archive's tail"
    assert window.start_id >= stored_before, "the start moved backwards"
    assert window.stored_start_id >= stored_before, "the stored start moved backwards"
    assert archive[start].role == "user"

    if window.mode in NORMAL_MODES:
        expected = reference_messages(archive, start, limits.block_cap)
        assert [_dumped(m) for m in window.messages] == [_dumped(m) for m in expected], "not as the rules render"

    if check_start_rule:
        _assert_start_rule(window, archive, limits, stored_before, start)

    if previous is not None and previous.start_id is not None:
        _assert_same_prefix(previous, window)


def _assert_start_rule(
    window: Window, archive: Sequence[Archived], limits: Limits, stored_before: int, start: int
) -> None:
    cap = limits.block_cap
    effective = reference_effective_start(archive, stored_before)
    if effective is not None and _fits(reference_cost(archive, effective, cap), limits.budget, limits.rows):
        assert start == effective and window.mode == "stored" and not window.moved, (
            f"the window fits from the stored start #{archive[effective].id} and must stay there, "
            f"not start at #{window.start_id} ({window.mode})"
        )
        return
    assert window.moved or start == effective, "the start must move when the window does not fit"
    floor = (
        effective
        if effective is not None
        else min((i for i, row in enumerate(archive) if row.id >= stored_before), default=len(archive)) - 1
    )
    turn_starts = [i for i in range(floor + 1, len(archive)) if archive[i].is_turn_start]
    low = next(
        (i for i in turn_starts if _fits(reference_cost(archive, i, cap), limits.low_tokens, limits.low_rows)),
        None,
    )
    if low is not None:
        assert (start, window.mode) == (low, "step"), f"expected a step to #{archive[low].id}"
        return
    hard = next(
        (i for i in reversed(turn_starts) if _fits(reference_cost(archive, i, cap), limits.budget, limits.rows)),
        None,
    )
    if hard is not None:
        assert (start, window.mode) == (hard, "step"), f"expected a step to #{archive[hard].id}"
        return
    newest_turn = max(turn_starts, default=floor)
    inside = [i for i in range(newest_turn + 1, len(archive)) if archive[i].role == "user"]
    costs = {i: reference_cost(archive, i, cap) for i in inside}
    low = next((i for i in inside if _fits(costs[i], limits.low_tokens, limits.low_rows)), None)
    hard = next((i for i in reversed(inside) if _fits(costs[i], limits.budget, limits.rows)), None)
    if low is not None or hard is not None:
        chosen = low if low is not None else hard
        assert (start, window.mode) == (chosen, "inside_turn"), f"expected to start inside at #{archive[chosen].id}"
        return
    first_candidate = effective if effective is not None else floor + 1
    users = [i for i in range(first_candidate, len(archive)) if archive[i].role == "user"]
    assert (start, window.mode) == (users[-1], "squeezed"), "expected a squeezed window at the newest user message"


def _assert_same_prefix(previous: Window, window: Window) -> None:
    """What both windows send for the same archived message is byte-identical (the prompt cache hits),
    except the first message of each (it has no message before it, so its tool results are notes)."""
    if previous.mode not in NORMAL_MODES or window.mode not in NORMAL_MODES:
        return
    before = {
        message_id: _dumped(message)
        for message_id, message in zip(previous.message_ids[1:], previous.messages[1:], strict=True)
        if message_id is not None
    }
    for message_id, message in zip(window.message_ids[1:], window.messages[1:], strict=True):
        if message_id in before:
            assert before[message_id] == _dumped(message), f"message #{message_id} changed between calls"
    if previous.start_id == window.start_id:
        # Same start: the previous window, up to its last archived message, is a prefix of this one.
        last = max(k for k, message_id in enumerate(previous.message_ids) if message_id is not None)
        head = [_dumped(message) for message in previous.messages[: last + 1]]
        assert [_dumped(message) for message in window.messages[: last + 1]] == head, "the prefix changed"
