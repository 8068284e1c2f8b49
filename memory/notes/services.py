"""Every write to a note: each keeps a NoteVersion (who, when, the text before and after), at most
NOTE_VERSIONS_KEPT per note."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from conversations.models import Message, Session
from memory.models import Note, NoteAuthor, NoteScope, NoteVersion
from memory.notes.paths import (
    DELETED_NOTES_KEPT,
    NOTE_VERSIONS_KEPT,
    NOTES_PER_SCOPE,
    NoteChanged,
    NoteConflict,
    NoteError,
    NoteMissing,
    note_path_check,
    note_text_check,
    scope_of,
)


@dataclass(frozen=True)
class NoteChange:
    """One note's change, made against what the note held: `expected` is its text then (None: there was
    no note at `path`), `result` its text after (None: deleted)."""

    path: str
    expected: str | None
    result: str | None

    def as_json(self) -> dict[str, str | None]:
        return {"path": self.path, "expected": self.expected, "result": self.result}

    @classmethod
    def from_json(cls, data: dict[str, str | None]) -> NoteChange:
        return cls(path=str(data["path"]), expected=data["expected"], result=data["result"])


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


def _owner_lock(user: AbstractBaseUser, owner_session: Session | None) -> None:
    """Lock the row that owns a scope's notes — the chat's session, or the user for profile notes —
    until the transaction ends, so the writers of one scope queue: the count under NOTES_PER_SCOPE and
    a path's existence are read with every other writer's note committed. Caller is inside atomic();
    on SQLite the IMMEDIATE transactions already queue writers (FOR UPDATE is ignored there)."""
    if owner_session is not None:
        owners = Session.objects.filter(pk=owner_session.pk)
    else:
        owners = get_user_model()._default_manager.filter(pk=user.pk)
    list(owners.select_for_update().values_list("pk", flat=True))


def _path_versions(*, user_id: int, session_id: int | None, scope: str, path: str) -> QuerySet[NoteVersion]:
    """The kept versions of one path of a scope: of a chat's notes (`session_id`) or the user's profile."""
    versions = NoteVersion.objects.filter(user_id=user_id, scope=scope, path=path)
    return versions.filter(session_id=session_id) if scope == NoteScope.CHAT else versions


def _versions_of(note: Note | NoteVersion) -> QuerySet[NoteVersion]:
    return _path_versions(user_id=note.user_id, session_id=note.session_id, scope=note.scope, path=note.path)


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
    stale = list(_versions_of(note).order_by("-id").values_list("id", flat=True)[NOTE_VERSIONS_KEPT:])
    if stale:
        NoteVersion.objects.filter(id__in=stale).delete()


def _deleted_notes_pruned(user: AbstractBaseUser, owner_session: Session | None, scope: str) -> None:
    """Keep the versions of the DELETED_NOTES_KEPT most recently deleted notes of the scope; drop the
    older deleted notes' versions (a loop of creating and deleting new paths cannot grow without end)."""
    versions = NoteVersion.objects.filter(user=user, scope=scope)
    if scope == NoteScope.CHAT:
        versions = versions.filter(session=owner_session)
    live = notes_of(user=user, session=owner_session, scope=scope).values("path")
    gone = (
        versions.exclude(path__in=live)
        .values("path")
        .annotate(last=Max("id"))
        .order_by("-last")
        .values_list("path", flat=True)[DELETED_NOTES_KEPT:]
    )
    paths = list(gone)
    if paths:
        versions.filter(path__in=paths).delete()


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
    _owner_lock(user, owner_session)
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
    _owner_lock(user, owner_session)
    note = notes_of(user=user, session=owner_session, scope=scope).select_for_update().filter(path=path).first()
    if note is None:
        raise NoteMissing(f"there is no note {path}")
    _version(note, before=note.content, after=None, by=by, source=source)
    note.delete()
    _deleted_notes_pruned(user, owner_session, scope)
    return note


@transaction.atomic
def note_changes_apply(
    *,
    user: AbstractBaseUser,
    session: Session | None,
    changes: Iterable[NoteChange],
    by: str,
    source: Message | None = None,
) -> None:
    """Apply every change, or none: each note must still hold the text its change was made against
    (NoteChanged names the first that does not); then each becomes exactly its `result`. Raises
    NoteError for a change that cannot be made (the cap of a scope, a path that is a directory)."""
    changes = list(changes)
    for change in changes:
        scope, owner_session = _owner(user, session, note_path_check(change.path))
        _owner_lock(user, owner_session)
        locked = notes_of(user=user, session=owner_session, scope=scope).select_for_update().filter(path=change.path)
        current = locked.values_list("content", flat=True).first()
        if current != change.expected:
            raise NoteChanged(_conflict(change.path, expected=change.expected, current=current))
    for change in changes:
        if change.result is None:
            note_delete(user=user, session=session, path=change.path, by=by, source=source)
        else:
            note_put(user=user, session=session, path=change.path, content=change.result, by=by, source=source)


def _conflict(path: str, *, expected: str | None, current: str | None) -> str:
    if expected is None:
        return f"{path} exists now"
    if current is None:
        return f"{path} no longer exists"
    return f"{path} no longer holds the text the change was made from"


def version_text_source(version: NoteVersion) -> Message | None:
    """The message the text a version puts back came from: a change's own source (the tool call that
    made it, or what a restore kept); for a deletion, the source of the version before it — the note as
    it was when deleted. None for the user's own text (or when that version is gone)."""
    if version.after is not None:
        return version.source_message
    before = _versions_of(version).filter(id__lt=version.pk).select_related("source_message").order_by("-id").first()
    return before.source_message if before is not None else None


def _restore_put(*, user: AbstractBaseUser, session: Session | None, version: NoteVersion) -> Note:
    text = version.after if version.after is not None else version.before
    try:
        return note_put(
            user=user,
            session=session,
            path=version.path,
            content=text or "",
            by=NoteAuthor.USER,
            source=version_text_source(version),
        )
    except NoteConflict as exc:
        raise NoteConflict(f"{version.path} cannot be restored: {exc}") from None


@transaction.atomic
def note_restore(
    *, user: AbstractBaseUser, session: Session | None, version_id: int | None = None, path: str | None = None
) -> Note:
    """Put back a note: the text a version left (for a deletion, the text it removed) — or, by `path`, the
    deleted note at that path as it was when deleted. The restore is the user's change (`updated_by` is
    `user`) and keeps the text's source: the message it came from stays the note's `source_message`.

    Raises NoteMissing for a version or deleted note that is not of this chat or profile, NoteConflict
    when the scope is full, when the path is or is under another note, and — by path — when the path
    holds a note again (made after the deletion)."""
    if version_id is not None:
        version = NoteVersion.objects.filter(pk=version_id, user=user).first()
        if version is None or (
            version.scope == NoteScope.CHAT and (session is None or version.session_id != session.pk)
        ):
            raise NoteMissing(f"there is no version {version_id} of a note of this chat or profile")
        return _restore_put(user=user, session=session, version=version)
    if path is None:
        raise NoteError("name the version to restore (version_id) or the deleted note (scope and path)")
    path = note_path_check(path)
    scope, owner_session = _owner(user, session, path)
    _owner_lock(user, owner_session)
    if notes_of(user=user, session=owner_session, scope=scope).filter(path=path).exists():
        raise NoteConflict(
            f"{path} holds another note now, made after the deleted one; rename or delete that note first, "
            "or restore an older text from its history"
        )
    owner_id = owner_session.pk if owner_session is not None else None
    version = _path_versions(user_id=user.pk, session_id=owner_id, scope=scope, path=path).order_by("-id").first()
    if version is None:
        where = "this chat" if scope == NoteScope.CHAT else "your profile"
        raise NoteMissing(f"there is no deleted note {path} in {where}")
    return _restore_put(user=user, session=session, version=version)
