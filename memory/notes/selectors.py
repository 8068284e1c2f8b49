"""Reads of the notes: both scopes of a chat, a note's versions, and their lines in the context block."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from conversations.content import estimate_tokens
from conversations.models import Session
from memory.models import Note, NoteScope, NoteVersion
from memory.notes.paths import PROFILE_DIR, ROOT
from memory.notes.services import notes_of


def notes_both(*, user: AbstractBaseUser, session: Session | None) -> dict[str, list[Note]]:
    """{"chat": the session's notes, "profile": the user's}, each by path."""
    return {
        scope: list(
            notes_of(user=user, session=session, scope=scope)
            .select_related("source_message__session__agent")
            .order_by("path")
        )
        for scope in (NoteScope.CHAT, NoteScope.PROFILE)
    }


def note_versions(*, user: AbstractBaseUser, session: Session | None, scope: str, path: str) -> QuerySet[NoteVersion]:
    """Every change of the note at `path` of that scope, newest first (also of a deleted note)."""
    versions = NoteVersion.objects.filter(user=user, scope=scope, path=path)
    if scope == NoteScope.CHAT:
        versions = versions.filter(session=session) if session is not None else versions.none()
    return versions.order_by("-changed_at", "-id")


def notes_context_text(*, session: Session) -> str:
    """The notes' part of the context block: every note of both scopes, with its text while the notes
    shown in full stay within BUDDY_NOTES_TOKENS, then path and first line only. Empty when there are none."""
    notes = notes_both(user=session.user, session=session)
    every = notes[NoteScope.CHAT] + notes[NoteScope.PROFILE]
    if not every:
        return ""
    budget = settings.BUDDY_NOTES_TOKENS
    lines = [
        f"Your memory notes (the memory tool's {ROOT}/; those under {PROFILE_DIR}/ are the user's profile, "
        "shared by all their chats):"
    ]
    spent = 0
    for note in every:
        spent += estimate_tokens(note.content)
        if spent <= budget:
            lines.append(f"--- {note.path}\n{note.content}")
        else:
            first_line = note.content.split("\n", 1)[0][:200]
            lines.append(f"--- {note.path} (first line; view it for the rest)\n{first_line}")
    return "\n".join(lines)
