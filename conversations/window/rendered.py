"""A process-wide cache of archived rows as the window renders them, so a row is decoded and cleaned
once, not on every model call (docs/architecture.md, "The window's row cache").

An entry is keyed by the row's id and the block cap, and holds the stored JSON text it was made from,
the role and the largest block's estimate: a row whose stored text (or those facts) no longer match is
decoded again, so an edited or redacted message is never served stale. Beside an entry, the row as
sent after the row before it (`plan.Piece`), checked the same way against both rows. Entries are
bounded by the total length of their stored texts, least recently used first out.

What it hands out is shared by every thread and every later call: the decoded content, the cleaned
blocks and the messages as sent must never be changed in place (the window's users copy what they
add to: `window_render`, `agent.prompt.request_build`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from conversations.content import Block

if TYPE_CHECKING:
    from conversations.window.plan import Piece

# The bound on the stored texts the cache holds, in characters: about 30 full windows of the default
# 120,000 tokens. The decoded content and blocks come on top, about as large again.
MAX_CHARS = 16_000_000


@dataclass(frozen=True, slots=True)
class RenderedRow:
    """One row decoded (`content`) and cleaned with one block cap (`blocks`, the very list `content`
    when nothing changed), with what it was made from."""

    raw: str
    role: str
    largest_block_tokens: int
    content: list[Block]
    blocks: list[Block]


# What a row's rendering depends on: its stored text, role, largest block's and whole estimates.
RowFacts = tuple[str, str, int, int]


@dataclass(frozen=True, slots=True)
class _SentAfter:
    """A row as sent after another row (`plan.Piece`), with the facts of both it was made from."""

    facts: RowFacts
    previous: RowFacts
    piece: Piece


class RenderedRows:
    """A thread-safe LRU map (message id, block cap) → RenderedRow, bounded by `max_chars` of stored
    text. A row longer than the bound on its own is never kept. Beside each entry, the row as sent
    after the row before it (what it sends depends on that row only), which goes with the entry."""

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self._entries: OrderedDict[tuple[int, int], RenderedRow] = OrderedDict()
        self._sent_after: dict[tuple[int, int], _SentAfter] = {}
        self._lock = threading.Lock()

    def get(self, message_id: int, cap: int, *, raw: str, role: str, largest_block_tokens: int) -> RenderedRow | None:
        """The entry made from exactly this stored text and these facts, else None."""
        key = (message_id, cap)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        if entry.raw != raw or entry.role != role or entry.largest_block_tokens != largest_block_tokens:
            return None
        return entry

    def put(self, message_id: int, cap: int, entry: RenderedRow) -> None:
        size = len(entry.raw)
        if size > self.max_chars:
            return
        key = (message_id, cap)
        with self._lock:
            replaced = self._entries.pop(key, None)
            if replaced is not None:
                self.chars -= len(replaced.raw)
                self._sent_after.pop(key, None)
            self._entries[key] = entry
            self.chars += size
            while self.chars > self.max_chars:
                evicted_key, evicted = self._entries.popitem(last=False)
                self.chars -= len(evicted.raw)
                self._sent_after.pop(evicted_key, None)

    def piece_get(self, message_id: int, cap: int, *, facts: RowFacts, previous: RowFacts) -> Piece | None:
        """The row as sent after the row before it, made from rows with exactly these facts; else None.
        A hit counts as a use of the row's entry."""
        key = (message_id, cap)
        sent = self._sent_after.get(key)
        if sent is None or sent.facts != facts or sent.previous != previous:
            return None
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
        return sent.piece

    def piece_put(
        self, message_id: int, cap: int, piece: Piece, *, facts: RowFacts, previous_id: int, previous: RowFacts
    ) -> None:
        key = (message_id, cap)
        with self._lock:
            # Only beside an entry made from the same text, so it leaves the cache with it.
            entry = self._entries.get(key)
            if entry is None or entry.raw != facts[0]:
                return
            # The texts are kept as the entries' own strings, so the bound counts them.
            facts = (entry.raw, *facts[1:])
            before = self._entries.get((previous_id, cap))
            if before is not None and before.raw == previous[0]:
                previous = (before.raw, *previous[1:])
            self._sent_after[key] = _SentAfter(facts, previous, piece)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._sent_after.clear()
            self.chars = 0

    def chars_counted(self) -> int:
        """The stored texts' length counted entry by entry (`chars` is kept as entries come and go)."""
        with self._lock:
            return sum(len(entry.raw) for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def pieces(self) -> int:
        return len(self._sent_after)


# The one cache of this process.
rendered_rows = RenderedRows()
