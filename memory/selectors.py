"""Functions that read the memory of a session."""

from __future__ import annotations

from django.db.models import F, TextField, Value
from django.db.models.functions import Coalesce

from memory.models import Summary


def summary_latest(*, session) -> Summary | None:
    """The summary that covers the most of the session (the one the prompt carries)."""
    return Summary.objects.filter(session=session).order_by("-through_message_id").first()


# A message's readable text, from its search document ("" for a message written without one), as an
# annotation of Message querysets: `.annotate(text=MESSAGE_TEXT)`.
MESSAGE_TEXT = Coalesce(F("search_document__text"), Value(""), output_field=TextField())
