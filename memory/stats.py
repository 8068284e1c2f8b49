"""The figures behind `GET /memory/stats`."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max, Min, Sum

from conversations.models import ModelCall, Session
from memory.selectors import summary_latest


def memory_stats(*, session: Session) -> dict[str, Any]:
    from canvas.models import CanvasState
    from conversations.window import window_preview

    archive = session.messages.aggregate(
        total=Count("id"), tokens=Sum("tokens"), first=Min("created_at"), last=Max("created_at")
    )
    window = window_preview(session=session)
    summary = summary_latest(session=session)
    usage = ModelCall.objects.filter(session=session).aggregate(
        input_tokens=Sum("input_tokens"),
        output_tokens=Sum("output_tokens"),
        cache_read_input_tokens=Sum("cache_read_input_tokens"),
        cache_creation_input_tokens=Sum("cache_creation_input_tokens"),
        cache_creation_5m_input_tokens=Sum("cache_creation_5m_input_tokens"),
        cache_creation_1h_input_tokens=Sum("cache_creation_1h_input_tokens"),
    )
    canvas = CanvasState.objects.filter(session=session).values_list("elements", flat=True).first() or []
    return {
        "total_messages": archive["total"],
        "total_tokens": archive["tokens"] or 0,
        "window_messages": window.rows,
        "window_tokens": window.tokens,
        "archived_messages": archive["total"] - window.rows,
        "summary": None
        if summary is None
        else {
            "through_message_id": summary.through_message_id,
            "tokens": summary.tokens,
            "created_at": summary.created_at,
        },
        "canvas_elements": len(canvas),
        "first_message_at": archive["first"],
        "last_message_at": archive["last"],
        "usage": {name: value or 0 for name, value in usage.items()},
    }
