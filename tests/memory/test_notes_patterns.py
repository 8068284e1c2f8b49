"""The JSON Schema patterns of note paths (memory/notes/patterns.py) accept exactly the paths the Python
rules accept (memory/notes/paths.py), per scope: the API's schema allows no path the server refuses."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from memory.notes.paths import PATH_MAX_CHARS, NoteError, note_path_check, scope_of
from memory.notes.patterns import CHAT_NOTE_PATH_PATTERN, NOTE_PATH_PATTERN, PROFILE_NOTE_PATH_PATTERN

# Characters that make the cases: the word `profile` and near misses, separators, dots, spaces, and
# characters no path may hold.
PIECES = [
    "profile",
    "profil",
    "profiles",
    "Profile",
    "p",
    "r",
    "o",
    "e",
    "/",
    ".",
    "..",
    " ",
    "-",
    "_",
    "x",
    "0",
    "é",
    ":",
]
paths = st.lists(st.sampled_from(PIECES), max_size=12).map(lambda pieces: "/memories" + "".join(pieces))


def python_scope(path: str) -> str | None:
    """The scope of a note at `path` by the Python rules, None when no note may be there."""
    try:
        trimmed = note_path_check(path)
    except NoteError:
        return None
    return scope_of(trimmed) if trimmed == path and len(path) <= PATH_MAX_CHARS else None


@given(paths)
@example("/memories/profile")
@example("/memories/profile/")
@example("/memories/profile/a")
@example("/memories/profiles/a")
@example("/memories/profil")
@example("/memories/p rofile")
@example("/memories/profile .md")
@example("/memories/..")
@example("/memories/.../x")
@example("/memories/a /b")
def test_each_pattern_accepts_exactly_what_the_rules_accept(path):
    scope = python_scope(path)
    assert bool(re.fullmatch(NOTE_PATH_PATTERN, path)) == (scope is not None), path
    assert bool(re.fullmatch(CHAT_NOTE_PATH_PATTERN, path)) == (scope == "chat"), path
    assert bool(re.fullmatch(PROFILE_NOTE_PATH_PATTERN, path)) == (scope == "profile"), path


def test_the_patterns_hold_no_lookaround():
    for pattern in (NOTE_PATH_PATTERN, CHAT_NOTE_PATH_PATTERN, PROFILE_NOTE_PATH_PATTERN):
        assert "(?=" not in pattern and "(?!" not in pattern and "(?<" not in pattern
