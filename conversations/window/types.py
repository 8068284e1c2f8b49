"""What the window module hands out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conversations.window.plan import Row


@dataclass(frozen=True)
class RecentMessages:
    """The newest archived messages the window's query read (`rows`, oldest first); `whole_chat`: they
    are every message of the chat. Others (the prompt cache's policy) read the chat's pace from them
    instead of reading the same rows again."""

    rows: Sequence[Row]
    whole_chat: bool

    def newest(self, count: int) -> list[tuple[datetime, bool]] | None:
        """The chat's newest `count` messages as (created_at, is_turn_start), oldest first, all of them
        when the chat has fewer; None when the rows read do not hold them."""
        if len(self.rows) < count and not self.whole_chat:
            return None
        return [(row.created_at, row.is_turn_start) for row in self.rows[-count:]]


@dataclass(frozen=True)
class Window:
    """A window as sent to the model.

    `messages[k]` is `{"role", "content"}`, ready for the SDK; `message_ids[k]` is the id of the archived
    message it renders, None for a synthetic message (a repair). `rows` counts the archived messages
    the window covers (start to newest; `total − rows` are the archived ones before it), while the row
    cap limits `len(messages)`, the messages as sent. `tokens` is the sum of the token estimates of
    `messages` as sent, repairs and shortened blocks included.
    """

    messages: list[dict[str, Any]]
    message_ids: list[int | None]
    start_id: int | None
    tokens: int
    rows: int
    # How the start was found: "stored", "step", "inside_turn", "squeezed" or "empty" (see plan.py).
    mode: str
    # The stored start after this call; for a preview, the stored start as it is (it never writes).
    stored_start_id: int
    # The start moved forward with this window (window_build stored it; a preview only reports it).
    moved: bool
    # The turn start a step due now would move to (None: none would do); the real step, due later,
    # moves at least that far as long as the archive only grows by messages no smaller than repairs.
    next_start_id: int | None
    # The rows the window was planned from (None: a window not read from the archive).
    recent: RecentMessages | None = None


@dataclass(frozen=True)
class WindowStep:
    """Where the window's next step stands (for the summariser): the current start, the turn start the
    next step would move to, and how much the window can still grow before that step is due."""

    start_id: int | None
    next_start_id: int | None
    tokens_until_step: int
    rows_until_step: int


def window_render(window: Window) -> list[dict[str, Any]]:
    """The window's messages for the SDK, as new message dicts, content lists and blocks (shallow
    copies), so a caller may add `cache_control` or the context block without touching the window."""
    return [
        {"role": message["role"], "content": [dict(block) for block in message["content"]]}
        for message in window.messages
    ]
