from __future__ import annotations

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.http import HttpRequest, JsonResponse
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError
from pydantic import Field

from conversations import selectors
from conversations.limits import RateLimited
from conversations.schemas import AgentOut, ChatOut, ChatRenameIn, ErrorOut, HistoryOut, PlainText, PromptIn, PromptOut
from conversations.services import InvalidTitle, session_rename
from conversations.submit import prompt_submit
from conversations.turn import TurnError
from memory.provenance import history_sources

router = Router(tags=["conversations"])

# The error answers each kind of endpoint gives, for the OpenAPI schema (every one is `ErrorOut`).
AUTH_ERRORS = {401: ErrorOut}
READ_ERRORS = {**AUTH_ERRORS, 404: ErrorOut, 422: ErrorOut}
PROMPT_ERRORS = {**READ_ERRORS, 403: ErrorOut, 409: ErrorOut, 413: ErrorOut, 429: ErrorOut, 502: ErrorOut}


def _submit(user, payload: PromptIn, key: str | None):
    try:
        answer = prompt_submit(
            user=user, text=payload.text, agent_slug=payload.agent, chat_id=payload.chat_id, idempotency_key=key
        )
    except RateLimited:
        raise  # answered by the API's handler, with Retry-After
    except TurnError as exc:
        return Status(exc.status, {"detail": str(exc)})
    finally:
        close_old_connections()
    return Status(answer.status, answer.body)


@router.post("/prompt", response={200: PromptOut, **PROMPT_ERRORS}, summary="Run one turn and return the reply")
async def prompt(request: HttpRequest, payload: PromptIn):
    """Archives the prompt, runs the model and its tools, and returns the final text. With an
    `Idempotency-Key` header, a repeat of the same key returns the first answer and runs nothing.
    The same key with another text, agent or chat is 422. A running turn in the same chat gives 409; a
    prompt over `BUDDY_MAX_PROMPT_TOKENS` or a body over the upload limit 413; more than
    `BUDDY_PROMPTS_PER_MINUTE` prompts a minute 429 with `Retry-After`; a session cookie without the
    CSRF token 403."""
    user = request.auth  # the user the session cookie or the bearer token authenticated
    key = request.headers.get("Idempotency-Key") or None
    # The turn waits on the model: run it on a worker thread, not the one thread all sync views share.
    return await sync_to_async(_submit, thread_sensitive=False)(user, payload, key)


@router.api_operation(["GET", "PUT", "PATCH", "DELETE"], "/prompt", include_in_schema=False)
def prompt_other_methods(request: HttpRequest):
    """Any other method than POST: a JSON 405 like every other error of the API (after authentication)."""
    return JsonResponse({"detail": "Send a prompt with POST."}, status=405, headers={"Allow": "POST"})


@router.get("/agents", response={200: list[AgentOut], **AUTH_ERRORS}, summary="The agents a user can talk to")
def agents(request: HttpRequest):
    return [AgentOut(id=a.slug, name=a.name, avatar=a.avatar) for a in selectors.agent_list()]


def _chat_out(session, *, last_message_at=None, messages: int = 0) -> ChatOut:
    return ChatOut(
        agent=session.agent.slug,
        chat_id=session.chat_id,
        title=session.title,
        last_message_at=last_message_at,
        messages=messages,
    )


@router.get("/chats", response={200: list[ChatOut], **AUTH_ERRORS}, summary="The user's conversations")
def chats(request: HttpRequest):
    return [
        _chat_out(s, last_message_at=s.last_message_at, messages=s.message_count)
        for s in selectors.session_list(user=request.user)
    ]


@router.patch("/chats", response={200: ChatOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut}, summary="Rename a chat")
def chat_rename(request: HttpRequest, payload: ChatRenameIn):
    """Give one of the user's chats a title (new chats are named after their first prompt)."""
    session = owned_session(request, ChatQuery(agent=payload.agent, chat_id=payload.chat_id))
    try:
        session_rename(session=session, title=payload.title)
    except InvalidTitle as exc:
        return Status(422, {"detail": str(exc)})
    stats = selectors.session_list(user=request.user).get(pk=session.pk)
    return _chat_out(session, last_message_at=stats.last_message_at, messages=stats.message_count)


class ChatQuery(Schema):
    agent: PlainText | None = None
    chat_id: PlainText | None = None


class HistoryQuery(ChatQuery):
    limit: int = Field(50, ge=1, le=500)
    before: int | None = Field(None, ge=1, le=2**63 - 1)
    around: int | None = Field(
        None, ge=1, le=2**63 - 1, description="A message id: the page is centred on it (for links to a source)."
    )


def owned_session(request: HttpRequest, query: ChatQuery):
    """The requesting user's chat, or 404 — whether it is missing or someone else's is never revealed."""
    session = selectors.session_get(user=request.user, agent_slug=query.agent, chat_id=query.chat_id)
    if session is None:
        raise HttpError(404, "No such chat.")
    return session


@router.get("/history", response={200: HistoryOut, **READ_ERRORS}, summary="A page of a chat's archive")
def history(request: HttpRequest, query: Query[HistoryQuery]):
    """Up to `limit` messages with id below `before` (the newest when absent), oldest first; or, with
    `around`, a page centred on that message (404 when the chat has no such message). `next_before` is
    the oldest id of the page, `null` when there is nothing older. A reply that drew on the archive
    (memory tools) lists those messages in `sources`."""
    session = owned_session(request, query)
    if query.around is not None:
        found = selectors.history_page_around(session=session, limit=query.limit, around=query.around)
        if found is None:
            raise HttpError(404, "No such message in this chat.")
        messages, has_more = found
    else:
        messages, has_more = selectors.history_page(session=session, limit=query.limit, before=query.before)
    sources = history_sources(session=session, messages=messages)
    for message in messages:
        message.sources = sources.get(message.id, [])
    return {"messages": messages, "next_before": messages[0].id if messages and has_more else None}
