"""`/chats`: the user's chats listed, renamed, deleted and exported (README: HTTP API). Refusals are
domain exceptions, which buddy/api.py answers with their status and the one `ErrorOut` body."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Query, Router, Status

from agent.chats import chat_delete, chat_export_file, chat_export_name, chat_rename
from conversations import selectors
from conversations.schemas import ChatIn, ChatOut, ChatRenameIn, ErrorOut

router = Router(tags=["conversations"])

AUTH_ERRORS = {401: ErrorOut}
WRITE_ERRORS = dict.fromkeys((401, 403, 404, 413, 422), ErrorOut)
DELETE_ERRORS = dict.fromkeys((401, 403, 404, 409, 422), ErrorOut)

EXPORT_DOWNLOAD_BLOCK = 64 * 1024  # bytes of an export read per step of its download
EXPORT_ERRORS = dict.fromkeys((401, 404, 409, 422), ErrorOut)


def _chat_out(session) -> ChatOut:
    return ChatOut(
        agent=session.agent.slug,
        chat_id=session.chat_id,
        title=session.title,
        last_message_at=session.last_message_at,
        messages=session.message_count,
    )


@router.get("/chats", response={200: list[ChatOut], **AUTH_ERRORS}, summary="The user's chats, newest first")
def chats(request: HttpRequest):
    """Every chat of the user, of every agent, the one with the newest message first: its title (the
    start of its first prompt until renamed), when its last message was written and how many it holds."""
    return [_chat_out(session) for session in selectors.session_list(user=request.user)]


@router.patch("/chats", response={200: ChatOut, **WRITE_ERRORS}, summary="Rename a chat")
def chat_rename_view(request: HttpRequest, payload: ChatRenameIn):
    """Give one of the user's chats a title (new chats are named after their first prompt). Every open
    tab of the user gets `chats_changed`."""
    session = chat_rename(user=request.user, chat=payload.chat, title=payload.title)
    return _chat_out(selectors.session_list(user=request.user).get(pk=session.pk))


@router.delete("/chats", response={204: None, **DELETE_ERRORS}, summary="Delete a chat and all it holds")
def chat_delete_view(request: HttpRequest, query: Query[ChatIn]):
    """Deletes the chat and everything holding its content: messages, search rows, vectors, summaries,
    canvas, chat notes and their versions, schedules, relayed frames, Idempotency-Key answers. Its model
    calls stay for cost reporting with their token counts only. 404 for an unknown chat or another
    user's; 409 while a turn runs in it. The chat's open sockets get `chat_deleted`, every socket of
    the user `chats_changed`. A prompt to the same chat id afterwards starts a new, empty chat."""
    chat_delete(user=request.user, chat=query.chat)
    return Status(204, None)


def _blocks(exported) -> Iterator[bytes]:
    """The export's file in blocks, closed at its end."""
    with exported:
        while block := exported.read(EXPORT_DOWNLOAD_BLOCK):
            yield block


async def _streamed(blocks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """The export's file read one block at a time off the event loop, so a big export is never held
    whole in memory (a sync iterator would be read whole before the first byte under ASGI)."""
    step = sync_to_async(next)
    while True:
        block = await step(blocks, None)
        if block is None:
            return
        yield block


@router.get(
    "/chats/export",
    response={200: str, **EXPORT_ERRORS},
    summary="Download a chat as JSON Lines",
    openapi_extra={
        "responses": {
            200: {
                "description": "The chat as `export_history` writes it: one JSON object per line, "
                'each message `{"role", "content", "created_at"}` oldest first, then each chat note '
                '`{"note": {...}}`. `Content-Disposition: attachment` names the file after the chat\'s title '
                "and the day of its last message (ASCII letters, digits and hyphens only). The whole chat is "
                "read before the first byte is sent: 409 `conflict` when it is being deleted meanwhile.",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            }
        }
    },
)
def chat_export(request: HttpRequest, query: Query[ChatIn]) -> HttpResponse:
    """The chat as the JSON Lines `export_history` writes (which `import_history` reads back), as a
    download. 404 for an unknown chat or another user's; 409 for a chat being deleted (never a file
    that ends early)."""
    session = selectors.session_require(user=request.user, chat=query.chat)
    exported = chat_export_file(session=session)
    size = exported.seek(0, io.SEEK_END)
    exported.seek(0)
    blocks = _blocks(exported)
    content = _streamed(blocks) if isinstance(request, ASGIRequest) else blocks
    response = StreamingHttpResponse(content, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{chat_export_name(session=session)}"'
    response["Content-Length"] = str(size)
    response["Cache-Control"] = "no-store"
    return response
