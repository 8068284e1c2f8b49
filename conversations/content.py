"""Facts about archived content that are computed once, on write (README, "Memory in detail")."""

from __future__ import annotations

import json
import math
import re
from typing import Any

Block = dict[str, Any]


def dumps_compact(content: Any) -> str:
    """The one serialisation the token estimate is defined on."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"))


def estimate_tokens(content: Any) -> int:
    """The token estimate every size in the window is counted in (docs/window.md): ceil(len(compact JSON) / 4)."""
    return math.ceil(len(dumps_compact(content)) / 4)


def largest_block_tokens(content: list[Block]) -> int:
    return max((estimate_tokens(block) for block in content), default=0)


def readable_text(content: list[Block]) -> str:
    """What a person reads in a message: text, tool inputs' values, tool results; no JSON punctuation."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_use":
            walk(block.get("input", {}))
        elif kind == "tool_result":
            result = block.get("content", "")
            if isinstance(result, list):
                for item in result:
                    if isinstance(item, dict) and item.get("type") == "text":
                        parts.append(item.get("text", ""))
            else:
                walk(result)
    return "\n".join(part for part in parts if part)


SNIPPET_MAX_CHARS = 160


def snippet(content: Any, *, max_chars: int = SNIPPET_MAX_CHARS) -> str:
    """One line of plain text saying what a message said, for a link to it (a reply's sources): its
    readable text with runs of whitespace as one space, cut at a word boundary with "…" past `max_chars`."""
    blocks = content if isinstance(content, list) else normalize_content(content) if isinstance(content, str) else []
    line = " ".join(readable_text(blocks).split())
    if len(line) <= max_chars:
        return line
    cut = line[: max_chars - 1]
    space = cut.rfind(" ")
    if space >= max_chars // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def normalize_content(content: str | list[Block]) -> list[Block]:
    """A plain string becomes one text block; block lists are stored as given."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def is_turn_start(role: str, content: list[Block]) -> bool:
    """A turn starts with a user message holding a text block and no tool_result."""
    if role != "user":
        return False
    types = {block.get("type") for block in content if isinstance(block, dict)}
    return "text" in types and "tool_result" not in types


def text_of(content: list[Block]) -> str:
    """The text blocks of a message, joined: what a person reads as its text."""
    return "\n".join(
        block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"
    )


# The two things text may not hold, as text_problem() words them.
TEXT_HAS_NUL = "must not contain NUL (\\u0000) characters"
TEXT_NOT_UNICODE = "is not valid Unicode (it holds a lone surrogate)"


def text_problem(value: str) -> str | None:
    """Why `value` is not text Buddy can keep (TEXT_HAS_NUL, TEXT_NOT_UNICODE), or None. A lone surrogate
    cannot be encoded as UTF-8 (so neither stored nor sent to the model) and PostgreSQL refuses NUL:
    both are refused on every backend, by every transport (the one place this rule is written)."""
    if "\x00" in value:
        return TEXT_HAS_NUL
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return TEXT_NOT_UNICODE
    return None


def blank_problem(value: str) -> str | None:
    """Why `value` says nothing (empty or only whitespace), or None."""
    return None if value.strip() else "must not be empty or only spaces"


# Bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069): in a title they reorder what
# follows them, so a chat can pass for another one in the chat list. Marks (U+200E, U+200F) stay allowed.
BIDI_CONTROL_RE = re.compile("[\u202a-\u202e\u2066-\u2069]")
TITLE_MAX_CHARS = 100


def title_problem(value: str) -> str | None:
    """Why `value` cannot be a chat's title, or None: the rule of PATCH /chats (README: HTTP API)."""
    problem = text_problem(value) or blank_problem(value)
    if problem:
        return problem
    if len(value) > TITLE_MAX_CHARS:
        return f"is at most {TITLE_MAX_CHARS} characters"
    if BIDI_CONTROL_RE.search(value):
        return "must not hold bidirectional override or isolate characters (U+202A–U+202E, U+2066–U+2069)"
    return None


def json_text_problem(value: Any) -> str | None:
    """text_problem() of every string in a decoded JSON value, keys included (iterative: any depth)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            problem = text_problem(item)
        elif isinstance(item, dict):
            problem = next(filter(None, (text_problem(key) for key in item if isinstance(key, str))), None)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
            problem = None
        else:
            problem = None
        if problem:
            return problem
    return None


LONE_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def json_text_cleaned(value: Any) -> Any:
    """`value` with every string made storable: NUL and lone surrogates become U+FFFD. For what a model
    says, which Buddy must archive whatever it is; input from people is refused instead (text_problem)."""
    if json_text_problem(value) is None:
        return value
    if isinstance(value, str):
        return LONE_SURROGATE_RE.sub("\ufffd", value.replace("\x00", "\ufffd"))
    if isinstance(value, dict):
        return {json_text_cleaned(key): json_text_cleaned(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_text_cleaned(item) for item in value]
    return value


# A confirmation answered on the canvas, as the prompt its turn runs: `[confirmation ID: confirmed|declined]`,
# and on a line of its own what the answer did, when the server says (a question about the user's memory).
CONFIRMATION_ANSWER_RE = re.compile(r"\[confirmation [^\]]*: (?:confirmed|declined)\](?:\n[^\n]+)?")


def confirmation_answer_text(*, element_id: str, confirmed: bool, outcome: str | None = None) -> str:
    answer = f"[confirmation {element_id}: {'confirmed' if confirmed else 'declined'}]"
    return f"{answer}\n{outcome}" if outcome else answer


def tool_result_text(content: Any) -> str:
    """A tool_result's content as one string: its text blocks joined, other blocks named in brackets."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, dict):
                parts.append(f"[{item.get('type', 'block')}]")
        return "\n".join(parts)
    if content is None:
        return ""
    return dumps_compact(content)


KNOWN_BLOCK_TYPES = {"text", "tool_use", "tool_result", "image", "document", "thinking", "redacted_thinking"}
# Where the Messages API accepts each block type.
BLOCK_TYPES_BY_ROLE = {
    "user": {"text", "image", "document", "tool_result"},
    "assistant": {"text", "tool_use", "thinking", "redacted_thinking"},
}
TOOL_USE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
MAX_CONTENT_DEPTH = 64  # nesting of a message's JSON: far beyond any real content, well within recursion


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` nests deeper than `limit` (iterative: safe at any depth)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return False


def validate_content(role: str, content: Any) -> list[Block]:
    """Check one message from outside (an import) as the Messages API would check it in a request, so
    that no archived message can make a later model call fail; returns the normalised blocks or raises
    ValueError. Buddy places the cache breakpoints itself: a block may not carry `cache_control`."""
    if role not in {"user", "assistant"}:
        raise ValueError(f"role must be 'user' or 'assistant', not {role!r}")
    if json_depth_exceeds(content, MAX_CONTENT_DEPTH):
        raise ValueError(f"content is nested deeper than {MAX_CONTENT_DEPTH} levels")
    problem = json_text_problem(content)
    if problem:
        raise ValueError(f"a string in content {problem}")
    if isinstance(content, str):
        if not content:
            raise ValueError("content is an empty string")
        return normalize_content(content)
    if not isinstance(content, list) or not content:
        raise ValueError("content must be a non-empty string or a non-empty list of blocks")
    for index, block in enumerate(content):
        _validate_block(role, index, block)
    return list(content)


def _validate_block(role: str, index: int, block: Any) -> None:
    if not isinstance(block, dict) or block.get("type") not in KNOWN_BLOCK_TYPES:
        raise ValueError(f"block {index} is not a content block with a known 'type'")
    kind = block["type"]
    if kind not in BLOCK_TYPES_BY_ROLE[role]:
        where = "an assistant" if kind in BLOCK_TYPES_BY_ROLE["assistant"] else "a user"
        raise ValueError(f"{kind} block {index} must be in {where} message")
    if "cache_control" in block:
        raise ValueError(f"block {index} has cache_control; Buddy sets the cache breakpoints itself")
    if kind == "text" and (not isinstance(block.get("text"), str) or not block["text"]):
        raise ValueError(f"text block {index} needs a non-empty 'text'")
    if kind == "tool_use":
        if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str) or not block["name"]:
            raise ValueError(f"tool_use block {index} needs an 'id' and a non-empty 'name'")
        if not TOOL_USE_ID_RE.fullmatch(block["id"]):
            raise ValueError(f"tool_use block {index}: an id is 1-128 characters of A-Z a-z 0-9 _ -")
        if not isinstance(block.get("input"), dict):
            raise ValueError(f"tool_use block {index} needs an object 'input'")
    if kind == "tool_result":
        if not isinstance(block.get("tool_use_id"), str) or not TOOL_USE_ID_RE.fullmatch(block["tool_use_id"]):
            raise ValueError(f"tool_result block {index} needs a 'tool_use_id' of A-Z a-z 0-9 _ -")
        result = block.get("content", "")
        if isinstance(result, list):
            for inner_index, inner in enumerate(result):
                if not isinstance(inner, dict) or inner.get("type") not in {"text", "image", "document"}:
                    raise ValueError(f"tool_result block {index}: content {inner_index} is not a text or image block")
                if "cache_control" in inner:
                    raise ValueError(f"tool_result block {index}: content {inner_index} has cache_control")
                if inner["type"] == "text" and (not isinstance(inner.get("text"), str) or not inner["text"]):
                    raise ValueError(f"tool_result block {index}: text {inner_index} needs a non-empty 'text'")
        elif not isinstance(result, str):
            raise ValueError(f"tool_result block {index}: content must be a string or a list of blocks")
    if kind in {"image", "document"} and not (
        isinstance(block.get("source"), dict) and isinstance(block["source"].get("type"), str)
    ):
        raise ValueError(f"{kind} block {index} needs a 'source' object with a 'type'")
