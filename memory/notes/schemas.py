from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Field, Schema

from conversations.schemas import PlainText
from memory.notes.paths import NOTE_MAX_BYTES, NOTE_VERSIONS_KEPT, PATH_MAX_CHARS

Scope = Literal["chat", "profile"]


class NoteChatIn(Schema):
    agent: PlainText | None = Field(None, max_length=64, description="An agent's slug; default `buddy`.")
    chat_id: PlainText | None = Field(None, max_length=64, description="The chat; default `main`.")


class NoteRefIn(NoteChatIn):
    scope: Scope
    path: PlainText = Field(..., max_length=PATH_MAX_CHARS, description="A path under `/memories/`.")


class NoteVersionsIn(NoteRefIn):
    limit: int = Field(
        20, ge=1, le=NOTE_VERSIONS_KEPT, description=f"Versions in one page, at most {NOTE_VERSIONS_KEPT}."
    )
    before: int | None = Field(
        None, ge=1, le=2**63 - 1, description="A version's `id`: the page holds the versions older than it."
    )


class NotePutIn(NoteRefIn):
    content: PlainText = Field(..., description=f"The note's text, at most {NOTE_MAX_BYTES:,} bytes as UTF-8.")


class NoteRestoreIn(NoteChatIn):
    version_id: int = Field(..., ge=1, le=2**63 - 1, description="A version's `id` from `/memory/notes/versions`.")


class NoteOut(Schema):
    path: str
    content: str
    updated_at: datetime
    updated_by: Literal["model", "user"]
    source_message_id: int | None = Field(description="The message whose tool call last changed it (model changes).")
    source_agent: str | None = Field(description="The agent of the chat that message is in.")
    source_chat_id: str | None = Field(description="The chat that message is in (a profile note: any of the user's).")


class NotesOut(Schema):
    chat: list[NoteOut]
    profile: list[NoteOut]


class NoteVersionOut(Schema):
    id: int
    changed_at: datetime
    changed_by: Literal["model", "user"]
    before: str | None = Field(description="The text before the change; null when it created the note.")
    after: str | None = Field(description="The text after the change; null when it deleted the note.")
    source_message_id: int | None
    source_agent: str | None
    source_chat_id: str | None


class NoteVersionsOut(Schema):
    versions: list[NoteVersionOut] = Field(description="Newest first.")
    next_before: int | None = Field(description="`before` of the next (older) page; null on the last page.")
