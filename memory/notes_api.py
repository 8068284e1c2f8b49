"""The memory notes over HTTP (README: Memory notes): read both scopes (or their deleted notes), write,
delete, versions, restore.
Refusals are domain exceptions (NoteError 422, NoteMissing and an unknown chat 404), which buddy/api.py
answers."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from conversations.models import Session
from conversations.schemas import ErrorOut
from conversations.selectors import session_get, session_require, turn_prompt_id
from memory.models import NoteAuthor, NoteScope
from memory.notes.paths import DELETED_NOTES_KEPT, NOTE_VERSIONS_KEPT, NoteMissing, scope_of
from memory.notes.schemas import (
    DeletedNoteOut,
    DeletedNotesOut,
    NoteChatIn,
    NoteOut,
    NotePutIn,
    NoteRefIn,
    NoteRestoreIn,
    NotesListIn,
    NotesOut,
    NoteVersionOut,
    NoteVersionsIn,
    NoteVersionsOut,
)
from memory.notes.selectors import DeletedNote, note_versions_page, notes_both, notes_deleted
from memory.notes.services import note_delete, note_put, note_restore

router = Router(tags=["memory notes"])

ERRORS = dict.fromkeys((401, 404, 422), ErrorOut)
WRITE_ERRORS = dict.fromkeys((401, 403, 404, 413, 422), ErrorOut)
# A write the stored notes refuse (the 101st of a scope, a path under another note): 409.
SAVE_ERRORS = dict.fromkeys((401, 403, 404, 409, 413, 422), ErrorOut)


def _source(item: Any) -> dict[str, Any]:
    # `source_prompt_id` is annotated by the selectors that list notes and versions.
    return _message_place(item.source_message, prompt_id=getattr(item, "source_prompt_id", None))


def _message_place(message: Any, *, prompt_id: int | None = None) -> dict[str, Any]:
    if message is None:
        return {"source_message_id": None, "source_prompt_id": None, "source_agent": None, "source_chat_id": None}
    prompt_id = prompt_id or turn_prompt_id(message=message)  # looked up for a single note
    return {
        "source_message_id": message.pk,
        "source_prompt_id": prompt_id,
        "source_agent": message.session.agent.slug,
        "source_chat_id": message.session.chat_id,
    }


def note_out(note) -> NoteOut:
    return NoteOut(
        path=note.path, content=note.content, updated_at=note.updated_at, updated_by=note.updated_by, **_source(note)
    )


def deleted_note_out(note: DeletedNote) -> DeletedNoteOut:
    return DeletedNoteOut(
        path=note.path,
        content=note.content,
        updated_at=note.updated_at,
        updated_by=note.updated_by,
        deleted_at=note.deleted_at,
        deleted_by=note.deleted_by,
        version_id=note.version_id,
        **_message_place(note.source_message),
    )


def _chat(request: HttpRequest, params: NoteChatIn, scope: str | None = None) -> Session | None:
    """The chat the request names; ChatNotFound (404) when it is needed — for anything but a profile
    note — and it does not exist or is another user's."""
    if scope != NoteScope.PROFILE:
        return session_require(user=request.user, chat=params.chat)
    return session_get(user=request.user, chat=params.chat)


def _in_scope(scope: str, path: str) -> None:
    """A note of `scope` at `path` (NotePutIn checks it for a write): none when the path is the other
    scope's."""
    if scope_of(path) != scope:
        raise NoteMissing(f"there is no {scope} note {path}: profile notes are under /memories/profile/")


@router.get(
    "/memory/notes",
    response={200: NotesOut | DeletedNotesOut, **ERRORS},
    summary="The memory notes of a chat and of the user (or the deleted ones)",
    description="`chat`: the notes of this chat; `profile`: the user's, shared by all their chats. Each says "
    "who changed it last and, for the model's changes (and a restore of one), the message its text came from. "
    f"With `deleted=1`: the deleted notes of both scopes instead (the {DELETED_NOTES_KEPT} most recently deleted "
    "of each), as they were when deleted, with when and by whom they were deleted.",
)
def notes_list(request: HttpRequest, params: Query[NotesListIn]):
    session = _chat(request, params)
    if params.deleted:
        deleted = notes_deleted(user=request.user, session=session)
        return Status(
            200, DeletedNotesOut(**{scope: [deleted_note_out(n) for n in deleted[scope]] for scope in deleted})
        )
    notes = notes_both(user=request.user, session=session)
    return Status(200, NotesOut(**{scope: [note_out(n) for n in notes[scope]] for scope in notes}))


@router.put(
    "/memory/notes",
    response={200: NoteOut, **SAVE_ERRORS},
    summary="Create or replace a note",
    description="The path decides nothing alone: `scope` must match it (`profile` for `/memories/profile/…`). "
    "At most 100 notes per scope and 8 KiB per note (422 beyond).",
)
def notes_put(request: HttpRequest, payload: NotePutIn):
    session = _chat(request, payload, payload.scope)
    note = note_put(user=request.user, session=session, path=payload.path, content=payload.content)
    return Status(200, note_out(note))


@router.delete(
    "/memory/notes",
    response={204: None, **WRITE_ERRORS},
    summary="Delete a note",
    description="Its versions stay: it can be restored.",
)
def notes_delete(request: HttpRequest, params: Query[NoteRefIn]):
    session = _chat(request, params, params.scope)
    _in_scope(params.scope, params.path)
    note_delete(user=request.user, session=session, path=params.path, by=NoteAuthor.USER)
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
    response={200: NoteOut, **SAVE_ERRORS},
    summary="Restore a version of a note, or a deleted note",
    description="By `version_id`: puts back the text the version left (for a deletion, the text it deleted). "
    "By `scope` and `path`: puts back the deleted note at that path as it was when deleted (409 when the path "
    "holds another note now). Either way the restore is the user's change (`updated_by`: `user`) and keeps the "
    "message the text came from (`source_message_id`); 409 when the scope already has 100 notes. A chat note "
    "needs its chat (`agent`, `chat_id`).",
)
def notes_restore(request: HttpRequest, payload: NoteRestoreIn):
    if payload.version_id is not None:
        session = _chat(request, payload, NoteScope.PROFILE)  # a chat note's version finds no chat: 404 below
        note = note_restore(user=request.user, session=session, version_id=payload.version_id)
    else:
        session = _chat(request, payload, payload.scope)
        note = note_restore(user=request.user, session=session, path=payload.path)
    return Status(200, note_out(note))
