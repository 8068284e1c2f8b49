"""A local fake of the Anthropic Messages API, driven by the real ``anthropic`` SDK over HTTP.

The model provider is the one thing the suite fakes. The SDK (httpx2 underneath, which respx does
not intercept) is pointed at a real HTTP server on 127.0.0.1 through ``base_url``, so everything the
app does on the wire — headers, JSON, SSE parsing, retries, timeouts — is the real code path.

What it speaks
    ``POST /v1/messages``, plain JSON or ``"stream": true`` (SSE: message_start, ping,
    content_block_start, content_block_delta with text_delta / input_json_delta,
    content_block_stop, message_delta with stop_reason and usage, message_stop), and
    ``POST /v1/messages/count_tokens``. Errors use the real body
    ``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``.

What it checks, as the real API does (400 invalid_request_error unless noted)
    an API key (``x-api-key`` or ``Authorization: Bearer``; 401 otherwise), the
    ``anthropic-version`` header, ``model`` and ``max_tokens``, roles, first message from the user,
    non-empty content and text blocks, ``tool_use`` answered by ``tool_result`` blocks in the very
    next message, every ``tool_result`` answering a ``tool_use`` of the message before, tool_result
    blocks first in their message, unique tool names and tool_use ids, versioned tools (``memory_20250818``,
    ``web_search_…``) as the installed SDK's types for that endpoint define them, at most four
    ``cache_control`` breakpoints. Consecutive messages of one role are merged, as the real API does,
    before these checks.

How prompt caching is modelled
    The request is flattened into one list of blocks, in the order the real API builds its
    prompt: tools, then system blocks, then the content blocks of the (merged) messages. A plain
    string system prompt or message content counts as one text block. Each block is serialised as
    compact JSON with its ``cache_control`` removed (moving a breakpoint does not change the
    content), and the prefix ending at block *i* is identified by a hash chained over the model
    and blocks 0..i (a block's role is part of its hash, so the same text as user or assistant
    differs). Tokens of a prefix are ``ceil(characters of its blocks' JSON / 4)``, the same ratio
    as ``conversations.content.estimate_tokens``.

    * Breakpoints are the blocks that carry ``cache_control``; each has a lifetime, its ``ttl``:
      ``"5m"`` (the default) or ``"1h"``. Every 1-hour breakpoint must come before every 5-minute
      one, in prompt order (a 400 otherwise, as the real API answers).
    * Lifetimes run on ``FakeAnthropic.clock``, a ``ManualClock`` that only moves when a test or
      a bench calls ``clock.advance(...)``: nothing ever waits. An entry lives until its lifetime
      has passed without a hit; a request that reads a prefix refreshes every entry of that prefix
      (the one read and the shorter ones inside it), each for its own lifetime, at no cost.
    * Read: at each breakpoint the cache is probed at that block and at up to 20 blocks before it;
      the longest live prefix found (over all breakpoints) is read.
    * Write: every breakpoint after the read point whose prefix is at least 1,024 tokens is
      written, with that breakpoint's lifetime (prefixes shorter than that are never cached).
    * Usage, as the real API bills it: with A the tokens of the read prefix, B those up to the
      last 1-hour breakpoint written (A if none) and C those up to the last breakpoint written (A
      if none), ``cache_read_input_tokens`` = A, ``cache_creation_input_tokens`` = C − A, split in
      ``cache_creation`` as ``ephemeral_1h_input_tokens`` = B − A and
      ``ephemeral_5m_input_tokens`` = C − B; ``input_tokens`` = the rest of the prompt, after C.
      The three totals add up to the tokens of the whole prompt.

    Entries live per server until they expire or ``reset_cache()``; ``tool_choice``, ``thinking``
    and images do not affect the cache key (the real API is stricter on all three).
    ``cost_units(usage)`` prices a usage like the real API does relative to base input tokens:
    input 1.0×, 5-minute cache write 1.25×, 1-hour cache write 2×, cache read 0.1×.

Scripting replies
    Queued replies are used first (``queue_reply``, ``queue_text``, ``queue_tool_call``), then
    ``responder(request_json)`` if set, then the default: ``Echo: <first text block of the last user
    message>``. Failures on demand: ``fail_next``, ``hang_next``, ``cut_stream_next``,
    ``error_stream_next``, ``delay_stream``.

The ``fake_anthropic`` fixture (tests/conftest.py) starts a server per test and points the app's
settings and the environment (for subprocesses) at it.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import json
import math
import re
import socket
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Block = dict[str, Any]
Json = dict[str, Any]

MAX_CACHE_BREAKPOINTS = 4
CACHE_LOOKBACK_BLOCKS = 20
MIN_CACHEABLE_TOKENS = 1024

COST_INPUT = 1.0
COST_CACHE_WRITE_5M = 1.25
COST_CACHE_WRITE_1H = 2.0
COST_CACHE_READ = 0.1

CACHE_TTL_SECONDS = {"5m": 5 * 60, "1h": 60 * 60}

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
ERROR_MESSAGES = {
    400: "Invalid request",
    401: "invalid x-api-key",
    403: "Your API key does not have permission to use the specified resource.",
    404: "Not found",
    413: "Request exceeds the maximum allowed number of bytes.",
    429: "Number of request tokens has exceeded your per-minute rate limit.",
    500: "Internal server error",
    529: "Overloaded",
}
HTTP_REASONS = {529: "Overloaded"}

TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
TOOL_USE_ID_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


def dumps_compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def estimate_tokens_of_chars(chars: int) -> int:
    return math.ceil(chars / 4)


def cost_units(usage: Any) -> float:
    """Price of one call's input in base-input-token units: input 1.0×, cache write 1.25× (5-minute
    lifetime) or 2× (1-hour lifetime), read 0.1×.

    ``usage`` is a usage dict — the API's (``cache_creation: {ephemeral_1h_input_tokens, …}``) or a
    ``ModelCall``'s values (``cache_creation_1h_input_tokens``) — or the SDK's ``Usage`` object.
    Missing fields count as 0; cache writes without a breakdown count as 5-minute writes.
    """
    return (
        COST_INPUT * usage_figure(usage, "input_tokens")
        + COST_CACHE_WRITE_5M * (usage_figure(usage, "cache_creation_input_tokens") - one_hour_writes(usage))
        + COST_CACHE_WRITE_1H * one_hour_writes(usage)
        + COST_CACHE_READ * usage_figure(usage, "cache_read_input_tokens")
    )


def usage_figure(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
    return value or 0


def one_hour_writes(usage: Any) -> int:
    """Tokens written to the cache with the 1-hour lifetime, from any of the shapes ``cost_units`` takes."""
    if isinstance(usage, dict) and "cache_creation_1h_input_tokens" in usage:
        return usage["cache_creation_1h_input_tokens"] or 0
    breakdown = usage.get("cache_creation") if isinstance(usage, dict) else getattr(usage, "cache_creation", None)
    if breakdown is None:
        return 0
    return usage_figure(breakdown, "ephemeral_1h_input_tokens")


def new_id(prefix: str) -> str:
    return f"{prefix}01{uuid.uuid4().hex[:22]}"


# --- errors ------------------------------------------------------------------------------------


class ApiError(Exception):
    """An error the fake answers with, in the real API's shape."""

    def __init__(self, status: int, message: str | None = None, error_type: str | None = None) -> None:
        self.status = status
        self.error_type = error_type or ERROR_TYPES.get(status, "api_error")
        self.message = message or ERROR_MESSAGES.get(status, "Error")
        super().__init__(f"{status} {self.error_type}: {self.message}")

    def body(self, request_id: str) -> Json:
        return {
            "type": "error",
            "error": {"type": self.error_type, "message": self.message},
            "request_id": request_id,
        }


def invalid(message: str) -> ApiError:
    return ApiError(400, message, "invalid_request_error")


# --- request validation ------------------------------------------------------------------------


def content_blocks(content: Any) -> list[Block]:
    """A message's or system prompt's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


@dataclass
class MergedMessage:
    role: str
    content: list[Block]
    index: int  # index of the first original message merged into this one, for error paths


def merge_consecutive(messages: list[Json]) -> list[MergedMessage]:
    """Consecutive messages of one role become one, as the real API does before anything else."""
    merged: list[MergedMessage] = []
    for index, message in enumerate(messages):
        blocks = content_blocks(message["content"])
        if merged and merged[-1].role == message["role"]:
            merged[-1].content.extend(blocks)
        else:
            merged.append(MergedMessage(message["role"], blocks, index))
    return merged


def validate_request(body: Any, *, beta: bool = False) -> list[MergedMessage]:
    """Raise ``ApiError`` (400) for what the real API rejects; return the merged messages. ``beta``: the
    request came to the beta endpoint (``/v1/messages?beta=true``, the SDK's ``client.beta.messages``)."""
    if not isinstance(body, dict):
        raise invalid("Input should be a valid dictionary")
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            raise invalid(f"{name}: Field required")
    if not isinstance(body["model"], str) or not body["model"]:
        raise invalid("model: Input should be a valid string")
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise invalid("max_tokens: Input should be greater than or equal to 1")

    validate_tools(body.get("tools"), beta=beta)
    validate_system(body.get("system"))
    messages = validate_message_shapes(body["messages"])
    merged = merge_consecutive(messages)
    validate_conversation(merged)

    breakpoints = [block for block in flatten_prompt(body, merged) if block.ttl is not None]
    if len(breakpoints) > MAX_CACHE_BREAKPOINTS:
        raise invalid(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {len(breakpoints)}."
        )
    validate_cache_lifetimes(breakpoints)
    return merged


def validate_cache_lifetimes(breakpoints: list[PromptBlock]) -> None:
    """Longer lifetimes first: a 1-hour breakpoint after a 5-minute one is refused, as the real API does."""
    five_minutes = next((block for block in breakpoints if block.ttl == "5m"), None)
    for block in breakpoints:
        if five_minutes is not None and block.ttl == "1h" and block.position > five_minutes.position:
            raise invalid(
                f"{block.path}.cache_control.ttl: a ttl='1h' cache_control block must not come after a "
                f"ttl='5m' cache_control block ({five_minutes.path}). Note that blocks are processed in the "
                "following order: `tools`, `system`, `messages`."
            )


def validate_cache_control(path: str, block: Block) -> None:
    if "cache_control" not in block:
        return
    cache_control = block["cache_control"]
    if not isinstance(cache_control, dict) or cache_control.get("type") != "ephemeral":
        raise invalid(f"{path}.cache_control.type: Input should be 'ephemeral'")
    if cache_control.get("ttl", "5m") not in ("5m", "1h"):
        raise invalid(f"{path}.cache_control.ttl: Input should be '5m' or '1h'")


def validate_text_block(path: str, block: Block) -> None:
    if not isinstance(block.get("text"), str):
        raise invalid(f"{path}.text: Field required")
    if block["text"] == "":
        raise invalid(f"{path}.text: text content blocks must be non-empty")


@functools.cache
def typed_tool_shapes(beta: bool) -> dict[str, tuple[str | None, frozenset[str]]]:
    """Each versioned tool type the API takes → (its required name, its allowed fields), read from the
    installed SDK's own types: ``ToolUnionParam`` for ``/v1/messages``, ``BetaToolUnionParam`` for
    ``/v1/messages?beta=true``. (``memory_20250818`` is in both: no beta header is needed for it.)"""
    from typing import Literal, NotRequired, Required, get_args, get_origin, get_type_hints

    from anthropic.types import ToolUnionParam
    from anthropic.types.beta import BetaToolUnionParam

    def unwrap(annotation: Any) -> Any:
        while get_origin(annotation) in (Required, NotRequired):
            annotation = get_args(annotation)[0]
        return annotation

    shapes: dict[str, tuple[str | None, frozenset[str]]] = {}
    for param in get_args(BetaToolUnionParam if beta else ToolUnionParam):
        hints = get_type_hints(param, include_extras=True)
        type_literal, name_literal = unwrap(hints.get("type")), unwrap(hints.get("name"))
        if get_origin(type_literal) is not Literal or "custom" in get_args(type_literal):
            continue
        name = get_args(name_literal)[0] if get_origin(name_literal) is Literal else None
        for tag in get_args(type_literal):
            shapes[tag] = (name, frozenset(hints))
    return shapes


def validate_typed_tool(path: str, tool: Json, *, beta: bool) -> None:
    """A server or client tool with a versioned ``type`` (``memory_20250818``, ``web_search_…``): a known
    tag of this endpoint, its fixed name, only its own fields — as the real API answers (400)."""
    shapes = typed_tool_shapes(beta)
    tag = tool["type"]
    if tag not in shapes:
        expected = ", ".join(f"'{known}'" for known in ["custom", *sorted(shapes)])
        raise invalid(
            f"{path}: Input tag '{tag}' found using 'type' does not match any of the expected tags: {expected}"
        )
    name, fields = shapes[tag]
    if name is not None and tool.get("name") != name:
        raise invalid(f"{path}.{tag}.name: Input should be '{name}'")
    extra = sorted(set(tool) - fields)
    if extra:
        raise invalid(f"{path}.{tag}.{extra[0]}: Extra inputs are not permitted")


def validate_tools(tools: Any, *, beta: bool = False) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise invalid("tools: Input should be a valid list")
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        path = f"tools.{index}"
        if not isinstance(tool, dict):
            raise invalid(f"{path}: Input should be a valid dictionary")
        name = tool.get("name")
        tool_type = tool.get("type") or "custom"
        if tool_type != "custom":
            validate_typed_tool(path, tool, beta=beta)
        elif not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            raise invalid(f"{path}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        if tool_type == "custom":
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise invalid(f"{path}.custom.input_schema: Field required")
            if schema.get("type") != "object":
                raise invalid(f"{path}.custom.input_schema.type: Input should be 'object'")
        validate_cache_control(path, tool)
        if name in seen:
            raise invalid("tools: Tool names must be unique.")
        seen.add(name)


def validate_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise invalid("system: Input should be a valid string or list")
    for index, block in enumerate(system):
        path = f"system.{index}"
        if not isinstance(block, dict) or block.get("type") != "text":
            raise invalid(f"{path}.type: Input should be 'text'")
        validate_text_block(path, block)
        validate_cache_control(path, block)


USER_BLOCK_TYPES = {"text", "image", "document", "tool_result", "search_result"}
ASSISTANT_BLOCK_TYPES = {"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use"}


def validate_message_shapes(messages: Any) -> list[Json]:
    """Per-message checks that need the original indexes (roles, block shapes, empty text)."""
    if not isinstance(messages, list):
        raise invalid("messages: Input should be a valid list")
    if not messages:
        raise invalid("messages: at least one message is required")
    last = len(messages) - 1
    for index, message in enumerate(messages):
        path = f"messages.{index}"
        if not isinstance(message, dict):
            raise invalid(f"{path}: Input should be a valid dictionary")
        role = message.get("role")
        if role == "system":
            raise invalid(
                'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
                'parameter, not "system" as an input message role.'
            )
        if role not in ("user", "assistant"):
            raise invalid(f"{path}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise invalid(f"{path}.content: Field required")
        if not content and not (index == last and role == "assistant"):
            raise invalid(
                f"{path}: all messages must have non-empty content except for the optional final assistant message"
            )
        if isinstance(content, list):
            allowed = USER_BLOCK_TYPES if role == "user" else ASSISTANT_BLOCK_TYPES
            for block_index, block in enumerate(content):
                validate_content_block(f"{path}.content.{block_index}", block, role, allowed)
        if index == last and role == "assistant":
            text = content if isinstance(content, str) else (content[-1].get("text") if content else None)
            if isinstance(text, str) and text != text.rstrip():
                raise invalid("messages: final assistant content cannot end with trailing whitespace")
    return messages


def validate_content_block(path: str, block: Any, role: str, allowed: set[str]) -> None:
    if not isinstance(block, dict):
        raise invalid(f"{path}: Input should be a valid dictionary")
    kind = block.get("type")
    if kind not in allowed:
        raise invalid(f"{path}.type: '{kind}' blocks are not allowed in {role} messages")
    if kind == "text":
        validate_text_block(path, block)
    elif kind == "tool_use":
        if not isinstance(block.get("id"), str) or not TOOL_USE_ID_RE.fullmatch(block["id"]):
            raise invalid(f"{path}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
        if not isinstance(block.get("name"), str) or not block["name"]:
            raise invalid(f"{path}.name: Field required")
        if not isinstance(block.get("input"), dict):
            raise invalid(f"{path}.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        if not isinstance(block.get("tool_use_id"), str):
            raise invalid(f"{path}.tool_use_id: Field required")
        result = block.get("content", "")
        if isinstance(result, list):
            for inner_index, inner in enumerate(result):
                if isinstance(inner, dict) and inner.get("type") == "text":
                    validate_text_block(f"{path}.content.{inner_index}", inner)
        elif not isinstance(result, str):
            raise invalid(f"{path}.content: Input should be a valid string or list")
    validate_cache_control(path, block)


def validate_conversation(merged: list[MergedMessage]) -> None:
    """Checks across messages: who starts, and the tool_use / tool_result pairing."""
    if merged[0].role != "user":
        raise invalid('messages: first message must use the "user" role')
    seen_tool_use_ids: set[str] = set()
    for position, message in enumerate(merged):
        path = f"messages.{message.index}"
        previous = merged[position - 1] if position else None
        following = merged[position + 1] if position + 1 < len(merged) else None
        if message.role == "assistant":
            tool_use_ids = [block["id"] for block in message.content if block.get("type") == "tool_use"]
            for tool_use_id in tool_use_ids:
                if tool_use_id in seen_tool_use_ids:
                    raise invalid(f"{path}: `tool_use` ids must be unique")
                seen_tool_use_ids.add(tool_use_id)
            answered = {
                block["tool_use_id"]
                for block in (following.content if following else [])
                if block.get("type") == "tool_result"
            }
            # A trailing assistant message is a prefill: nothing can answer it yet, and the real API
            # rejects a prefill that holds tool_use blocks all the same.
            missing = [tool_use_id for tool_use_id in tool_use_ids if tool_use_id not in answered]
            if missing:
                raise invalid(
                    f"{path}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
            continue
        asked = {block["id"] for block in (previous.content if previous else []) if block.get("type") == "tool_use"}
        seen_other_content = False
        for block_index, block in enumerate(message.content):
            if block.get("type") != "tool_result":
                seen_other_content = True
                continue
            if seen_other_content:
                raise invalid(
                    f"{path}.content.{block_index}: `tool_result` blocks must come first in the user "
                    "message content, before any other content blocks"
                )
            if block["tool_use_id"] not in asked:
                raise invalid(
                    f"{path}.content.{block_index}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {block['tool_use_id']}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )


# --- prompt caching ----------------------------------------------------------------------------


@dataclass
class PromptBlock:
    """One block of the flattened prompt, with the chained hash and size of the prefix it ends."""

    prefix_hash: str
    prefix_chars: int
    ttl: str | None  # the breakpoint's lifetime ("5m" or "1h"); None: not a breakpoint
    position: int
    path: str  # where the block sits in the request, for error messages

    @property
    def has_cache_control(self) -> bool:
        return self.ttl is not None

    @property
    def prefix_tokens(self) -> int:
        return estimate_tokens_of_chars(self.prefix_chars)


def flatten_prompt(body: Json, merged: list[MergedMessage]) -> list[PromptBlock]:
    """Tools, then system, then message blocks: the order the real API builds its prompt in."""
    tagged: list[tuple[str, str, Block]] = [
        ("tool", f"tools.{i}", tool) for i, tool in enumerate(body.get("tools") or [])
    ]
    system = body.get("system")
    if system:
        tagged += [("system", f"system.{i}", block) for i, block in enumerate(content_blocks(system))]
    for message in merged:
        tagged += [
            (message.role, f"messages.{message.index}.content.{i}", block) for i, block in enumerate(message.content)
        ]

    blocks: list[PromptBlock] = []
    digest = hashlib.sha256(body["model"].encode()).hexdigest()
    chars = 0
    for position, (tag, path, block) in enumerate(tagged):
        serialised = dumps_compact({key: value for key, value in block.items() if key != "cache_control"})
        digest = hashlib.sha256(f"{digest}|{tag}|{serialised}".encode()).hexdigest()
        chars += len(serialised)
        cache_control = block.get("cache_control")
        ttl = cache_control.get("ttl", "5m") if isinstance(cache_control, dict) else None
        blocks.append(PromptBlock(digest, chars, ttl, position, path))
    return blocks


class ManualClock:
    """Seconds on a clock that moves only when told to, so cache lifetimes never need real waiting."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float = 0.0, *, minutes: float = 0.0, hours: float = 0.0) -> float:
        """Move the clock forward; returns the new time."""
        step = seconds + 60 * minutes + 3600 * hours
        if step < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._now += step
            return self._now


@dataclass
class CacheEntry:
    tokens: int
    ttl: str
    expires_at: float


class PromptCache:
    """Prefix hash → entry, with the lifetimes and read/write rules of the module docstring."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._entries: dict[str, CacheEntry] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Live entries."""
        now = self.clock()
        with self._lock:
            return sum(1 for entry in self._entries.values() if entry.expires_at > now)

    def reset(self) -> None:
        with self._lock:
            self._entries.clear()

    def _live(self, prefix_hash: str, now: float) -> CacheEntry | None:
        entry = self._entries.get(prefix_hash)
        if entry is not None and entry.expires_at <= now:
            del self._entries[prefix_hash]
            return None
        return entry

    def account(self, blocks: list[PromptBlock]) -> Json:
        """Usage of one request's input; refreshes what it reads and writes the new prefixes. Thread-safe."""
        total_tokens = blocks[-1].prefix_tokens if blocks else 0
        breakpoints = [index for index, block in enumerate(blocks) if block.ttl is not None]
        now = self.clock()
        with self._lock:
            read_end = -1  # the last block of the longest cached prefix found, -1 for none
            for breakpoint_index in breakpoints:
                # Walk back from the breakpoint; stop where a longer hit is impossible.
                earliest = max(breakpoint_index - CACHE_LOOKBACK_BLOCKS, read_end + 1)
                for index in range(breakpoint_index, earliest - 1, -1):
                    if self._live(blocks[index].prefix_hash, now) is not None:
                        read_end = index
                        break
            # A hit refreshes the entry read and every entry inside that prefix, each for its lifetime.
            for index in range(read_end + 1):
                entry = self._live(blocks[index].prefix_hash, now)
                if entry is not None:
                    entry.expires_at = now + CACHE_TTL_SECONDS[entry.ttl]
            write_end = one_hour_end = read_end
            for breakpoint_index in breakpoints:
                block = blocks[breakpoint_index]
                if breakpoint_index > read_end and block.prefix_tokens >= MIN_CACHEABLE_TOKENS:
                    assert block.ttl is not None
                    expires_at = now + CACHE_TTL_SECONDS[block.ttl]
                    self._entries[block.prefix_hash] = CacheEntry(block.prefix_tokens, block.ttl, expires_at)
                    write_end = breakpoint_index
                    if block.ttl == "1h":
                        one_hour_end = breakpoint_index

        def tokens_to(index: int) -> int:
            return blocks[index].prefix_tokens if index >= 0 else 0

        read_tokens, written_tokens = tokens_to(read_end), tokens_to(write_end)
        one_hour_tokens = tokens_to(one_hour_end)
        return {
            "input_tokens": total_tokens - written_tokens,
            "cache_creation_input_tokens": written_tokens - read_tokens,
            "cache_read_input_tokens": read_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written_tokens - one_hour_tokens,
                "ephemeral_1h_input_tokens": one_hour_tokens - read_tokens,
            },
        }


# --- replies -----------------------------------------------------------------------------------


@dataclass
class Reply:
    """What the fake model answers. ``stop_reason`` None means tool_use if a tool is called, else
    end_turn. Blocks are Messages API content blocks; a tool_use block without an id gets one."""

    blocks: list[Block]
    stop_reason: str | None = None

    def finished_blocks(self) -> list[Block]:
        finished = []
        for block in self.blocks:
            block = dict(block)
            if block.get("type") == "tool_use":
                block.setdefault("id", new_id("toolu_"))
                block.setdefault("input", {})
            finished.append(block)
        return finished

    def final_stop_reason(self, blocks: list[Block]) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(block.get("type") == "tool_use" for block in blocks) else "end_turn"


Responder = Callable[[Json], "Reply | str | None"]


def echo_reply(body: Json) -> Reply:
    """The default answer: ``Echo: `` and the first text block of the last user message."""
    for message in reversed(body["messages"]):
        if message["role"] != "user":
            continue
        for block in content_blocks(message["content"]):
            if block.get("type") == "text":
                return Reply([{"type": "text", "text": f"Echo: {block['text']}"}])
        break
    return Reply([{"type": "text", "text": "Echo: (no text)"}])


def output_tokens(blocks: list[Block]) -> int:
    chars = 0
    for block in blocks:
        if block.get("type") == "text":
            chars += len(block.get("text", ""))
        elif block.get("type") == "tool_use":
            chars += len(block["name"]) + len(dumps_compact(block.get("input", {})))
        else:
            chars += len(dumps_compact(block))
    return max(1, estimate_tokens_of_chars(chars))


def split_evenly(text: str, pieces: int) -> list[str]:
    size = max(1, math.ceil(len(text) / pieces))
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def stream_events(message: Json) -> Iterator[tuple[str, Json]]:
    """The SSE events the real API sends for ``message``, in order, as (event name, data)."""

    def event(name: str, **data: Any) -> tuple[str, Json]:
        return name, {"type": name, **data}

    usage = message["usage"]
    opening = dict(message, content=[], stop_reason=None, stop_sequence=None)
    yield event("message_start", message=dict(opening, usage=dict(usage, output_tokens=1)))
    yield event("ping")
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield event("content_block_start", index=index, content_block={"type": "text", "text": ""})
            for piece in split_evenly(block["text"], 3):
                yield event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        elif block["type"] == "tool_use":
            yield event("content_block_start", index=index, content_block=dict(block, input={}))
            # The real API opens with an empty partial_json and then splits the JSON anywhere,
            # mid-string included: clients must only parse the concatenation.
            for piece in ["", *split_evenly(dumps_compact(block["input"]), 4)]:
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield event("content_block_delta", index=index, delta=delta)
        else:
            yield event("content_block_start", index=index, content_block=block)
        yield event("content_block_stop", index=index)
    # Usage on message_delta is cumulative: the SDK overwrites what message_start said.
    yield event(
        "message_delta",
        delta={"stop_reason": message["stop_reason"], "stop_sequence": None},
        usage={key: usage[key] for key in USAGE_FIELDS},
    )
    yield event("message_stop")


# --- the server --------------------------------------------------------------------------------


@dataclass
class _StreamFault:
    after_events: int
    error: ApiError | None  # None: close the connection abruptly; else send an SSE error event


@dataclass
class _Faults:
    failures: collections.deque[tuple[ApiError, float | None]] = field(default_factory=collections.deque)
    hangs: collections.deque[float] = field(default_factory=collections.deque)
    stream_faults: collections.deque[_StreamFault] = field(default_factory=collections.deque)
    seconds_per_event: float = 0.0


class FakeAnthropic:
    """A Messages API server on 127.0.0.1 (free port) in a background thread.

    Use ``start()``/``stop()`` (or ``with FakeAnthropic() as server``) and point the SDK at
    ``server.base_url``. ``api_key``, when given, is the only key accepted; otherwise any
    non-empty key is.
    """

    def __init__(self, *, api_key: str | None = None, clock: Callable[[], float] | None = None) -> None:
        self.api_key = api_key
        # The clock cache lifetimes run on: a ManualClock by default (``server.clock.advance(minutes=6)``).
        self.clock = clock if clock is not None else ManualClock()
        self.cache = PromptCache(self.clock)
        self.responder: Responder | None = None
        self._replies: collections.deque[Reply] = collections.deque()
        self._faults = _Faults()
        self._requests: list[Json] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> FakeAnthropic:
        handler = type("BoundHandler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake hanging or delayed handlers and close every open connection."""
        self._stopping.set()
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeAnthropic is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def client(self, **kwargs: Any) -> Any:
        """An ``anthropic.Anthropic`` client for this server (no retries unless asked)."""
        import anthropic

        kwargs.setdefault("api_key", self.api_key or "test-key")
        kwargs.setdefault("max_retries", 0)
        return anthropic.Anthropic(base_url=self.base_url, **kwargs)

    # scripting

    def queue_reply(self, blocks: list[Block], stop_reason: str | None = None) -> Reply:
        reply = Reply(blocks, stop_reason)
        with self._lock:
            self._replies.append(reply)
        return reply

    def queue_text(self, text: str, stop_reason: str | None = None) -> Reply:
        return self.queue_reply([{"type": "text", "text": text}], stop_reason)

    def queue_tool_call(self, name: str, input: Json, *, id: str | None = None, text: str | None = None) -> str:
        """Queue a reply calling one tool (optionally after some text); returns the tool_use id."""
        tool_use_id = id or new_id("toolu_")
        blocks: list[Block] = [{"type": "text", "text": text}] if text else []
        blocks.append({"type": "tool_use", "id": tool_use_id, "name": name, "input": input})
        self.queue_reply(blocks, "tool_use")
        return tool_use_id

    @property
    def queued_replies(self) -> int:
        with self._lock:
            return len(self._replies)

    # failures on demand

    def fail_next(
        self,
        status: int = 500,
        times: int = 1,
        *,
        message: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """The next ``times`` requests get ``status`` with the real error body (529 = overloaded_error).
        ``retry_after`` adds a ``retry-after`` header (seconds), which the SDK honours."""
        with self._lock:
            self._faults.failures.extend([(ApiError(status, message), retry_after)] * times)

    def hang_next(self, seconds: float, times: int = 1) -> None:
        """The next ``times`` requests get no answer for ``seconds``, then the connection closes:
        a client whose timeout is shorter sees a timeout. Hung requests consume no reply."""
        with self._lock:
            self._faults.hangs.extend([seconds] * times)

    def cut_stream_next(self, after_events: int) -> None:
        """The next streaming response closes its connection abruptly after ``after_events`` events."""
        with self._lock:
            self._faults.stream_faults.append(_StreamFault(after_events, None))

    def error_stream_next(self, after_events: int, status: int = 529) -> None:
        """The next streaming response sends an SSE ``error`` event after ``after_events`` events
        (the real API does this when it overloads mid-stream) and ends."""
        with self._lock:
            self._faults.stream_faults.append(_StreamFault(after_events, ApiError(status)))

    def delay_stream(self, seconds_per_event: float) -> None:
        """Wait this long before each SSE event after the first, from now on (0 turns it off)."""
        with self._lock:
            self._faults.seconds_per_event = seconds_per_event

    # recording and cache

    @property
    def requests(self) -> list[Json]:
        """Every request received, oldest first: ``{"path", "headers", "body"}`` (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> Json | None:
        with self._lock:
            return self._requests[-1] if self._requests else None

    def reset_cache(self) -> None:
        self.cache.reset()

    # used by the handler

    def _record(self, path: str, headers: dict[str, str], body: Any) -> None:
        with self._lock:
            self._requests.append({"path": path, "headers": headers, "body": body})

    def _take_failure(self) -> tuple[ApiError, float | None] | None:
        with self._lock:
            return self._faults.failures.popleft() if self._faults.failures else None

    def _take_hang(self) -> float | None:
        with self._lock:
            return self._faults.hangs.popleft() if self._faults.hangs else None

    def _take_stream_fault(self) -> _StreamFault | None:
        with self._lock:
            return self._faults.stream_faults.popleft() if self._faults.stream_faults else None

    def _seconds_per_event(self) -> float:
        with self._lock:
            return self._faults.seconds_per_event

    def _next_reply(self, body: Json) -> Reply:
        with self._lock:
            queued = self._replies.popleft() if self._replies else None
            responder = self.responder
        if queued is not None:
            return queued
        if responder is not None:
            try:
                answer = responder(body)
            except Exception as exc:
                # A bug in a test's responder: show it in the test's output and answer a clear 500
                # rather than dropping the connection.
                traceback.print_exc()
                raise ApiError(500, f"fake responder failed: {exc!r}") from exc
            if isinstance(answer, str):
                return Reply([{"type": "text", "text": answer}])
            if answer is not None:
                return answer
        return echo_reply(body)

    def _answer(self, body: Json, merged: list[MergedMessage]) -> Json:
        usage = self.cache.account(flatten_prompt(body, merged))
        reply = self._next_reply(body)
        blocks = reply.finished_blocks()
        usage = {
            **usage,
            "output_tokens": output_tokens(blocks),
            "service_tier": "standard",
        }
        return {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": reply.final_stop_reason(blocks),
            "stop_sequence": None,
            "usage": usage,
        }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeAnthropic  # set on the per-server subclass
    protocol_version = "HTTP/1.1"  # keep-alive and chunked SSE, like the real API

    def setup(self) -> None:
        super().setup()
        # Each SSE event and each small response is its own write: without TCP_NODELAY, Nagle's
        # algorithm holds a write back until the client's delayed ACK of the one before, adding tens
        # of milliseconds to back-to-back calls that the real API does not have.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.fake._lock:
            self.fake._connections.add(self.connection)

    def handle(self) -> None:
        # A client that hangs up (a timeout, a cancelled stream) resets the connection while the
        # handler waits for the next keep-alive request: that is normal, not an error to print.
        with contextlib.suppress(ConnectionError):
            super().handle()

    def finish(self) -> None:
        with self.fake._lock:
            self.fake._connections.discard(self.connection)
        with contextlib.suppress(OSError):  # the client may already be gone
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._read_body()
        self._send_error(ApiError(404, f"Not found: {self.path}"), new_id("req_"))

    def do_POST(self) -> None:
        request_id = new_id("req_")
        raw = self._read_body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.fake._record(self.path, {key.lower(): value for key, value in self.headers.items()}, body)
        path = self.path.split("?", 1)[0]
        try:
            if path not in ("/v1/messages", "/v1/messages/count_tokens"):
                raise ApiError(404, f"Not found: {self.path}")
            self._check_auth()
            if (failure := self.fake._take_failure()) is not None:
                error, retry_after = failure
                self._send_error(error, request_id, retry_after)
                return
            if (seconds := self.fake._take_hang()) is not None:
                self.fake._stopping.wait(seconds)
                self.close_connection = True
                return
            if raw and body is None:
                raise invalid("There was an error parsing the body of your request: invalid JSON")
            if path == "/v1/messages/count_tokens":
                self._count_tokens(body, request_id)
                return
            merged = validate_request(body, beta="beta=true" in self.path.partition("?")[2])
            message = self.fake._answer(body, merged)
        except ApiError as error:
            self._send_error(error, request_id)
            return
        if body.get("stream"):
            self._send_stream(message, request_id)
        else:
            self._send_json(200, message, request_id)

    def _count_tokens(self, body: Any, request_id: str) -> None:
        if isinstance(body, dict):
            body = {"max_tokens": 1, **body}
        merged = validate_request(body)
        blocks = flatten_prompt(body, merged)
        self._send_json(200, {"input_tokens": blocks[-1].prefix_tokens if blocks else 0}, request_id)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _check_auth(self) -> None:
        key = self.headers.get("x-api-key")
        authorization = self.headers.get("authorization", "")
        if not key and authorization.lower().startswith("bearer "):
            key = authorization[len("bearer ") :].strip()
        if not key:
            raise ApiError(401, "x-api-key header is required")
        if self.fake.api_key is not None and key != self.fake.api_key:
            raise ApiError(401, "invalid x-api-key")
        if not self.headers.get("anthropic-version"):
            raise invalid("anthropic-version: header is required")

    def _send_json(self, status: int, payload: Json, request_id: str, headers: dict[str, str] | None = None) -> None:
        data = dumps_compact(payload).encode()
        try:
            self.send_response(status, HTTP_REASONS.get(status))
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", request_id)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client went away (timed out or cancelled)

    def _send_error(self, error: ApiError, request_id: str, retry_after: float | None = None) -> None:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else None
        self._send_json(error.status, error.body(request_id), request_id, headers)

    def _send_stream(self, message: Json, request_id: str) -> None:
        fault = self.fake._take_stream_fault()
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("request-id", request_id)
            self.end_headers()
            for sent, (event, data) in enumerate(stream_events(message)):
                if fault is not None and sent == fault.after_events:
                    if fault.error is None:
                        self._close_abruptly()
                        return
                    self._write_chunk(self._sse("error", fault.error.body(request_id)))
                    break
                seconds = self.fake._seconds_per_event()
                if sent and seconds and self.fake._stopping.wait(seconds):
                    self._close_abruptly()
                    return
                self._write_chunk(self._sse(event, data))
            self._write_chunk(b"")  # the terminating zero-length chunk
        except OSError:
            self.close_connection = True  # the client closed the stream (a cancellation)

    @staticmethod
    def _sse(event: str, data: Json) -> bytes:
        return f"event: {event}\ndata: {dumps_compact(data)}\n\n".encode()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _close_abruptly(self) -> None:
        """End the connection mid-body, without the final chunk: the client sees a broken stream."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
