"""The memory notes over HTTP (README: Memory notes): read both scopes, write, delete, versions, restore."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from conversations.api import owned_session
from conversations.models import Session
from conversations.schemas import ErrorOut
from conversations.selectors import session_get
from memory.models import NoteAuthor, NoteScope
from memory.notes.paths import NOTE_VERSIONS_KEPT, NoteError, NoteMissing, directory_check, scope_of
from memory.notes.schemas import (
    NoteChatIn,
    NoteOut,
    NotePutIn,
    NoteRefIn,
    NoteRestoreIn,
    NotesOut,
    NoteVersionOut,
    NoteVersionsIn,
    NoteVersionsOut,
)
from memory.notes.selectors import note_versions_page, notes_both
from memory.notes.services import note_delete, note_put, note_restore

router = Router(tags=["memory notes"])

ERRORS = {401: ErrorOut, 404: ErrorOut, 422: ErrorOut}
WRITE_ERRORS = {**ERRORS, 403: ErrorOut, 413: ErrorOut}


def _source(item: Any) -> dict[str, Any]:
    message = item.source_message
    if message is None:
        return {"source_message_id": None, "source_agent": None, "source_chat_id": None}
    return {
        "source_message_id": message.pk,
        "source_agent": message.session.agent.slug,
        "source_chat_id": message.session.chat_id,
    }


def note_out(note) -> NoteOut:
    return NoteOut(
        path=note.path, content=note.content, updated_at=note.updated_at, updated_by=note.updated_by, **_source(note)
    )


def _chat(request: HttpRequest, params: NoteChatIn, scope: str | None = None) -> Session | None:
    """The chat the request names; 404 (HttpError) when it is needed — for anything but a profile
    note — and it does not exist or is another user's."""
    if scope != NoteScope.PROFILE:
        return owned_session(request, agent_slug=params.agent, chat_id=params.chat_id)
    return session_get(user=request.user, agent_slug=params.agent, chat_id=params.chat_id)


def _refused(exc: NoteError) -> Status:
    return Status(404 if isinstance(exc, NoteMissing) else 422, ErrorOut(detail=str(exc)))


def _scope_problem(scope: str, path: str) -> str | None:
    try:
        trimmed = directory_check(path)
    except NoteError as exc:
        return str(exc)
    if scope_of(trimmed) != scope:
        return (
            f"{path} is a {scope_of(trimmed)} note's path: profile notes are under /memories/profile/, "
            "chat notes elsewhere"
        )
    return None


@router.get(
    "/memory/notes",
    response={200: NotesOut, **ERRORS},
    summary="The memory notes of a chat and of the user",
    description="`chat`: the notes of this chat; `profile`: the user's, shared by all their chats. Each says "
    "who changed it last and, for the model's changes, the message whose tool call did.",
)
def notes_list(request: HttpRequest, params: Query[NoteChatIn]):
    session = _chat(request, params)
    notes = notes_both(user=request.user, session=session)
    return Status(200, NotesOut(**{scope: [note_out(n) for n in notes[scope]] for scope in notes}))


@router.put(
    "/memory/notes",
    response={200: NoteOut, **WRITE_ERRORS},
    summary="Create or replace a note",
    description="The path decides nothing alone: `scope` must match it (`profile` for `/memories/profile/…`). "
    "At most 100 notes per scope and 8 KiB per note (422 beyond).",
)
def notes_put(request: HttpRequest, payload: NotePutIn):
    session = _chat(request, payload, payload.scope)
    problem = _scope_problem(payload.scope, payload.path)
    if problem:
        return Status(422, ErrorOut(detail=problem))
    try:
        note = note_put(user=request.user, session=session, path=payload.path, content=payload.content)
    except NoteError as exc:
        return _refused(exc)
    return Status(200, note_out(note))


@router.delete(
    "/memory/notes",
    response={204: None, **WRITE_ERRORS},
    summary="Delete a note",
    description="Its versions stay: it can be restored.",
)
def notes_delete(request: HttpRequest, params: Query[NoteRefIn]):
    session = _chat(request, params, params.scope)
    problem = _scope_problem(params.scope, params.path)
    if problem:
        return Status(422, ErrorOut(detail=problem))
    try:
        note_delete(user=request.user, session=session, path=params.path, by=NoteAuthor.USER)
    except NoteError as exc:
        return _refused(exc)
    return Status(204, None)


@router.get(
    "/memory/notes/versions",
    response={200: NoteVersionsOut, **ERRORS},
    summary="The changes of a note, a page at a time",
    description=f"Newest first, also of a deleted note: when, by whom (`model` with the message of its tool "
    f"call, or `user`), the text before and after. A note keeps its newest {NOTE_VERSIONS_KEPT} versions; "
    "`limit` per page, the next page with `before` = `next_before`.",
)
def notes_versions(request: HttpRequest, params: Query[NoteVersionsIn]):
    session = _chat(request, params, params.scope)
    versions, next_before = note_versions_page(
        user=request.user,
        session=session,
        scope=params.scope,
        path=params.path,
        limit=params.limit,
        before=params.before,
    )
    rows = [
        NoteVersionOut(
            id=v.pk, changed_at=v.changed_at, changed_by=v.changed_by, before=v.before, after=v.after, **_source(v)
        )
        for v in versions
    ]
    return Status(200, NoteVersionsOut(versions=rows, next_before=next_before))


@router.post(
    "/memory/notes/restore",
    response={200: NoteOut, **WRITE_ERRORS},
    summary="Restore a version of a note",
    description="Puts back the text the version left (for a deletion, the text it deleted), as the user's "
    "change; a chat note's version needs its chat (`agent`, `chat_id`).",
)
def notes_restore(request: HttpRequest, payload: NoteRestoreIn):
    session = _chat(request, payload, NoteScope.PROFILE)  # a chat note's version finds no chat: 404 below
    try:
        note = note_restore(user=request.user, session=session, version_id=payload.version_id)
    except NoteError as exc:
        return _refused(exc)
    return Status(200, note_out(note))
