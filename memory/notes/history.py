"""A chat's notes in export_history / import_history (README: Commands): one line per chat note after
the messages, `{"note": {"path", "content", "updated_at", "updated_by", "source"}}`, where `source` is
the position (1 = the file's first message) of the message whose tool call last changed it, or null.
Profile notes belong to the user, not to a chat, and do not travel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from conversations.history_io import ExtraLine, ImportRefused
from conversations.models import Message, Session
from memory.models import Note, NoteAuthor, NoteScope
from memory.notes.paths import NOTES_PER_SCOPE, NoteError, note_path_check, note_text_check, scope_of
from memory.notes.services import note_put

FIELDS = {"path", "content", "updated_at", "updated_by", "source"}


def note_lines_export(*, session: Session) -> Iterator[str]:
    notes = Note.objects.filter(session=session, scope=NoteScope.CHAT).order_by("path")
    for note in notes:
        source = None
        if note.source_message_id is not None:
            source = Message.objects.filter(session=session, id__lte=note.source_message_id).count() or None
        record = {
            "path": note.path,
            "content": note.content,
            "updated_at": note.updated_at.astimezone(UTC).isoformat(),
            "updated_by": note.updated_by,
            "source": source,
        }
        yield json.dumps({"note": record}, ensure_ascii=False)


class NoteLines:
    """The `ExtraLines` of notes for conversations.history_io."""

    kinds = frozenset({"note"})

    def __init__(self) -> None:
        self.paths: set[str] = set()

    def check(self, *, kind: str, data: Any, messages_before: int) -> None:
        if not isinstance(data, dict) or set(data) != FIELDS:
            raise ValueError(f"expected an object with exactly {', '.join(sorted(FIELDS))}")
        try:
            path = note_path_check(data["path"])
            note_text_check(data["content"])
        except NoteError as exc:
            raise ValueError(str(exc)) from None
        if scope_of(path) != NoteScope.CHAT:
            raise ValueError(f"{path}: profile notes belong to a user, not to a chat, and are not imported")
        if path in self.paths:
            raise ValueError(f"{path} appears twice")
        self.paths.add(path)
        if len(self.paths) > NOTES_PER_SCOPE:
            raise ValueError(f"a chat has at most {NOTES_PER_SCOPE} notes")
        if data["updated_by"] not in NoteAuthor.values:
            raise ValueError("updated_by must be 'model' or 'user'")
        if _when(data["updated_at"]) is None:
            raise ValueError("updated_at is not an ISO-8601 date-time between years 1 and 9999 in UTC")
        source = data["source"]
        if source is not None and (
            isinstance(source, bool) or not isinstance(source, int) or not 1 <= source <= messages_before
        ):
            raise ValueError(f"source must be null or the position of a message above it (1–{messages_before})")

    def apply(self, *, session: Session, lines: list[ExtraLine], message_ids: list[int]) -> None:
        for line in lines:
            data = line.data
            if Note.objects.filter(session=session, scope=NoteScope.CHAT, path=data["path"]).exists():
                raise ImportRefused(f"line {line.line_number}: the chat already has a note {data['path']}")
            source = Message(pk=message_ids[data["source"] - 1]) if data["source"] else None
            try:
                note = note_put(
                    user=session.user,
                    session=session,
                    path=data["path"],
                    content=data["content"],
                    by=data["updated_by"],
                    source=source,
                )
            except NoteError as exc:
                raise ImportRefused(f"line {line.line_number}: {exc}") from None
            Note.objects.filter(pk=note.pk).update(updated_at=_when(data["updated_at"]))


def _when(raw: Any) -> datetime | None:
    """The date-time in UTC, or None when it is not one (also when it lies outside years 1–9999 in UTC,
    e.g. 9999-12-31T23:59:59-14:00)."""
    try:
        value = parse_datetime(raw) if isinstance(raw, str) else None
        if value is None:
            return None
        if timezone.is_naive(value):
            value = timezone.make_aware(value, UTC)
        return value.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
