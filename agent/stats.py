"""The figures behind `GET /memory/stats`: counters and index lookups, the same cost for a chat of a
thousand messages and of a million."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Count, Sum

from canvas.models import CanvasState
from conversations.models import Message, ModelCall, Session
from conversations.prices import calls_cost
from conversations.window import window_preview
from memory import semantic
from memory.selectors import summary_latest


def archive_totals(*, session: Session) -> tuple[int, int, int]:
    """(messages, sum of their token estimates, how many of them the search index holds) of the
    session: the counters the search index's triggers keep (memory.search.sqlite / .postgres), plus
    the newest messages it does not hold yet (a turn writes its search documents once its reply is
    out, agent.turn): a read of the few rows past the newest one it holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT messages, tokens, last_id FROM memory_search_session WHERE session_id = %s", [session.pk]
        )
        row = cursor.fetchone()
    indexed, tokens, last_id = (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)
    newer = Message.objects.filter(session=session, id__gt=last_id).aggregate(n=Count("id"), tokens=Sum("tokens"))
    return indexed + newer["n"], tokens + (newer["tokens"] or 0), indexed


def search_index(*, session: Session, messages: int, words: int) -> dict[str, int]:
    """How much of the archive search already covers: `words` of the `messages` are indexed by their
    words; with semantic search on, a message counts once its vector is written too (memory.semantic)."""
    if not semantic.enabled():
        return {"messages": messages, "indexed": words}
    total, indexed = semantic.index_progress(session_id=session.pk, messages=messages)
    return {"messages": total, "indexed": min(indexed, words)}


def memory_stats(*, session: Session) -> dict[str, Any]:

    messages, tokens, words = archive_totals(session=session)
    by_time = session.messages.order_by("created_at", "id").values_list("created_at", flat=True)
    window = window_preview(session=session)
    summary = summary_latest(session=session)
    calls = ModelCall.objects.filter(session=session)
    usage = calls.aggregate(
        input_tokens=Sum("input_tokens"),
        output_tokens=Sum("output_tokens"),
        cache_read_input_tokens=Sum("cache_read_input_tokens"),
        cache_creation_input_tokens=Sum("cache_creation_input_tokens"),
        cache_creation_5m_input_tokens=Sum("cache_creation_5m_input_tokens"),
        cache_creation_1h_input_tokens=Sum("cache_creation_1h_input_tokens"),
    )
    canvas = CanvasState.objects.filter(session=session).values_list("elements", flat=True).first() or []
    return {
        "total_messages": messages,
        "total_tokens": tokens,
        "window_messages": window.rows,
        "window_tokens": window.tokens,
        "archived_messages": messages - window.rows,
        "summary": None
        if summary is None
        else {
            "through_message_id": summary.through_message_id,
            "tokens": summary.tokens,
            "created_at": summary.created_at,
        },
        "canvas_elements": len(canvas),
        # Both ends of the (session, created_at) index: two short lookups.
        "first_message_at": by_time.first(),
        "last_message_at": by_time.reverse().first(),
        "usage": {name: value or 0 for name, value in usage.items()},
        "cost": calls_cost(calls),
        "search_index": search_index(session=session, messages=messages, words=words),
    }
