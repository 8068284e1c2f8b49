"""The model behind one small interface: the official Anthropic SDK, or the offline demo model.

Both stream text through `on_text`, stop early when `should_stop()` says so, and return the whole
assistant message as content blocks with its usage (cache fields that the provider leaves `None`
are counted as 0).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

import httpx2
from django.conf import settings

from conversations.content import tool_result_text


class ModelError(Exception):
    """The provider failed after the SDK's own retries (4xx, 5xx, overload, timeout, cut stream)."""


@dataclass
class ModelReply:
    content: list[dict[str, Any]]
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict)
    stopped_early: bool = False  # cancelled mid-stream: `content` holds what had arrived
    model: str = ""  # the model that answered, as the provider names it (empty: the one asked for)


USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def usage_dict(usage: Any) -> dict[str, int]:
    """Usage figures as plain ints (the API may send `None` for the cache fields), with the cache writes
    split by lifetime: `cache_creation_5m_input_tokens` and `cache_creation_1h_input_tokens`, from the
    API's `cache_creation` breakdown; without one, every write counts as a 5-minute one (the API's
    default lifetime)."""
    figures = {name: int(getattr(usage, name, None) or 0) for name in USAGE_FIELDS}
    breakdown = getattr(usage, "cache_creation", None)
    if breakdown is None:
        figures["cache_creation_5m_input_tokens"] = figures["cache_creation_input_tokens"]
        figures["cache_creation_1h_input_tokens"] = 0
    else:
        figures["cache_creation_5m_input_tokens"] = int(getattr(breakdown, "ephemeral_5m_input_tokens", 0) or 0)
        figures["cache_creation_1h_input_tokens"] = int(getattr(breakdown, "ephemeral_1h_input_tokens", 0) or 0)
    return figures


class ModelClient(Protocol):
    def stream(
        self,
        *,
        model: str,
        system: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
        on_text: Callable[[str], None],
        should_stop: Callable[[], bool],
    ) -> ModelReply: ...

    def complete(self, *, model: str, system: str, prompt: str, max_tokens: int) -> ModelReply: ...


def _final_reply(final: Any, model: str) -> ModelReply:
    """A reply from the SDK's final message (`model`: the one asked for, when the provider names none)."""
    return ModelReply(
        content=[block.model_dump(exclude_none=True, mode="json") for block in final.content],
        stop_reason=final.stop_reason or "end_turn",
        usage=usage_dict(final.usage),
        model=final.model or model,
    )


def _stream_generics() -> list[type]:
    """The generic message classes the SDK's stream parametrizes on every call. pydantic caches such a
    class only while something refers to it, so without these references each turn after a garbage
    collection builds the class again (a whole pydantic model schema)."""
    try:
        from anthropic.lib._parse._response import ResponseFormatT as stream_format
        from anthropic.types.parsed_message import ParsedMessage, ParsedTextBlock
        from anthropic.types.parsed_message import ResponseFormatT as message_format
    except ImportError:  # another SDK layout: it builds them as it does
        return []
    return [
        model[variable] for model in (ParsedMessage, ParsedTextBlock) for variable in (stream_format, message_format)
    ]


class AnthropicClient:
    def __init__(self) -> None:
        import anthropic

        # What counts as the provider failing: the SDK's errors after its retries, and a stream cut
        # mid-way, which surfaces as the transport's own error rather than the SDK's.
        self._failures = (anthropic.AnthropicError, httpx2.HTTPError, OSError, ValueError)
        self.client = anthropic.Anthropic(
            api_key=settings.ANTHROPIC_API_KEY or None,
            base_url=settings.ANTHROPIC_BASE_URL,
            max_retries=settings.BUDDY_LLM_RETRIES,
            timeout=settings.BUDDY_LLM_TIMEOUT,
        )
        self._generics = _stream_generics()

    def stream(self, *, model, system, messages, tools, max_tokens, on_text, should_stop) -> ModelReply:
        try:
            with self.client.messages.stream(
                model=model, system=system, messages=messages, tools=tools, max_tokens=max_tokens
            ) as stream:
                for event in stream:
                    if event.type == "text" and event.text:
                        on_text(event.text)
                    if should_stop():
                        snapshot = stream.current_message_snapshot
                        text = "".join(b.text for b in snapshot.content if b.type == "text")
                        content = [{"type": "text", "text": text}] if text else []
                        return ModelReply(
                            content=content,
                            stop_reason="cancelled",
                            usage=usage_dict(snapshot.usage),
                            stopped_early=True,
                            model=snapshot.model or model,
                        )
                final = stream.get_final_message()
        except self._failures as exc:
            raise ModelError(describe_api_error(exc)) from exc
        return _final_reply(final, model)

    def complete(self, *, model, system, prompt, max_tokens) -> ModelReply:
        try:
            final = self.client.messages.create(
                model=model, system=system, max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}]
            )
        except self._failures as exc:
            raise ModelError(describe_api_error(exc)) from exc
        return _final_reply(final, model)


def describe_api_error(exc: Exception) -> str:
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return "The model provider did not answer in time."
    if isinstance(exc, anthropic.APIConnectionError):
        return "The model provider could not be reached."
    if isinstance(exc, anthropic.APIStatusError):
        message = ""
        body = exc.body if isinstance(exc.body, dict) else {}
        if isinstance(body.get("error"), dict):
            message = body["error"].get("message", "")
        if exc.status_code == 529:
            return "The model provider is overloaded; try again shortly."
        return f"The model provider answered {exc.status_code}" + (f": {message}" if message else ".")
    if isinstance(exc, anthropic.APIError):
        return f"The model provider failed: {exc}"
    return f"The model stream broke off: {exc}"


# What the admin and the stats call the offline demo model, whatever BUDDY_MODEL says: nobody should
# believe Claude answered.
OFFLINE_MODEL = "buddy-offline-demo"


class OfflineClient:
    """A tiny deterministic model for demos and browser tests (README: the offline demo model), no network.

    A prompt `CANVAS: [{"name": TOOL, "input": {...}}, ...]` makes exactly those tool calls; after
    their results it says what they did (`round_report`). Anything else gets a short echo. It streams
    word by word.
    Its usage counts the request's characters / 4 as input tokens, the way the archive estimates them.
    """

    def stream(self, *, model, system, messages, tools, max_tokens, on_text, should_stop) -> ModelReply:
        reply = self._answer(messages, on_text, should_stop)
        reply.model = OFFLINE_MODEL
        reply.usage["input_tokens"] = _estimate({"system": system, "messages": messages, "tools": tools})
        return reply

    def _answer(self, messages, on_text, should_stop) -> ModelReply:
        last = messages[-1]
        results = [b for b in last["content"] if b.get("type") == "tool_result"]
        if results:
            calls = messages[-2]["content"] if len(messages) > 1 and isinstance(messages[-2]["content"], list) else []
            uses = {b.get("id"): b for b in calls if b.get("type") == "tool_use"}
            return self._say(round_report(results, uses), on_text, should_stop)
        prompt = next((b["text"] for b in last["content"] if b.get("type") == "text"), "")
        if prompt.startswith("CANVAS:"):
            try:
                calls = json.loads(prompt[len("CANVAS:") :])
                if not isinstance(calls, list) or not all(
                    isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("input"), dict)
                    for c in calls
                ):
                    raise ValueError("expected a list of {name, input}")
            except ValueError as exc:
                return self._say(f"I could not read that CANVAS: command ({exc}).", on_text, should_stop)
            if calls:
                count = sum(1 for m in messages for b in m["content"] if b.get("type") == "tool_use")
                blocks = [
                    {"type": "tool_use", "id": f"toolu_offline_{count + i}", "name": c["name"], "input": c["input"]}
                    for i, c in enumerate(calls)
                ]
                return ModelReply(content=blocks, stop_reason="tool_use", usage={"output_tokens": _estimate(blocks)})
        answer = re.sub(r"\s+", " ", prompt).strip()[:500]
        return self._say(f"(offline demo) You said: {answer}", on_text, should_stop)

    def complete(self, *, model, system, prompt, max_tokens) -> ModelReply:
        text = re.sub(r"\s+", " ", prompt).strip()[: max_tokens * 4]
        blocks = [{"type": "text", "text": text or "(nothing yet)"}]
        usage = {"input_tokens": _estimate({"system": system, "prompt": prompt}), "output_tokens": _estimate(blocks)}
        return ModelReply(content=blocks, stop_reason="end_turn", usage=usage, model=OFFLINE_MODEL)

    def _say(self, text: str, on_text, should_stop) -> ModelReply:
        sent = []
        for word in re.findall(r"\S+\s*", text):
            if should_stop():
                break
            on_text(word)
            sent.append(word)
        said = "".join(sent)
        blocks = [{"type": "text", "text": said}] if said else []
        return ModelReply(
            content=blocks,
            stop_reason="end_turn" if len(sent) else "cancelled",
            usage={"output_tokens": len(said) // 4 + 1},
            stopped_early=said != text,
        )


# What the offline model reports of a round of tool calls (README: the offline demo model).
SEARCH_TOOLS = ("search_history", "get_messages_by_date", "get_extended_context")
MEMORY_DONE = {"create": "saved", "str_replace": "saved", "insert": "saved", "delete": "deleted", "rename": "renamed"}
QUOTED_MESSAGES = 2
QUOTE_CHARS = 60
# A line of the memory tools' results: `[#12 2026-11-20 14:03 user] text` (memory.tools.message_line).
FOUND_LINE = re.compile(r"^\[#\d+ \S+ \S+ (user|assistant)\] (.*)$")
# How the memory tool starts an error, before saying why (memory.notes.tool).
MEMORY_FAILED = re.compile(r"^memory(?: \w+)? failed, nothing changed: ")


def round_report(results: list[dict[str, Any]], uses: dict[str, dict[str, Any]]) -> str:
    """One line per memory or search call (what it did, found or why it failed), and for the other
    calls how many succeeded and why the others failed."""
    lines, done, failed = [], 0, []
    for result in results:
        use = uses.get(result.get("tool_use_id"), {})
        name, tool_input = use.get("name", ""), use.get("input") if isinstance(use.get("input"), dict) else {}
        text, is_error = tool_result_text(result.get("content")), bool(result.get("is_error"))
        if name == "memory":
            lines.append(_memory_report(tool_input, text, is_error))
        elif name in SEARCH_TOOLS:
            lines.append(_search_report(name, text, is_error))
        elif is_error:
            failed.append(text)
        else:
            done += 1
    if done or failed:
        summary = f"Done: {done} canvas change(s) made."
        if failed:
            summary += " Failed: " + "; ".join(failed)
        lines.insert(0, summary)
    return "\n".join(lines)


def _memory_report(tool_input: dict[str, Any], text: str, is_error: bool) -> str:
    command = str(tool_input.get("command", ""))
    if command == "rename":
        what = f"memory rename {tool_input.get('old_path', '')} to {tool_input.get('new_path', '')}"
    else:
        what = f"memory {command} {tool_input.get('path', '')}".rstrip()
    if is_error:
        return f"{what}: failed — {MEMORY_FAILED.sub('', text)}"
    if text.startswith("Not saved yet"):
        return f"{what}: not saved yet — you were asked on the canvas, and it is kept only if you confirm."
    if command == "view":
        listed = text.split("\n")[1:]
        if text.startswith("Here's the content"):
            return f"{what}: read {len(listed)} line(s)."
        notes = [line for line in listed if "\t" in line]
        return f"{what}: {len(notes)} note(s)."
    return f"{what}: {MEMORY_DONE.get(command, 'done')}."


def _search_report(name: str, text: str, is_error: bool) -> str:
    if is_error:  # the tool's own error names it: "search_history failed: …"
        return text if text.startswith(name) else f"{name} failed: {text}"
    found = [match for line in text.split("\n") if (match := FOUND_LINE.match(line))]
    if not found:
        return f"{name} found no messages."
    quotes = "; ".join(
        f"“{_shortened(match.group(2))}” ({'you' if match.group(1) == 'user' else 'Buddy'})"
        for match in found[:QUOTED_MESSAGES]
    )
    count = f"{len(found)} message" + ("" if len(found) == 1 else "s")
    return f"{name} found {count}: {quotes}" + (", …" if len(found) > QUOTED_MESSAGES else ".")


# A search snippet marks each match between bare brackets and escapes its own (textsearch.text).
SNIPPET_MARK = re.compile(r"\\(.)|[\[\]]")


def _shortened(text: str) -> str:
    """The text a person reads: a snippet's match marks dropped, then cut to QUOTE_CHARS."""
    text = SNIPPET_MARK.sub(lambda match: match.group(1) or "", text)
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rstrip() + "…"


def _estimate(value: Any) -> int:
    return max(1, len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) // 4)


@cache
def _anthropic_client(key: tuple) -> AnthropicClient:
    return AnthropicClient()


def model_client() -> ModelClient:
    """The client the settings ask for (`BUDDY_LLM`), reused while those settings stay the same."""
    if settings.BUDDY_LLM == "offline":
        return OfflineClient()
    key = (
        settings.ANTHROPIC_API_KEY,
        settings.ANTHROPIC_BASE_URL,
        settings.BUDDY_LLM_RETRIES,
        settings.BUDDY_LLM_TIMEOUT,
    )
    return _anthropic_client(key)
