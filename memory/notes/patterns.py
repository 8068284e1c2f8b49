"""The path rules of memory/notes/paths.py (note_path_check, scope_of) as JSON Schema patterns, so the
API's schemas say exactly which paths a note of each scope may have (tests/memory/test_notes_patterns.py
holds the two to each other). ECMA-262 syntax without lookaround, which generators of examples from a
schema cannot all follow: "a part other than `profile`" is spelled out."""

from __future__ import annotations

import string

from memory.notes.paths import PROFILE_DIR, ROOT

_START = string.ascii_letters + string.digits + "_-"  # a part's first character, unless the part starts with "."
_EDGE = _START + "."  # its first (after a "."), and last character: never a space
_INNER = _EDGE + " "  # inside a part


def _class(chars: str) -> str:
    """A character class of `chars`, consecutive runs written as ranges."""
    codes = sorted({ord(char) for char in chars})
    runs: list[list[int]] = []
    for code in codes:
        if runs and code == runs[-1][1] + 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])

    def one(code: int) -> str:
        return "\\" + chr(code) if chr(code) in "\\]-^" else chr(code)

    parts = [one(a) if a == b else one(a) + one(b) if b == a + 1 else f"{one(a)}-{one(b)}" for a, b in runs]
    return "[" + "".join(parts) + "]"


def _minus(chars: str, char: str) -> str:
    return chars.replace(char, "")


# One part of a path: not empty, ".", or "..", not starting or ending with a space.
PART = (
    f"(?:{_class(_START)}|{_class(_START)}{_class(_EDGE)}|\\.{_class(_START)}"
    f"|{_class(_EDGE)}{_class(_INNER)}+{_class(_EDGE)})"
)


def _part_other_than(word: str) -> str:
    """PART, less exactly `word` (a word of letters, as `profile`)."""
    options = [
        # It differs at the first character …
        f"{_class(_minus(_START, word[0]))}",
        f"{_class(_minus(_START, word[0]))}{_class(_EDGE)}",
        f"\\.{_class(_START)}",
        f"{_class(_minus(_EDGE, word[0]))}{_class(_INNER)}+{_class(_EDGE)}",
    ]
    for length in range(1, len(word)):
        prefix, next_char = word[:length], word[length]
        options += [
            prefix,  # … or it is a shorter start of the word,
            f"{prefix}{_class(_minus(_EDGE, next_char))}",  # or it differs after that start,
            f"{prefix}{_class(_minus(_INNER, next_char))}{_class(_INNER)}*{_class(_EDGE)}",
        ]
    options.append(f"{word}{_class(_INNER)}*{_class(_EDGE)}")  # or it goes on past the word
    return "(?:" + "|".join(options) + ")"


_PROFILE = PROFILE_DIR.removeprefix(ROOT + "/")
_CHAT_REST = f"{_part_other_than(_PROFILE)}(?:/{PART})*"
_PROFILE_REST = f"{_PROFILE}(?:/{PART})+"

CHAT_NOTE_PATH_PATTERN = f"^{ROOT}/{_CHAT_REST}$"
PROFILE_NOTE_PATH_PATTERN = f"^{ROOT}/{_PROFILE_REST}$"
NOTE_PATH_PATTERN = f"^{ROOT}/(?:{_CHAT_REST}|{_PROFILE_REST})$"  # either scope: what note_path_check() lets through
