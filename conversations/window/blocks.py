"""What the window does to single content blocks: shortening over-cap blocks and the notes that stand in
for blocks it cannot send as they are. Pure functions of their arguments, so that the same archived block
becomes byte-identical output on every call and the provider's prompt cache keeps hitting (docs/window.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from conversations.content import Block, dumps_compact, estimate_tokens, tool_result_text

# The cap on one block can never go below this (see `Limits`): a shortened block must have room for its
# skeleton (type, tool ids) and the marker.
MIN_BLOCK_CAP = 64

INTERRUPTED_RESULT = "The call was interrupted before it returned a result."
NO_REPLY = "[No reply: this turn was interrupted before the assistant answered.]"
NO_USER_MESSAGE = "[No user message between these replies.]"
EMPTY_USER_MESSAGE = "[empty message]"
EMPTY_REPLY = "[empty reply]"


def omission_marker(omitted: int, message_id: int) -> str:
    """The marker that ends a shortened block (docs/window.md, "Shortening")."""
    return f"[… {omitted} characters omitted from message {message_id}]"


def text_block(text: str) -> Block:
    return {"type": "text", "text": text}


def interrupted_result(tool_use_id: str) -> Block:
    """The repair for a tool_use that has no stored tool_result (a crash or a model error mid-turn)."""
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "is_error": True,
        "content": INTERRUPTED_RESULT,
    }


def is_blank_text(block: Block) -> bool:
    """A text block the API refuses: empty or whitespace only."""
    text = block.get("text")
    return not isinstance(text, str) or not text.strip()


def orphan_result_note(block: Block) -> Block:
    """A tool_result whose tool_use is not in the message before it (the window starts inside a turn, or
    an imported history was cut there) becomes a text note carrying the result. Its skeleton is shorter
    than a tool_result's, so it is rarely longer than the block it replaces; the renderer caps it anyway."""
    label = "error from" if block.get("is_error") else "result of"
    header = f"[{label} tool call {block.get('tool_use_id')}]"
    text = tool_result_text(block.get("content"))
    return text_block(f"{header}\n{text}" if text.strip() else header)


def _escaped_length(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False)) - 2


def _fitting_prefix(text: str, room: int) -> int:
    """A length k such that text[:k] takes at most `room` characters once JSON-escaped. Deterministic;
    near the longest such k (an escaped character counts at least 1, so one correction step suffices)."""
    keep = min(len(text), max(room, 0))
    while keep > 0:
        excess = _escaped_length(text[:keep]) - room
        if excess <= 0:
            return keep
        keep -= excess
    return 0


def _cut(text: str, skeleton: Callable[[str], Block], max_chars: int, message_id: int) -> Block:
    """skeleton(s) is the block with `s` in its one text slot; cut `text` so the block fits `max_chars`."""
    whole = skeleton(text)
    if len(dumps_compact(whole)) <= max_chars:
        return whole
    # Room is reckoned with the longest possible marker (all characters omitted): the real marker has at
    # most as many digits, so the result is never over the cap.
    overhead = len(dumps_compact(skeleton("\n" + omission_marker(len(text), message_id))))
    keep = _fitting_prefix(text, max_chars - overhead)
    marker = omission_marker(len(text) - keep, message_id)
    return skeleton(f"{text[:keep]}\n{marker}" if keep else marker)


def shorten_block(block: Block, *, cap_tokens: int, message_id: int) -> Block:
    """The block itself when its estimate is within `cap_tokens`; otherwise a shortened copy within it.

    - text: the text is cut, the marker appended (other keys such as citations are dropped);
    - tool_result: its content becomes one string (text blocks joined, images named), cut the same way;
    - tool_use: the id and name stay (its tool_result still pairs with it), the input becomes
      `{"input_shortened": "<the start of the input's JSON>\\n[… N characters omitted …]"}`;
    - anything else (images, documents, thinking) or a block that still does not fit: a text block
      holding only the marker, N being the length of the block's compact JSON.
    """
    if estimate_tokens(block) <= cap_tokens:
        return block
    max_chars = cap_tokens * 4
    kind = block.get("type")
    shortened: Block | None = None
    if kind == "text" and isinstance(block.get("text"), str):
        shortened = _cut(block["text"], text_block, max_chars, message_id)
    elif kind == "tool_result":

        def result_skeleton(text: str) -> Block:
            out: Block = {"type": "tool_result", "tool_use_id": block.get("tool_use_id")}
            if "is_error" in block:
                out["is_error"] = block["is_error"]
            out["content"] = text
            return out

        shortened = _cut(tool_result_text(block.get("content")), result_skeleton, max_chars, message_id)
    elif kind == "tool_use":

        def use_skeleton(text: str) -> Block:
            return {
                "type": "tool_use",
                "id": block.get("id"),
                "name": block.get("name"),
                "input": {"input_shortened": text},
            }

        shortened = _cut(dumps_compact(block.get("input", {})), use_skeleton, max_chars, message_id)
    if shortened is None or estimate_tokens(shortened) > cap_tokens:
        return text_block(omission_marker(len(dumps_compact(block)), message_id))
    return shortened
