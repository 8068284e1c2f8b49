from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router, Status

from conversations.schemas import ErrorOut
from conversations.selectors import session_require
from memory.schemas import SearchIn, SearchOut, SearchResultOut
from memory.search import search_history

router = Router(tags=["memory"])

ERRORS = dict.fromkeys((401, 404, 422), ErrorOut)


@router.get(
    "/memory/search",
    response={200: SearchOut, **ERRORS},
    summary="Search this chat's history",
    description="Messages of one chat matching a natural-language query, best first (higher `score` is "
    "better). `snippet` is the text as it is with the matched words between `[` and `]`; a `[`, `]` or "
    "`\\` of the text itself is preceded by a backslash.",
)
def memory_search(request: HttpRequest, params: Query[SearchIn]):
    session = session_require(user=request.user, chat=params.chat)
    hits = search_history(session=session, query=params.q, limit=params.limit)
    results = [
        SearchResultOut(
            id=hit.message_id, role=hit.role, created_at=hit.created_at, snippet=hit.snippet, score=hit.score
        )
        for hit in hits
    ]
    return Status(200, SearchOut(results=results))
