"""The memory tools the model can call: what slid out of the window stays reachable (docs/search.md).

Results are compact and dated, one line per message (`[#id 2026-11-20 14:03 user] text`), so the model
can cite when something was said.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from conversations.models import Message, Session
from lib.tool_inputs import (
    LenientToolInput,
    ToolInputError,
    input_error,
    not_blank,
    tool_definition,
    tool_input_parse,
)
from memory.search import search_history
from memory.selectors import MESSAGE_TEXT

LINE_CHARS = 400


def _day(value: str) -> str:
    try:
        date.fromisoformat(value)
    except ValueError:
        raise input_error("must be a day written YYYY-MM-DD") from None
    return value


class SearchHistoryIn(LenientToolInput):
    query: Annotated[
        str, Field(min_length=1, description="What to look for, in plain words."), AfterValidator(not_blank)
    ]
    limit: Annotated[int, Field(ge=1, le=20)] = 5


class MessagesByDateIn(LenientToolInput):
    date: Annotated[str, Field(description="The day, YYYY-MM-DD (UTC)."), AfterValidator(_day)]
    limit: Annotated[int, Field(ge=1, le=100)] = 20


class ExtendedContextIn(LenientToolInput):
    count: Annotated[int, Field(ge=1, le=200)] = 50


MEMORY_INPUTS: dict[str, type[LenientToolInput]] = {
    "search_history": SearchHistoryIn,
    "get_messages_by_date": MessagesByDateIn,
    "get_extended_context": ExtendedContextIn,
}
MEMORY_TOOL_DEFINITIONS: list[dict[str, Any]] = [
    tool_definition(
        "search_history",
        "Search this conversation's whole archive, including what is no longer in your context, with a "
        "natural-language query (e.g. 'what did we decide about pricing'). Returns the best matching "
        "messages, best first, with their ids and dates.",
        SearchHistoryIn,
    ),
    tool_definition(
        "get_messages_by_date", "The messages of this conversation from one day (UTC), oldest first.", MessagesByDateIn
    ),
    tool_definition(
        "get_extended_context", "The messages just before the oldest one you can see, oldest first.", ExtendedContextIn
    ),
]


class MemoryToolError(ValueError):
    pass


def message_line(message_id: int, role: str, created_at: datetime, text: str) -> str:
    text = " ".join(text.split())
    if len(text) > LINE_CHARS:
        text = text[: LINE_CHARS - 1] + "…"
    return f"[#{message_id} {created_at.astimezone(UTC):%Y-%m-%d %H:%M} {role}] {text or '(no text)'}"


def _lines(rows) -> str:
    return "\n".join(message_line(*row) for row in rows)


def memory_tool_run(*, session: Session, name: str, tool_input: dict[str, Any]) -> str:
    """Run the memory tool `name`; MemoryToolError says what is wrong with its input."""
    model = MEMORY_INPUTS.get(name)
    if model is None:
        raise MemoryToolError(f"Unknown memory tool {name!r}.")
    try:
        parsed = tool_input_parse(model, tool_input)
    except ToolInputError as error:
        raise MemoryToolError(f"{name} failed: {error}") from None
    if isinstance(parsed, SearchHistoryIn):
        return _search(session, parsed)
    if isinstance(parsed, MessagesByDateIn):
        return _by_date(session, parsed)
    assert isinstance(parsed, ExtendedContextIn)
    return _extended(session, parsed)


def _search(session: Session, tool_input: SearchHistoryIn) -> str:
    query = tool_input.query
    hits = search_history(session=session, query=query, limit=tool_input.limit)
    if not hits:
        return f"No messages match {query!r}."
    return "\n".join(message_line(h.message_id, h.role, h.created_at, h.snippet) for h in hits)


def _by_date(session: Session, tool_input: MessagesByDateIn) -> str:
    day = date.fromisoformat(tool_input.date)
    limit = tool_input.limit
    start = datetime.combine(day, time.min, tzinfo=UTC)
    rows = (
        Message.objects.filter(session=session, created_at__gte=start, created_at__lt=start + timedelta(days=1))
        .order_by("created_at", "id")
        .annotate(text=MESSAGE_TEXT)
        .values_list("id", "role", "created_at", "text")[: limit + 1]
    )
    rows = list(rows)
    if not rows:
        return f"No messages on {day.isoformat()}."
    more = "\n(more messages that day: ask with a larger limit)" if len(rows) > limit else ""
    return _lines(rows[:limit]) + more


def _extended(session: Session, tool_input: ExtendedContextIn) -> str:
    count = tool_input.count
    session.refresh_from_db(fields=["window_start_id"])
    rows = list(
        Message.objects.filter(session=session, id__lt=session.window_start_id)
        .order_by("-id")
        .annotate(text=MESSAGE_TEXT)
        .values_list("id", "role", "created_at", "text")[:count]
    )
    if not rows:
        return "Nothing before the messages you can see: you have the whole conversation."
    return _lines(reversed(rows))
