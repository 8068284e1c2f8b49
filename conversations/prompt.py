"""The request of one model call, laid out for the provider's prompt cache (contract §3).

Order and breakpoints: tools (breakpoint on the last tool) → system prompt (breakpoint) → the window
(breakpoint on the last archived block) → the per-call context block. Everything before the context
block changes only when the window moves, the summary changes or a message is appended, so each call
reads the previous call's prefix from the cache. The canvas snapshot and the clock live in the
context block, after the last breakpoint: a canvas change re-prices nothing.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from conversations.models import Session
from conversations.tools import tool_definitions
from memory.selectors import summary_latest

CACHE = {"type": "ephemeral"}


def system_prompt(*, session: Session) -> list[dict[str, Any]]:
    agent = session.agent
    user = session.user
    name = user.get_full_name() or user.get_username()
    parts = [
        agent.personality.strip() or f"You are {agent.name}, a helpful assistant.",
        f"You are talking with {name}.",
        "Beside the chat there is a canvas you control with the canvas tools; the newest user message ends "
        "with a note of the current date and time and of what is on the canvas. Only earlier messages are "
        "shown to you; use the memory tools (search_history, get_messages_by_date, get_extended_context) to "
        "look further back, and cite dates when you use what you find.",
    ]
    summary = summary_latest(session=session)
    if summary is not None:
        parts.append(f"Previous conversation summary:\n{summary.text}")
    return [{"type": "text", "text": "\n\n".join(parts), "cache_control": CACHE}]


def context_text(*, session: Session, now: datetime | None = None) -> str:
    from canvas.selectors import canvas_snapshot_text

    now = now or timezone.now()
    lines = [f"Current date and time (UTC): {now.astimezone(UTC):%Y-%m-%d %H:%M (%A)}"]
    snapshot = canvas_snapshot_text(session=session)
    if snapshot:
        lines.append(snapshot)
    return "\n".join(lines)


def request_build(*, session: Session, window_messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The keyword arguments of `messages.stream` for one call, minus model and max_tokens.

    Precondition: the window ends with a user message (the prompt or the latest tool results).
    """
    messages = copy.deepcopy(window_messages)
    last = messages[-1]
    if last["role"] != "user":
        raise ValueError("the window must end with a user message")
    last["content"][-1]["cache_control"] = CACHE
    last["content"].append({"type": "text", "text": context_text(session=session)})
    tools = copy.deepcopy(tool_definitions())
    tools[-1]["cache_control"] = CACHE
    return {"system": system_prompt(session=session), "messages": messages, "tools": tools}


def model_for(session: Session) -> str:
    return session.agent.model or settings.BUDDY_MODEL
