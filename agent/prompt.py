"""The request of one model call, laid out for the provider's prompt cache (README, "How a turn flows").

Order and breakpoints: tools (breakpoint on the last tool) → system prompt (breakpoint) → the window
(a breakpoint on the message before the newest one — what the model said last — when the lifetimes
ask for one, and one on the last archived block) → the per-call context block. Everything before
the context block changes only when the window moves, the summary changes or a message is appended,
so each call reads the previous call's prefix from the cache. The canvas snapshot and the clock live
in the context block, after the last breakpoint, and so do the memory notes: a canvas or note change
re-prices nothing. Each
breakpoint's lifetime comes from `agent.cache` (`BUDDY_CACHE_TTL`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone

from agent.cache import CacheLifetimes, cache_lifetimes
from agent.tools import tool_definitions
from canvas.selectors import canvas_snapshot_text
from conversations.models import Session
from conversations.window import RecentMessages
from memory.notes.selectors import notes_context_text
from memory.selectors import summary_latest

if TYPE_CHECKING:
    from memory.models import Summary


def system_prompt(*, session: Session, summary: Summary | None = None) -> list[dict[str, Any]]:
    agent = session.agent
    user = session.user
    name = user.get_full_name() or user.get_username()
    parts = [
        agent.personality.strip() or f"You are {agent.name}, a helpful assistant.",
        f"You are talking with {name}.",
        "Beside the chat there is a canvas you control with the canvas tools; the newest user message ends "
        "with a note of the current date and time and of what is on the canvas. Only earlier messages are "
        "shown to you; use the memory tools (search_history, get_messages_by_date, get_extended_context) to "
        "look further back, and cite dates when you use what you find. Keep short notes of what matters "
        "with the memory tool; the user sees and edits them. Notes under /memories/profile/ are shared by "
        "all the user's chats, so writing one asks the user first.",
    ]
    if summary is not None:
        parts.append(f"Previous conversation summary:\n{summary.text}")
    return [{"type": "text", "text": "\n\n".join(parts)}]


def context_text(*, session: Session, now: datetime | None = None) -> str:
    now = now or timezone.now()
    lines = [f"Current date and time (UTC): {now.astimezone(UTC):%Y-%m-%d %H:%M (%A)}"]
    snapshot = canvas_snapshot_text(session=session)
    if snapshot:
        lines.append(snapshot)
    notes = notes_context_text(session=session)
    if notes:
        lines.append(notes)
    return "\n".join(lines)


_UNREAD: Any = object()


def request_build(
    *,
    session: Session,
    window_messages: list[dict[str, Any]],
    window_moved: bool = False,
    summary: Summary | None = _UNREAD,
    recent: RecentMessages | None = None,
) -> dict[str, Any]:
    """The keyword arguments of `messages.stream` for one call, minus model and max_tokens.

    Precondition: the window ends with a user message (the prompt or the latest tool results).
    `window_moved`: the window's start moved for this call (the whole prefix after the tools is new).
    `summary`: the session's latest summary, when the caller has read it (None: there is none).
    `recent`: the rows the window was read from (`Window.recent`), which give the chat's pace.
    """
    if window_messages[-1]["role"] != "user":
        raise ValueError("the window must end with a user message")
    # Only the last two messages get a breakpoint or the context block: they are copied (down to their
    # blocks), the rest is sent as the window holds it (the SDK copies the whole request again).
    messages = list(window_messages)
    for index in range(max(len(messages) - 2, 0), len(messages)):
        messages[index] = {**messages[index], "content": [dict(block) for block in messages[index]["content"]]}
    last = messages[-1]
    if summary is _UNREAD:
        summary = summary_latest(session=session)
    lifetimes = cache_lifetimes(
        session=session,
        window_moved=window_moved,
        summary_at=summary.created_at if summary is not None else None,
        recent=recent,
    )
    system = system_prompt(session=session, summary=summary)
    system[-1]["cache_control"] = CacheLifetimes.control(lifetimes.system)
    if lifetimes.history is not None and len(messages) > 1:
        messages[-2]["content"][-1]["cache_control"] = CacheLifetimes.control(lifetimes.history)
    last["content"][-1]["cache_control"] = CacheLifetimes.control(lifetimes.tail)
    last["content"].append({"type": "text", "text": context_text(session=session)})
    tools = tool_definitions()
    tools[-1] = {**tools[-1], "cache_control": CacheLifetimes.control(lifetimes.tools)}
    return {"system": system, "messages": messages, "tools": tools}


def model_for(session: Session) -> str:
    return session.agent.model or settings.BUDDY_MODEL
