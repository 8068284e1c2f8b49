from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router

from conversations.selectors import session_get
from memory.schemas import SearchIn, SearchOut, SearchResultOut
from memory.search import search_history

router = Router(tags=["memory"])

NOT_FOUND = {"detail": "Chat not found."}


@router.get(
    "/memory/search",
    response={200: SearchOut, 404: dict},
    summary="Search this chat's history",
    description="Messages of one chat matching a natural-language query, best first (higher `score` is "
    "better). `snippet` is plain text with the matched words between `[` and `]`.",
)
def memory_search(request: HttpRequest, params: Query[SearchIn]):
    session = session_get(user=request.user, agent_slug=params.agent, chat_id=params.chat_id)
    if session is None:
        return 404, NOT_FOUND
    hits = search_history(session=session, query=params.q, limit=params.limit)
    return 200, SearchOut(
        results=[
            SearchResultOut(id=h.message_id, role=h.role, created_at=h.created_at, snippet=h.snippet, score=h.score)
            for h in hits
        ]
    )
