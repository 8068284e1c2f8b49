"""Functions that read the memory of a session."""

from __future__ import annotations

from memory.models import Summary


def summary_latest(*, session) -> Summary | None:
    """The summary that covers the most of the session (the one the prompt carries)."""
    return Summary.objects.filter(session=session).order_by("-through_message_id").first()
