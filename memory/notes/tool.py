"""Anthropic's memory tool (`memory_20250818`), run by Buddy over the notes in the database (docs/memory.md).

The SDK's `BetaAbstractMemoryTool` gives the tool's definition and the dispatch of its six commands;
the input is validated by the Pydantic models below, whose errors become the `is_error` text. A write
to a chat note is applied at once. A write that touches a profile note (/memories/profile/…, shared by
all the user's chats) is checked in a savepoint that is rolled back, then kept as a NoteProposal and
shown as a canvas confirmation: it is applied only when the user confirms (`note_proposal_answer`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types import MemoryTool20250818Param
from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from conversations.models import Message, Session
from memory.models import Note, NoteAuthor, NoteProposal, NoteScope
from memory.notes.paths import (
    PROFILE_DIR,
    ROOT,
    DirectoryPath,
    NoteError,
    NotePath,
    NoteText,
    PieceOfText,
    scope_of,
)
from memory.notes.services import note_delete, note_put, notes_of

# Exactly what the API expects (the SDK's `MemoryTool20250818Param`, a tool of `messages.create`).
MEMORY_TOOL_NAME = "memory"
MEMORY_TOOL: MemoryTool20250818Param = {"type": "memory_20250818", "name": MEMORY_TOOL_NAME}
PREVIEW_CHARS = 300  # of a proposed profile note, in its confirmation


class _Command(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class ViewCommand(_Command):
    command: Literal["view"]
    path: DirectoryPath
    view_range: list[int] | None = Field(None, min_length=2, max_length=2)


class CreateCommand(_Command):
    command: Literal["create"]
    path: NotePath
    file_text: NoteText


class StrReplaceCommand(_Command):
    command: Literal["str_replace"]
    path: NotePath
    old_str: PieceOfText = Field(min_length=1)
    new_str: PieceOfText = ""


class InsertCommand(_Command):
    command: Literal["insert"]
    path: NotePath
    insert_line: int = Field(ge=0)
    insert_text: PieceOfText


class DeleteCommand(_Command):
    command: Literal["delete"]
    path: DirectoryPath


class RenameCommand(_Command):
    command: Literal["rename"]
    old_path: NotePath
    new_path: NotePath


MemoryCommand = Annotated[
    ViewCommand | CreateCommand | StrReplaceCommand | InsertCommand | DeleteCommand | RenameCommand,
    Field(discriminator="command"),
]
COMMAND_ADAPTER: TypeAdapter[Any] = TypeAdapter(MemoryCommand)


def validation_text(error: ValidationError) -> str:
    """Pydantic's errors as one sentence per problem: where, and why."""
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in item["loc"][1:] or item["loc"])
        problems.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)


def command_parse(tool_input: object) -> Any:
    """The validated command, or ToolError saying why not."""
    try:
        return COMMAND_ADAPTER.validate_python(tool_input)
    except ValidationError as exc:
        raise ToolError(f"memory failed, nothing changed: {validation_text(exc)}") from None


@dataclass
class Change:
    path: str
    content: str | None  # None: delete


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{number:6d}\t{line}" for number, line in enumerate(lines, start=first))


class NotesMemoryTool(BetaAbstractMemoryTool):
    """The memory tool of one session. `source` is the assistant message holding the tool call;
    `ask_user(params)` shows a `canvas_show_confirmation` with those params (raising NoteError if it
    cannot); without it, profile writes are applied (only for an answered proposal)."""

    def __init__(
        self,
        *,
        session: Session,
        source: Message | None,
        ask_user: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        super().__init__()
        self.session, self.source, self.ask_user = session, source, ask_user

    def to_dict(self) -> MemoryTool20250818Param:  # type: ignore[override]
        return dict(MEMORY_TOOL)  # type: ignore[return-value]

    def call(self, input: object) -> str:  # noqa: A002 (the base class's name)
        command = command_parse(input)
        try:
            return self.execute(command)
        except NoteError as exc:
            raise ToolError(f"memory {command.command} failed, nothing changed: {exc}") from None

    # --- reading ---

    def _notes(self, scope: str):
        return notes_of(user=self.session.user, session=self.session, scope=scope)

    def _note(self, path: str) -> Note | None:
        return self._notes(scope_of(path)).filter(path=path).first()

    def _under(self, directory: str) -> list[Note]:
        scopes = [NoteScope.CHAT, NoteScope.PROFILE] if directory == ROOT else [scope_of(directory)]
        found: list[Note] = []
        for scope in scopes:
            found.extend(self._notes(scope).filter(path__startswith=directory + "/").order_by("path"))
        return found

    def _existing(self, path: str) -> Note:
        note = self._note(path)
        if note is None:
            raise NoteError(f"the path {path} does not exist")
        return note

    def view(self, command: ViewCommand) -> str:  # type: ignore[override]
        note = self._note(command.path)
        if note is not None:
            lines = note.content.split("\n")
            first, last = 1, len(lines)
            if command.view_range is not None:
                first, last = command.view_range
                last = len(lines) if last == -1 else last
                if not 1 <= first <= last <= len(lines):
                    raise NoteError(f"view_range must lie within lines 1 to {len(lines)} (-1 for the end)")
            kept = f" (kept from message [#{note.source_message_id}])" if note.source_message_id else ""
            header = f"Here's the content of {note.path}{kept} with line numbers:\n"
            return header + _numbered(lines[first - 1 : last], first)
        notes = self._under(command.path)
        if not notes and command.path not in (ROOT, PROFILE_DIR):
            raise NoteError(f"the path {command.path} does not exist")
        listing = [f"{len(n.content.encode('utf-8'))}\t{n.path}" for n in notes]
        header = f"The notes under {command.path} (bytes, path)"
        if command.path == ROOT:
            header += f"; those under {PROFILE_DIR}/ are shared by all the user's chats"
        return header + ":\n" + ("\n".join(listing) if listing else "(none yet)")

    # --- writing ---

    def create(self, command: CreateCommand) -> str:  # type: ignore[override]
        return self._write(command, [Change(command.path, command.file_text)], f"Saved {command.path}.")

    def str_replace(self, command: StrReplaceCommand) -> str:  # type: ignore[override]
        content = self._existing(command.path).content
        count = content.count(command.old_str)
        if count == 0:
            raise NoteError(f"old_str did not appear verbatim in {command.path}")
        if count > 1:
            lines = [str(n) for n, line in enumerate(content.split("\n"), start=1) if command.old_str in line]
            where = f" (lines {', '.join(lines)})" if lines else ""
            raise NoteError(f"old_str occurs {count} times in {command.path}{where}; include more text so it is unique")
        updated = content.replace(command.old_str, command.new_str, 1)
        return self._write(command, [Change(command.path, updated)], f"Edited {command.path}.")

    def insert(self, command: InsertCommand) -> str:  # type: ignore[override]
        content = self._existing(command.path).content
        lines = content.split("\n") if content else []
        if command.insert_line > len(lines):
            raise NoteError(f"insert_line must be from 0 to {len(lines)}, the lines of {command.path}")
        added = command.insert_text.removesuffix("\n").split("\n")
        updated = "\n".join(lines[: command.insert_line] + added + lines[command.insert_line :])
        return self._write(command, [Change(command.path, updated)], f"Inserted into {command.path}.")

    def delete(self, command: DeleteCommand) -> str:  # type: ignore[override]
        if command.path == ROOT:
            raise NoteError(f"{ROOT} itself cannot be deleted; delete the notes in it")
        note = self._note(command.path)
        notes = [note] if note is not None else self._under(command.path)
        if not notes:
            raise NoteError(f"the path {command.path} does not exist")
        return self._write(command, [Change(n.path, None) for n in notes], f"Deleted {command.path}.")

    def rename(self, command: RenameCommand) -> str:  # type: ignore[override]
        note = self._existing(command.old_path)
        if self._note(command.new_path) is not None:
            raise NoteError(f"the destination {command.new_path} already exists")
        changes = [Change(command.old_path, None), Change(command.new_path, note.content)]
        return self._write(command, changes, f"Renamed {command.old_path} to {command.new_path}.")

    def _apply(self, changes: list[Change]) -> None:
        user = self.session.user
        for change in changes:
            if change.content is None:
                note_delete(user=user, session=self.session, path=change.path, by=NoteAuthor.MODEL, source=self.source)
            else:
                note_put(
                    user=user,
                    session=self.session,
                    path=change.path,
                    content=change.content,
                    by=NoteAuthor.MODEL,
                    source=self.source,
                )

    def _write(self, command: Any, changes: list[Change], done: str) -> str:
        profile = any(scope_of(change.path) == NoteScope.PROFILE for change in changes)
        if not profile or self.ask_user is None:
            with transaction.atomic():  # all the command's changes, or none
                self._apply(changes)
            return done
        _check_in_savepoint(lambda: self._apply(changes))
        element_id = f"memory-{secrets.token_hex(4)}"
        NoteProposal.objects.create(
            session=self.session, element_id=element_id, command=command.model_dump(), source_message=self.source
        )
        self.ask_user(_confirmation(element_id, command, changes))
        return (
            f"Not saved yet: {PROFILE_DIR}/ is shared by all of the user's chats, so the user was asked on the "
            f"canvas (confirmation {element_id}). It is applied only if they confirm; their answer comes as a message."
        )


class _RolledBack(Exception):
    pass


def _check_in_savepoint(action: Callable[[], None]) -> None:
    """Run `action` and undo it: raises its NoteError, if any, so a proposal is known to apply now."""
    try:
        with transaction.atomic():
            action()
            raise _RolledBack
    except _RolledBack:
        pass


def _confirmation(element_id: str, command: Any, changes: list[Change]) -> dict[str, Any]:
    kept = [c for c in changes if c.content is not None]
    if not kept:
        paths = ", ".join(c.path for c in changes)
        return {
            "id": element_id,
            "title": "Forget in all chats?",
            "message": f"Forget in all chats: {paths}?",
            "confirm_label": "Forget",
            "cancel_label": "Keep",
        }
    change = kept[0]
    preview = change.content if len(change.content) <= PREVIEW_CHARS else change.content[: PREVIEW_CHARS - 1] + "…"
    return {
        "id": element_id,
        "title": "Remember in all chats?",
        "message": f"Remember in all chats: {preview}?\n({change.path})",
        "confirm_label": "Remember",
        "cancel_label": "Don't",
    }


def memory_tool_run(
    *, session: Session, source: Message | None, tool_input: object, ask_user: Callable[[dict[str, Any]], None]
) -> str:
    """Run one memory tool call; raises ToolError (its text is the `is_error` result) with nothing changed."""
    return NotesMemoryTool(session=session, source=source, ask_user=ask_user).call(tool_input)


@transaction.atomic
def note_proposal_answer(*, session: Session, element_id: str, confirmed: bool) -> NoteProposal | None:
    """Apply (confirmed) or drop (declined) the proposal behind the confirmation `element_id`; None if
    that confirmation is not a note's. A proposal that no longer applies is kept as `failed`, with why."""
    proposal = (
        NoteProposal.objects.select_for_update()
        .filter(session=session, element_id=element_id, status=NoteProposal.Status.PENDING)
        .first()
    )
    if proposal is None:
        return None
    if not confirmed:
        proposal.status = NoteProposal.Status.DECLINED
    else:
        tool = NotesMemoryTool(session=session, source=proposal.source_message)
        try:
            with transaction.atomic():
                proposal.outcome = tool.call(proposal.command)
            proposal.status = NoteProposal.Status.APPLIED
        except ToolError as exc:
            proposal.status, proposal.outcome = NoteProposal.Status.FAILED, str(exc)
    proposal.save(update_fields=["status", "outcome"])
    return proposal
