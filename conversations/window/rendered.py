"""A process-wide cache of archived rows as the window renders them, so a row is decoded and cleaned
once, not on every model call (docs/architecture.md, "The window's row cache").

An entry is keyed by the row's id and the block cap, and holds the stored JSON text it was made from,
the role and the largest block's estimate: a row whose stored text (or those facts) no longer match is
decoded again, so an edited or redacted message is never served stale. Entries are bounded by the
total length of their stored texts, least recently used first out.

What it hands out is shared by every thread and every later call: the decoded content and the cleaned
blocks must never be changed in place (the window's users copy what they add to: `window_render`,
`agent.prompt.request_build`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from conversations.content import Block

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


class RenderedRows:
    """A thread-safe LRU map (message id, block cap) → RenderedRow, bounded by `max_chars` of stored
    text. A row longer than the bound on its own is never kept."""

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self._entries: OrderedDict[tuple[int, int], RenderedRow] = OrderedDict()
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
            self._entries[key] = entry
            self.chars += size
            while self.chars > self.max_chars:
                _, evicted = self._entries.popitem(last=False)
                self.chars -= len(evicted.raw)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.chars = 0

    def chars_counted(self) -> int:
        """The stored texts' length counted entry by entry (`chars` is kept as entries come and go)."""
        with self._lock:
            return sum(len(entry.raw) for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)


# The one cache of this process.
rendered_rows = RenderedRows()
