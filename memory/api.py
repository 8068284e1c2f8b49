from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router, Status

from conversations.schemas import ErrorOut
from conversations.selectors import session_require
from memory.schemas import AllChatsResultOut, AllChatsSearchIn, AllChatsSearchOut, SearchIn, SearchOut, SearchResultOut
from memory.search import search_history
from memory.search.across import search_all_chats

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


@router.get(
    "/search",
    response={200: AllChatsSearchOut, **ERRORS},
    summary="Search all my chats",
    description="The user's own messages in every chat (of one agent when `agent` is given), best first, "
    "ranked as `/memory/search` ranks a chat's (higher `score` is better). Never another user's. `snippet` is "
    "as in `/memory/search`.",
)
def search_all(request: HttpRequest, params: Query[AllChatsSearchIn]):
    hits = search_all_chats(user=request.user, query=params.q, agent=params.agent or None, limit=params.limit)
    results = [
        AllChatsResultOut(
            id=hit.message_id,
            agent=hit.agent,
            chat_id=hit.chat_id,
            chat_title=hit.chat_title,
            role=hit.role,
            created_at=hit.created_at,
            snippet=hit.snippet,
            score=hit.score,
        )
        for hit in hits
    ]
    return Status(200, AllChatsSearchOut(results=results))
