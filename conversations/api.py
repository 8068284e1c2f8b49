"""`/agents` and `/history` (`/chats`: agent/chats_api.py). Refusals are domain exceptions (conversations.errors), which
buddy/api.py answers with their status and the one `ErrorOut` body."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router
from pydantic import Field

from conversations import selectors
from conversations.provenance import history_sources
from conversations.schemas import AgentOut, ChatIn, ErrorOut, HistoryOut

router = Router(tags=["conversations"])

# The error answers each kind of endpoint gives, for the OpenAPI schema (every one is `ErrorOut`).
AUTH_ERRORS = {401: ErrorOut}
READ_ERRORS = dict.fromkeys((401, 404, 422), ErrorOut)


@router.get("/agents", response={200: list[AgentOut], **AUTH_ERRORS}, summary="The agents a user can talk to")
def agents(request: HttpRequest):
    return [AgentOut(id=a.slug, name=a.name, avatar=a.avatar) for a in selectors.agent_list()]


class HistoryQuery(ChatIn):
    limit: int = Field(50, ge=1, le=500)
    before: int | None = Field(None, ge=1, le=2**63 - 1)
    around: int | None = Field(
        None, ge=1, le=2**63 - 1, description="A message id: the page is centred on it (for links to a source)."
    )


@router.get("/history", response={200: HistoryOut, **READ_ERRORS}, summary="A page of a chat's archive")
def history(request: HttpRequest, query: Query[HistoryQuery]):
    """Up to `limit` messages with id below `before` (the newest when absent), oldest first; or, with
    `around`, a page centred on that message (404 when the chat has no such message). `next_before` is
    the oldest id of the page, `null` when there is nothing older. A reply that drew on the archive
    (memory tools) lists those messages in `sources`."""
    session = selectors.session_require(user=request.user, chat=query.chat)
    if query.around is not None:
        messages, has_more = selectors.history_page_around(session=session, limit=query.limit, around=query.around)
    else:
        messages, has_more = selectors.history_page(session=session, limit=query.limit, before=query.before)
    sources = history_sources(session=session, messages=messages)
    for message in messages:
        message.sources = sources.get(message.id, [])
    return {"messages": messages, "next_before": messages[0].id if messages and has_more else None}
