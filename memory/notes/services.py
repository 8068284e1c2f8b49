"""Every write to a note: each keeps a NoteVersion (who, when, the text before and after)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from conversations.models import Message, Session
from memory.models import Note, NoteAuthor, NoteScope, NoteVersion
from memory.notes.paths import (
    NOTES_PER_SCOPE,
    NoteConflict,
    NoteError,
    NoteMissing,
    note_path_check,
    note_text_check,
    scope_of,
)


def notes_of(*, user: AbstractBaseUser, session: Session | None, scope: str) -> QuerySet[Note]:
    """The notes of one scope: a session's chat notes, or the user's profile notes."""
    if scope == NoteScope.PROFILE:
        return Note.objects.filter(user=user, scope=NoteScope.PROFILE)
    if session is None:
        return Note.objects.none()
    return Note.objects.filter(session=session, scope=NoteScope.CHAT)


def _owner(user: AbstractBaseUser, session: Session | None, path: str) -> tuple[str, Session | None]:
    scope = scope_of(path)
    if scope == NoteScope.CHAT and session is None:
        raise NoteError("a chat note needs a chat")
    return scope, (session if scope == NoteScope.CHAT else None)


def _version(note: Note, *, before: str | None, after: str | None, by: str, source: Message | None) -> None:
    NoteVersion.objects.create(
        user_id=note.user_id,
        session_id=note.session_id,
        scope=note.scope,
        path=note.path,
        before=before,
        after=after,
        changed_at=timezone.now(),
        changed_by=by,
        source_message=source,
    )


def _directory_conflict(notes: QuerySet[Note], path: str) -> str | None:
    """Why `path` cannot be a note beside these: a note is already a directory part of it, or it is one of theirs."""
    parents = ["/".join(path.split("/")[:end]) for end in range(3, path.count("/") + 1)]
    clash = notes.filter(path__in=parents).values_list("path", flat=True).first()
    if clash:
        return f"{clash} is a note, so it cannot also be a directory holding {path}"
    if notes.filter(path__startswith=path + "/").exists():
        return f"{path} is a directory of notes; choose another name"
    return None


@transaction.atomic
def note_put(
    *,
    user: AbstractBaseUser,
    session: Session | None,
    path: str,
    content: str,
    by: str = NoteAuthor.USER,
    source: Message | None = None,
) -> Note:
    """Create or replace the note at `path` (its scope follows from the path). Raises NoteError."""
    path, content = note_path_check(path), note_text_check(content)
    scope, owner_session = _owner(user, session, path)
    notes = notes_of(user=user, session=owner_session, scope=scope)
    note = notes.select_for_update().filter(path=path).first()
    if note is not None:
        if note.content == content:
            return note
        before = note.content
    else:
        if notes.count() >= NOTES_PER_SCOPE:
            raise NoteConflict(
                f"there are already {NOTES_PER_SCOPE} {scope} notes, the most there may be; "
                "change or delete one instead"
            )
        clash = _directory_conflict(notes, path)
        if clash:
            raise NoteConflict(clash)
        note, before = Note(user=user, session=owner_session, scope=scope, path=path), None
    note.content, note.updated_at, note.updated_by, note.source_message = content, timezone.now(), by, source
    try:
        with transaction.atomic():
            note.save()
    except IntegrityError:  # another request made the same path meanwhile
        raise NoteConflict(f"{path} changed at the same moment; try again") from None
    _version(note, before=before, after=content, by=by, source=source)
    return note


@transaction.atomic
def note_delete(
    *,
    user: AbstractBaseUser,
    session: Session | None,
    path: str,
    by: str = NoteAuthor.USER,
    source: Message | None = None,
) -> Note:
    """Delete the note at `path` (its versions stay). Raises NoteError if there is none."""
    path = note_path_check(path)
    scope, owner_session = _owner(user, session, path)
    note = notes_of(user=user, session=owner_session, scope=scope).select_for_update().filter(path=path).first()
    if note is None:
        raise NoteMissing(f"there is no note {path}")
    _version(note, before=note.content, after=None, by=by, source=source)
    note.delete()
    return note


@transaction.atomic
def note_restore(*, user: AbstractBaseUser, session: Session | None, version_id: int) -> Note:
    """Put back the text a version left (or, for a deletion, the text it removed), as the user's change.
    Raises NoteError for a missing version or one of another chat or user."""
    version = NoteVersion.objects.filter(pk=version_id, user=user).first()
    if version is None or (version.scope == NoteScope.CHAT and (session is None or version.session_id != session.pk)):
        raise NoteMissing(f"there is no version {version_id} of a note of this chat or profile")
    text = version.after if version.after is not None else version.before
    return note_put(user=user, session=session, path=version.path, content=text or "", by=NoteAuthor.USER)
