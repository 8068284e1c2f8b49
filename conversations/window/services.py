"""Building the window for a model call: the one place the stored start moves."""

from __future__ import annotations

from dataclasses import replace

from conversations.models import Session
from conversations.window.selectors import window_compute, window_limits, window_stored_start
from conversations.window.types import Window


def window_build(*, session: Session, stored_start: int | None = None) -> Window:
    """The window to send now. When it must move (a step), the new start is stored first, with an
    UPDATE that only ever moves it forward, so every process and every restart sends the same prefix.
    `stored_start`: the stored start as the caller has just read it (with the turn's lease); None:
    read it here.

    Not wrapped in a transaction on purpose: the conditional UPDATE is atomic by itself, and the common
    case (the start stays) then writes nothing and takes no write lock (SQLite's IMMEDIATE mode would
    take one at BEGIN). When another process stored a start beyond ours meanwhile, the window is
    computed again from that one; each retry sees a strictly larger stored start, so this ends.
    """
    limits = window_limits()
    while True:
        stored = window_stored_start(session=session) if stored_start is None else stored_start
        stored_start = None  # a retry reads the start another process stored
        window = window_compute(session=session, stored_start=stored, limits=limits)
        if not window.moved or window.start_id is None:
            session.window_start_id = stored
            return window
        updated = Session.objects.filter(pk=session.pk, window_start_id__lt=window.start_id).update(
            window_start_id=window.start_id
        )
        if updated:
            session.window_start_id = window.start_id
            return replace(window, stored_start_id=window.start_id)
