"""Anthropic's memory tool (`memory_20250818`), run by Buddy over the notes in the database (docs/memory.md).

The SDK's `BetaAbstractMemoryTool` gives the tool's definition and the dispatch of its six commands;
the input is validated by the Pydantic models below, whose errors become the `is_error` text. A write
to a chat note is applied at once. A write that touches a profile note (/memories/profile/…, shared by
all the user's chats) is checked in a savepoint that is rolled back, then kept as a NoteProposal of its
exact changes and shown as the canvas confirmation the server writes from them: it is applied only
when the user confirms (memory.notes.proposals).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types import MemoryTool20250818Param
from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from conversations.models import Message, Session
from memory.models import Note, NoteAuthor, NoteScope
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
from memory.notes.proposals import note_proposal_create
from memory.notes.services import NoteChange, note_changes_apply, notes_of

# Exactly what the API expects (the SDK's `MemoryTool20250818Param`, a tool of `messages.create`).
MEMORY_TOOL_NAME = "memory"
MEMORY_TOOL: MemoryTool20250818Param = {"type": "memory_20250818", "name": MEMORY_TOOL_NAME}


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


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{number:6d}\t{line}" for number, line in enumerate(lines, start=first))


class NotesMemoryTool(BetaAbstractMemoryTool):
    """The memory tool of one session. `source` is the assistant message holding the tool call;
    `ask_user(params)` shows the server's confirmation with those params (`canvas_show_confirmation`'s,
    raising NoteError if it cannot); without it, a profile write is refused."""

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

    def _change(self, path: str, result: str | None) -> NoteChange:
        note = self._note(path)
        return NoteChange(path=path, expected=note.content if note is not None else None, result=result)

    def create(self, command: CreateCommand) -> str:  # type: ignore[override]
        return self._write([self._change(command.path, command.file_text)], f"Saved {command.path}.")

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
        return self._write([NoteChange(command.path, content, updated)], f"Edited {command.path}.")

    def insert(self, command: InsertCommand) -> str:  # type: ignore[override]
        content = self._existing(command.path).content
        lines = content.split("\n") if content else []
        if command.insert_line > len(lines):
            raise NoteError(f"insert_line must be from 0 to {len(lines)}, the lines of {command.path}")
        added = command.insert_text.removesuffix("\n").split("\n")
        updated = "\n".join(lines[: command.insert_line] + added + lines[command.insert_line :])
        return self._write([NoteChange(command.path, content, updated)], f"Inserted into {command.path}.")

    def delete(self, command: DeleteCommand) -> str:  # type: ignore[override]
        if command.path == ROOT:
            raise NoteError(f"{ROOT} itself cannot be deleted; delete the notes in it")
        note = self._note(command.path)
        notes = [note] if note is not None else self._under(command.path)
        if not notes:
            raise NoteError(f"the path {command.path} does not exist")
        return self._write([NoteChange(n.path, n.content, None) for n in notes], f"Deleted {command.path}.")

    def rename(self, command: RenameCommand) -> str:  # type: ignore[override]
        note = self._existing(command.old_path)
        if self._note(command.new_path) is not None:
            raise NoteError(f"the destination {command.new_path} already exists")
        changes = [
            NoteChange(command.old_path, note.content, None),
            NoteChange(command.new_path, None, note.content),
        ]
        return self._write(changes, f"Renamed {command.old_path} to {command.new_path}.")

    def _apply(self, changes: list[NoteChange]) -> None:
        note_changes_apply(
            user=self.session.user, session=self.session, changes=changes, by=NoteAuthor.MODEL, source=self.source
        )

    def _write(self, changes: list[NoteChange], done: str) -> str:
        if not any(scope_of(change.path) == NoteScope.PROFILE for change in changes):
            self._apply(changes)
            return done
        if self.ask_user is None:
            raise NoteError(f"{PROFILE_DIR}/ changes only with the user's yes, and there is no canvas to ask on")
        _check_in_savepoint(lambda: self._apply(changes))
        question = note_proposal_create(session=self.session, changes=changes, source=self.source)
        self.ask_user(question)
        return (
            f"Not saved yet: {PROFILE_DIR}/ is shared by all of the user's chats, so the user was asked on the "
            f"canvas (confirmation {question['id']}, which only the user answers). It is applied exactly as "
            "shown only if they confirm; their answer comes as a message."
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


def memory_tool_run(
    *, session: Session, source: Message | None, tool_input: object, ask_user: Callable[[dict[str, Any]], None]
) -> str:
    """Run one memory tool call; raises ToolError (its text is the `is_error` result) with nothing changed."""
    return NotesMemoryTool(session=session, source=source, ask_user=ask_user).call(tool_input)
