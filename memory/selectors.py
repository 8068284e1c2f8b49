"""Functions that read the memory of a session."""

from __future__ import annotations

from django.db.models import F, TextField, Value
from django.db.models.functions import Coalesce

from conversations.prepared import PreparedQuery
from memory.models import Summary

_SUMMARY_LATEST = PreparedQuery(
    lambda session_id: Summary.objects.filter(session_id=session_id).order_by("-through_message_id")[:1],
    session_id=int,
)


def summary_latest(*, session) -> Summary | None:
    """The summary that covers the most of the session (the one the prompt carries)."""
    found = _SUMMARY_LATEST.rows(session_id=session.pk)
    return found[0] if found else None


# A message's readable text, from its search document ("" for a message written without one), as an
# annotation of Message querysets: `.annotate(text=MESSAGE_TEXT)`.
MESSAGE_TEXT = Coalesce(F("search_document__text"), Value(""), output_field=TextField())
