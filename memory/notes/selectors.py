"""Reads of the notes: both scopes of a chat, a note's versions, and their lines in the context block."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Max, OuterRef, Q, QuerySet, Subquery

from conversations.content import estimate_tokens
from conversations.models import Message, Session
from conversations.prepared import PreparedQuery
from conversations.selectors import turn_prompt_subquery
from memory.models import Note, NoteScope, NoteVersion
from memory.notes.paths import DELETED_NOTES_KEPT, PROFILE_DIR, ROOT
from memory.notes.services import notes_of

NOTE_FIRST_LINE_CHARS = 200  # of a note not shown whole in the context block


def notes_both(*, user: AbstractBaseUser, session: Session | None) -> dict[str, list[Note]]:
    """{"chat": the session's notes, "profile": the user's}, each by path, with where each came from
    (one query for both)."""
    rows = (
        _both_scopes(user.pk, session.pk if session is not None else None)
        .select_related("source_message__session__agent")
        .annotate(source_prompt_id=turn_prompt_subquery("source_message"))
    )
    return _by_scope(rows)


def _both_scopes(user_id: int, session_id: int | None) -> QuerySet[Note]:
    """The notes of both scopes, by path: the scopes as notes_of (memory.notes.services) draws them, in
    one WHERE."""
    both = Q(user_id=user_id, scope=NoteScope.PROFILE)
    if session_id is not None:
        both |= Q(session_id=session_id, scope=NoteScope.CHAT)
    return Note.objects.filter(both).order_by("path")


# What the context block shows of the notes, read on every model call.
_CONTEXT_NOTES = PreparedQuery(
    lambda user_id, session_id: _both_scopes(user_id, session_id).only("scope", "path", "content"),
    user_id=int,
    session_id=int,
)


def _by_scope(rows: Iterable[Note]) -> dict[str, list[Note]]:
    notes: dict[str, list[Note]] = {NoteScope.CHAT: [], NoteScope.PROFILE: []}
    for note in rows:
        notes[note.scope].append(note)
    return notes


@dataclass(frozen=True)
class DeletedNote:
    """A deleted note as it was when deleted (its text, who changed it last and when, the message its text
    came from), with when and by whom it was deleted and the deletion's version."""

    path: str
    content: str
    updated_at: datetime
    updated_by: str
    source_message: Message | None
    deleted_at: datetime
    deleted_by: str
    version_id: int


def notes_deleted(*, user: AbstractBaseUser, session: Session | None) -> dict[str, list[DeletedNote]]:
    """{"chat": the session's deleted notes, "profile": the user's}, most recently deleted first: each
    path of the scope whose versions are kept and that holds no note now (at most DELETED_NOTES_KEPT per
    scope, as memory.notes.services keeps them)."""
    return {scope: _deleted_of_scope(user, session, scope) for scope in (NoteScope.CHAT, NoteScope.PROFILE)}


def _deleted_of_scope(user: AbstractBaseUser, session: Session | None, scope: str) -> list[DeletedNote]:
    versions = NoteVersion.objects.filter(user=user, scope=scope)
    if scope == NoteScope.CHAT:
        if session is None:
            return []
        versions = versions.filter(session=session)
    live = notes_of(user=user, session=session, scope=scope).values("path")
    newest = list(
        versions.exclude(path__in=live)
        .values("path")
        .annotate(last=Max("id"))
        .order_by("-last")
        .values_list("last", flat=True)[:DELETED_NOTES_KEPT]
    )
    previous = versions.filter(path=OuterRef("path"), id__lt=OuterRef("id")).order_by("-id").values("id")[:1]
    deletions = list(NoteVersion.objects.filter(id__in=newest).annotate(previous_id=Subquery(previous)).order_by("-id"))
    before = NoteVersion.objects.select_related("source_message__session__agent").in_bulk(
        [d.previous_id for d in deletions if d.previous_id is not None]
    )
    found = []
    for deletion in deletions:
        last = before.get(deletion.previous_id)
        found.append(
            DeletedNote(
                path=deletion.path,
                content=(deletion.after if deletion.after is not None else deletion.before) or "",
                # The change before the deletion made the note as it was; without it (pruned), the deletion.
                updated_at=last.changed_at if last is not None else deletion.changed_at,
                updated_by=last.changed_by if last is not None else deletion.changed_by,
                source_message=last.source_message if last is not None else None,
                deleted_at=deletion.changed_at,
                deleted_by=deletion.changed_by,
                version_id=deletion.pk,
            )
        )
    return found


def note_versions_page(
    *, user: AbstractBaseUser, session: Session | None, scope: str, path: str, limit: int, before: int | None = None
) -> tuple[list[NoteVersion], int | None]:
    """Up to `limit` kept versions of the note at `path` of that scope (also of a deleted note), newest
    first, older than the version `before` when given; and the `before` of the next page (None: last)."""
    versions = NoteVersion.objects.filter(user=user, scope=scope, path=path)
    if scope == NoteScope.CHAT:
        versions = versions.filter(session=session) if session is not None else versions.none()
    if before is not None:
        versions = versions.filter(id__lt=before)
    page = list(
        versions.select_related("source_message__session__agent")
        .annotate(source_prompt_id=turn_prompt_subquery("source_message"))
        .order_by("-id")[: limit + 1]
    )
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1].pk if more else None)


def notes_context_text(*, session: Session) -> str:
    """The notes' part of the context block, never more than BUDDY_NOTES_TOKENS (estimate_tokens of the
    whole text): the notes of both scopes, in order, listed by path and first line while they fit; then,
    in order, those that fit shown whole instead. Notes that do not fit at all are left out, and a last
    line says how many and how to view them. Empty when there are none (or the budget holds nothing)."""
    # Path and text only: a turn builds this block on every model call.
    notes = _by_scope(_CONTEXT_NOTES.rows(user_id=session.user_id, session_id=session.pk))
    every = notes[NoteScope.CHAT] + notes[NoteScope.PROFILE]
    if not every:
        return ""
    budget = settings.BUDDY_NOTES_TOKENS
    # Each line is costed on its own: the sum is never below the estimate of the lines joined.
    lines = [
        f"Your memory notes (the memory tool's {ROOT}/; those under {PROFILE_DIR}/ are the user's profile, "
        "shared by all their chats):"
    ]
    spent = estimate_tokens(lines[0])
    listed: list[Note] = []
    for note in every:
        short = _note_short(note)
        reserve = 0 if len(listed) + 1 == len(every) else estimate_tokens(_left_out(len(every), len(every)))
        if spent + estimate_tokens(short) + reserve > budget:
            break
        lines.append(short)
        listed.append(note)
        spent += estimate_tokens(short)
    if len(listed) < len(every):
        left_out = _left_out(len(every) - len(listed), len(every))
        if not listed:
            return left_out if estimate_tokens(left_out) <= budget else ""
        lines.append(left_out)
        spent += estimate_tokens(left_out)
    for index, note in enumerate(listed, start=1):
        whole = f"--- {note.path}\n{note.content}"
        extra = estimate_tokens(whole) - estimate_tokens(lines[index])
        if extra <= budget - spent:
            lines[index], spent = whole, spent + extra
    return "\n".join(lines)


def _note_short(note: Note) -> str:
    first_line, _, rest = note.content.partition("\n")
    if not rest and len(first_line) <= NOTE_FIRST_LINE_CHARS:
        return f"--- {note.path}\n{note.content}"
    return f"--- {note.path} (first line; view it for the rest)\n{first_line[:NOTE_FIRST_LINE_CHARS]}"


def _left_out(count: int, total: int) -> str:
    return (
        f"({count} of the {total} memory notes are not shown here, to keep this short: the memory tool's "
        f"view of {ROOT} lists them all, and view of a note's path reads it.)"
    )
