"""Which archived messages a reply drew on (README: Memory notes; docs/memory.md).

The memory tools cite messages as `[#ID …]` (search_history, get_messages_by_date,
get_extended_context) and a note viewed with the memory tool names the message it was kept from
(`[#ID]`). A reply — an assistant message with text and no tool call — lists the messages its
turn's successful memory tool results cited, in order, each once, as long as they are the user's and
older than the turn. Each source says who wrote it (`role`), when, and a one-line `snippet` of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from conversations.content import snippet, tool_result_text
from conversations.models import Message, Session

# The tools whose results cite archived messages: the memory app's tools (memory/tools.py, memory/notes/tool.py;
# tests/memory/test_provenance.py holds the two lists together). Named here, not imported: the archive
# is below the memory app.
MEMORY_TOOL_NAMES = frozenset({"search_history", "get_messages_by_date", "get_extended_context", "memory"})
CITED_RE = re.compile(r"\[#(\d{1,18})[ \]]")


def cited_ids(messages: Iterable[Any]) -> dict[int, list[int]]:
    """Reply id → the message ids its turn's memory tool results cited, for `messages` in archive order
    (each with `id`, `role`, `content`, `is_turn_start`)."""
    replies: dict[int, list[int]] = {}
    memory_calls: set[str] = set()
    cited: list[int] = []
    turn_start = 0
    for message in messages:
        blocks = [b for b in message.content if isinstance(b, dict)] if isinstance(message.content, list) else []
        if message.is_turn_start:
            memory_calls, cited, turn_start = set(), [], message.id
        if message.role == "assistant":
            calls = [b for b in blocks if b.get("type") == "tool_use"]
            memory_calls |= {b.get("id") for b in calls if b.get("name") in MEMORY_TOOL_NAMES}
            if cited and not calls and any(b.get("type") == "text" and b.get("text") for b in blocks):
                replies[message.id] = list(dict.fromkeys(cited))
            continue
        for block in blocks:
            answered = block.get("type") == "tool_result" and block.get("tool_use_id") in memory_calls
            if answered and not block.get("is_error"):
                found = (int(number) for number in CITED_RE.findall(tool_result_text(block.get("content"))))
                cited.extend(number for number in found if number < turn_start)  # not the turn's own prompt
    return replies


def _resolved(session: Session, ids: set[int]) -> dict[int, dict[str, Any]]:
    rows = Message.objects.filter(id__in=ids, session__user_id=session.user_id).values(
        "id", "role", "content", "created_at", "session__chat_id", "session__agent__slug"
    )
    return {
        row["id"]: {
            "id": row["id"],
            "agent": row["session__agent__slug"],
            "chat_id": row["session__chat_id"],
            "role": row["role"],
            "created_at": row["created_at"],
            "snippet": snippet(row["content"]),
        }
        for row in rows
    }


def history_sources(*, session: Session, messages: list[Any]) -> dict[int, list[dict[str, Any]]]:
    """The sources of every reply in a page of history (oldest first). A turn that began before the
    page is read from its start."""
    if not messages:
        return {}
    first_start = (
        Message.objects.filter(session=session, id__lte=messages[0].id, is_turn_start=True)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    earlier: list[Any] = []
    if first_start is not None and first_start < messages[0].id:
        earlier = list(
            Message.objects.filter(session=session, id__gte=first_start, id__lt=messages[0].id)
            .order_by("id")
            .only("id", "role", "content", "is_turn_start")
        )
    replies = cited_ids([*earlier, *messages])
    known = _resolved(session, {i for ids in replies.values() for i in ids})
    return {reply: [known[i] for i in ids if i in known] for reply, ids in replies.items()}


def turn_sources(*, session: Session, reply_id: int | None) -> list[dict[str, Any]]:
    """The sources of the reply `reply_id`, as the assistant_message frame carries them (JSON-ready)."""
    if reply_id is None:
        return []
    sources = history_sources(
        session=session,
        messages=[Message.objects.only("id", "role", "content", "is_turn_start").get(pk=reply_id)],
    ).get(reply_id, [])
    return [{**source, "created_at": source["created_at"].isoformat()} for source in sources]
