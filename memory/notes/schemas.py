from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from ninja import Field, Schema
from pydantic import AfterValidator, ConfigDict, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from conversations.schemas import NO_NUL_PATTERN, ChatIn
from memory.notes.paths import (
    NOTE_MAX_BYTES,
    NOTE_VERSIONS_KEPT,
    PATH_MAX_CHARS,
    note_path_check,
    note_text_check,
    scope_of,
)
from memory.notes.patterns import CHAT_NOTE_PATH_PATTERN, NOTE_PATH_PATTERN, PROFILE_NOTE_PATH_PATTERN

Scope = Literal["chat", "profile"]

# The rules of memory.notes.paths, said in the OpenAPI schema too.
NotePathParam = Annotated[
    str,
    AfterValidator(note_path_check),
    Field(
        max_length=PATH_MAX_CHARS,
        description="A note's path: `/memories/…` (a profile note: `/memories/profile/…`), parts of A-Z a-z "
        "0-9 _ . - and spaces, none empty, `.` or `..`, none starting or ending with a space.",
        json_schema_extra={"pattern": NOTE_PATH_PATTERN},
    ),
]
NoteTextParam = Annotated[
    str,
    AfterValidator(note_text_check),
    Field(
        max_length=NOTE_MAX_BYTES,
        description=f"The note's text, at most {NOTE_MAX_BYTES:,} bytes as UTF-8.",
        json_schema_extra={"pattern": NO_NUL_PATTERN},
    ),
]


class NoteChatIn(ChatIn):
    """The chat of a chat note (a profile note needs none)."""


class NoteRefIn(NoteChatIn):
    scope: Scope
    path: NotePathParam


class NoteVersionsIn(NoteRefIn):
    limit: int = Field(
        20, ge=1, le=NOTE_VERSIONS_KEPT, description=f"Versions in one page, at most {NOTE_VERSIONS_KEPT}."
    )
    before: int | None = Field(
        None, ge=1, le=2**63 - 1, description="A version's `id`: the page holds the versions older than it."
    )


class NotePutIn(NoteRefIn):
    """`scope` and `path` agree: a profile note's path is under /memories/profile/, a chat note's is not."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"properties": {"scope": {"const": scope}, "path": {"pattern": pattern}}}
                for scope, pattern in (("chat", CHAT_NOTE_PATH_PATTERN), ("profile", PROFILE_NOTE_PATH_PATTERN))
            ]
        }
    )

    content: NoteTextParam

    @field_validator("path")
    @classmethod
    def _in_its_scope(cls, path: str, info: ValidationInfo) -> str:
        return _path_in_its_scope(path, info.data.get("scope"))


class NotesListIn(NoteChatIn):
    deleted: bool = Field(
        False,
        description="`true` (or `1`): the deleted notes instead, as they were when deleted, each restorable "
        "by its `scope` and `path`.",
    )


def _path_in_its_scope(path: str, scope: str | None) -> str:
    if scope is not None and scope_of(path) != scope:
        raise PydanticCustomError(
            "path_scope",
            "{path} is a {other} note's path: profile notes are under /memories/profile/, chat notes elsewhere",
            {"path": path, "other": scope_of(path)},
        )
    return path


class NoteRestoreIn(NoteChatIn):
    """Either `version_id`, or `scope` and `path` (the deleted note at that path), never both."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"required": ["version_id"], "not": {"anyOf": [{"required": ["scope"]}, {"required": ["path"]}]}},
                *(
                    {
                        "required": ["scope", "path"],
                        "not": {"required": ["version_id"]},
                        "properties": {"scope": {"const": scope}, "path": {"pattern": pattern}},
                    }
                    for scope, pattern in (("chat", CHAT_NOTE_PATH_PATTERN), ("profile", PROFILE_NOTE_PATH_PATTERN))
                ),
            ]
        }
    )

    version_id: int = Field(
        None,
        ge=1,
        le=2**63 - 1,
        description="A version's `id` from `/memory/notes/versions`: restores its text.",
    )
    scope: Scope = Field(None, description="With `path`: restores the deleted note at that path.")
    path: NotePathParam = None  # type: ignore[assignment]

    @field_validator("version_id", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: object) -> object:
        if isinstance(value, bool):  # a JSON `true` is not version 1
            raise ValueError("must be an integer, not true or false")
        return value

    @field_validator("path")
    @classmethod
    def _in_its_scope(cls, path: str, info: ValidationInfo) -> str:
        return _path_in_its_scope(path, info.data.get("scope"))

    @model_validator(mode="after")
    def _one_way(self) -> NoteRestoreIn:
        by_path = self.scope is not None or self.path is not None
        if self.version_id is not None and by_path:
            raise PydanticCustomError("restore_one_way", "give either version_id, or scope and path, not both")
        if self.version_id is None and (self.scope is None or self.path is None):
            raise PydanticCustomError(
                "restore_what", "name the version to restore (version_id) or the deleted note (scope and path)"
            )
        return self


class NoteOut(Schema):
    path: str
    content: str
    updated_at: datetime
    updated_by: Literal["model", "user"]
    source_message_id: int | None = Field(description="The message whose tool call last changed it (model changes).")
    source_prompt_id: int | None = Field(
        description="The prompt that started that message's turn: the person's message the change came from."
    )
    source_agent: str | None = Field(description="The agent of the chat that message is in.")
    source_chat_id: str | None = Field(description="The chat that message is in (a profile note: any of the user's).")


class NotesOut(Schema):
    chat: list[NoteOut]
    profile: list[NoteOut]


class DeletedNoteOut(NoteOut):
    """A deleted note as it was when deleted: `updated_*` and `source_*` are its last change's."""

    deleted_at: datetime
    deleted_by: Literal["model", "user"]
    version_id: int = Field(description="The deletion's version (`/memory/notes/versions`).")


class DeletedNotesOut(Schema):
    chat: list[DeletedNoteOut] = Field(description="This chat's deleted notes, most recently deleted first.")
    profile: list[DeletedNoteOut] = Field(description="The user's deleted profile notes, most recently deleted first.")


class NoteVersionOut(Schema):
    id: int
    changed_at: datetime
    changed_by: Literal["model", "user"]
    before: str | None = Field(description="The text before the change; null when it created the note.")
    after: str | None = Field(description="The text after the change; null when it deleted the note.")
    source_message_id: int | None
    source_prompt_id: int | None
    source_agent: str | None
    source_chat_id: str | None


class NoteVersionsOut(Schema):
    versions: list[NoteVersionOut] = Field(description="Newest first.")
    next_before: int | None = Field(description="`before` of the next (older) page; null on the last page.")
