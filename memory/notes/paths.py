"""The rules of a note's path and text, one place for the memory tool, the API and the import."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from conversations.content import text_problem
from conversations.errors import Conflict, InvalidInput, NotFound
from memory.models import NoteScope

ROOT = "/memories"
PROFILE_DIR = f"{ROOT}/profile"
PATH_MAX_CHARS = 200
NOTE_MAX_BYTES = 8 * 1024
NOTES_PER_SCOPE = 100
# Versions kept per note (the newest; older ones are pruned), and per scope the deleted notes whose
# versions stay, the most recently deleted (README: Memory notes).
NOTE_VERSIONS_KEPT = 50
DELETED_NOTES_KEPT = 100
PATH_RE = re.compile(r"^[A-Za-z0-9_ ./-]+$")


class NoteError(InvalidInput):
    """A note command or write that is refused; the message says why, for the model or the user."""


class NoteMissing(NotFound, NoteError):
    """No such note or version (of this user and chat)."""


class NoteConflict(Conflict, NoteError):
    """A write the notes as they are refuse: the scope is full, the path is (or is under) another note."""


class NoteChanged(NoteConflict):
    """A change was made against a note's text that is no longer the note's text."""


def directory_check(path: str) -> str:
    """A path the memory tool may view or delete: /memories, a directory or a note under it. Returns it
    without a trailing slash."""
    if not isinstance(path, str):
        raise NoteError("a path must be a string")
    problem = text_problem(path)
    if problem:
        raise NoteError(f"the path {problem}")
    if len(path) > PATH_MAX_CHARS:
        raise NoteError(f"a path is at most {PATH_MAX_CHARS} characters; this one has {len(path)}")
    if not PATH_RE.match(path):
        raise NoteError(f"{path!r}: a path may hold only letters, digits, spaces and _ . / -")
    trimmed = path.rstrip("/") or "/"
    if trimmed != ROOT and not trimmed.startswith(ROOT + "/"):
        raise NoteError(f"{path!r} is outside {ROOT}/: every note lives under {ROOT}/")
    segments = trimmed.split("/")[1:]
    if any(segment in ("", ".", "..") for segment in segments):
        raise NoteError(f"{path!r}: a path may not hold empty, '.' or '..' parts")
    if any(segment != segment.strip() for segment in segments):
        raise NoteError(f"{path!r}: a part of a path may not start or end with a space")
    return trimmed


def note_path_check(path: str) -> str:
    """A path a note may have: a file under /memories/, not /memories/profile itself."""
    trimmed = directory_check(path)
    if path.endswith("/") or trimmed in (ROOT, PROFILE_DIR):
        raise NoteError(f"{path!r} is a directory; a note's path names a file, e.g. {ROOT}/preferences.md")
    return trimmed


def note_text_check(text: str) -> str:
    if not isinstance(text, str):
        raise NoteError("a note's text must be a string")
    problem = text_problem(text)
    if problem:
        raise NoteError(f"the text {problem}")
    size = len(text.encode("utf-8"))
    if size > NOTE_MAX_BYTES:
        raise NoteError(f"a note holds at most {NOTE_MAX_BYTES:,} bytes; this text has {size:,}")
    return text


def text_check(text: str) -> str:
    """A piece of text (a string to find or insert): storable, no size rule of its own."""
    problem = text_problem(text) if isinstance(text, str) else "must be a string"
    if problem:
        raise NoteError(f"the text {problem}")
    return text


def scope_of(path: str) -> str:
    return NoteScope.PROFILE if path == PROFILE_DIR or path.startswith(PROFILE_DIR + "/") else NoteScope.CHAT


# The same rules as Pydantic types (the memory tool's input and the API's schemas).
DirectoryPath = Annotated[str, AfterValidator(directory_check)]
NotePath = Annotated[str, AfterValidator(note_path_check)]
NoteText = Annotated[str, AfterValidator(note_text_check)]
PieceOfText = Annotated[str, AfterValidator(text_check)]
