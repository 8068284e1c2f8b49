"""The memory tools the model can call: what slid out of the window stays reachable (docs/search.md).

Results are compact and dated, one line per message (`[#id 2026-11-20 14:03 user] text`), so the model
can cite when something was said.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from conversations.models import Message, Session
from memory.search import search_history

LINE_CHARS = 400

MEMORY_TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "search_history",
        "description": (
            "Search this conversation's whole archive, including what is no longer in your context, with a "
            "natural-language query (e.g. 'what did we decide about pricing'). Returns the best matching "
            "messages, best first, with their ids and dates."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in plain words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
            },
            "required": ["query"],
        },
    },
    {
        "name": "get_messages_by_date",
        "description": "The messages of this conversation from one day (UTC), oldest first.",
        "input_schema": {
            "type": "object",
            "properties": {
                "date": {"type": "string", "description": "The day, YYYY-MM-DD (UTC)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            },
            "required": ["date"],
        },
    },
    {
        "name": "get_extended_context",
        "description": "The messages just before the oldest one you can see, oldest first.",
        "input_schema": {
            "type": "object",
            "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}},
        },
    },
]


class MemoryToolError(ValueError):
    pass


def _int(tool_input: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = tool_input.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryToolError(f"{name} must be a whole number from {low} to {high}.")
    return value


def message_line(message_id: int, role: str, created_at: datetime, text: str) -> str:
    text = " ".join(text.split())
    if len(text) > LINE_CHARS:
        text = text[: LINE_CHARS - 1] + "…"
    return f"[#{message_id} {created_at.astimezone(UTC):%Y-%m-%d %H:%M} {role}] {text or '(no text)'}"


def _lines(rows) -> str:
    return "\n".join(message_line(*row) for row in rows)


def memory_tool_run(*, session: Session, name: str, tool_input: dict[str, Any]) -> str:
    if name == "search_history":
        return _search(session, tool_input)
    if name == "get_messages_by_date":
        return _by_date(session, tool_input)
    if name == "get_extended_context":
        return _extended(session, tool_input)
    raise MemoryToolError(f"Unknown memory tool {name!r}.")


def _search(session: Session, tool_input: dict[str, Any]) -> str:
    query = tool_input.get("query")
    if not isinstance(query, str) or not query.strip():
        raise MemoryToolError("query must be a non-empty string.")
    limit = _int(tool_input, "limit", 5, 1, 20)
    hits = search_history(session=session, query=query, limit=limit)
    if not hits:
        return f"No messages match {query!r}."
    return "\n".join(message_line(h.message_id, h.role, h.created_at, h.snippet) for h in hits)


def _by_date(session: Session, tool_input: dict[str, Any]) -> str:
    raw = tool_input.get("date")
    try:
        day = date.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        day = None
    if day is None:
        raise MemoryToolError("date must be a day written YYYY-MM-DD.")
    limit = _int(tool_input, "limit", 20, 1, 100)
    start = datetime.combine(day, time.min, tzinfo=UTC)
    rows = (
        Message.objects.filter(session=session, created_at__gte=start, created_at__lt=start + timedelta(days=1))
        .order_by("created_at", "id")
        .values_list("id", "role", "created_at", "search_text")[: limit + 1]
    )
    rows = list(rows)
    if not rows:
        return f"No messages on {day.isoformat()}."
    more = "\n(more messages that day: ask with a larger limit)" if len(rows) > limit else ""
    return _lines(rows[:limit]) + more


def _extended(session: Session, tool_input: dict[str, Any]) -> str:
    count = _int(tool_input, "count", 50, 1, 200)
    session.refresh_from_db(fields=["window_start_id"])
    rows = list(
        Message.objects.filter(session=session, id__lt=session.window_start_id)
        .order_by("-id")
        .values_list("id", "role", "created_at", "search_text")[:count]
    )
    if not rows:
        return "Nothing before the messages you can see: you have the whole conversation."
    return _lines(reversed(rows))
