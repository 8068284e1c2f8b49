"""Speaker labels: a transcript of several people, imported into a chat, starts each message with its
speaker's name ("Caroline: I went to a support group yesterday"). Search reads them as a cue
(textsearch.cues); the sentence vectors leave them out (memory.semantic). docs/search.md.
"""

from __future__ import annotations

import re

# "Name:" or "First Last:" at the start of a message: one to three capitalised words.
LABEL_RE = re.compile(r"([A-Z][\w'’.-]{0,30}(?: [A-Z][\w'’.-]{0,30}){0,2}):\s")
# Characters of a message's start that hold its label.
LABEL_CHARS = 64


def without_label(text: str) -> str:
    """The message's text without its speaker label: what it says, not who says it."""
    match = LABEL_RE.match(text)
    return text[match.end() :] if match else text
