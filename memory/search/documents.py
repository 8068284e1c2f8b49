"""The search documents of archived messages (memory.models.SearchDocument): written with each batch
of messages the archive stores (conversations.services.message_indexing_register, memory/apps.py), in
the same transaction; the index triggers of each database (memory.search.sqlite, .postgres) read
them."""

from __future__ import annotations

from dataclasses import dataclass

from conversations.content import readable_text
from conversations.models import Message
from memory.models import SearchDocument
from textsearch.text import index_terms, join_terms, search_context


@dataclass(frozen=True)
class _Neighbour:
    message_id: int
    terms: str


def _neighbours_before(session_id: int, message_id: int) -> tuple[_Neighbour | None, _Neighbour | None]:
    """The session's newest message before `message_id` and its newest turn start up to there (the
    same message when that is a turn start), with their stored terms: one lookup on the (session, id)
    index, and a second on the turn-start index only when the newest message is inside a turn."""
    fields = ("id", "is_turn_start", "search_document__terms")
    messages = Message.objects.filter(session_id=session_id, id__lt=message_id).order_by("-id").values_list(*fields)
    previous = messages.first()
    if previous is None:
        return None, None
    neighbour = _Neighbour(previous[0], previous[2] or "")
    if previous[1]:
        return neighbour, neighbour
    turn_start = messages.filter(is_turn_start=True).first()
    return neighbour, _Neighbour(turn_start[0], turn_start[2] or "") if turn_start else None


def _context(message: Message, previous: _Neighbour | None, turn_start: _Neighbour | None) -> str:
    """The message's search context: the terms of the message before it, and of the prompt that
    started its turn when it is inside one (e.g. the reply after tool round-trips)."""
    if previous is None:
        return ""
    inside_turn = not message.is_turn_start and turn_start is not None and turn_start is not previous
    return search_context(previous=previous.terms, turn_start=turn_start.terms if inside_turn else None)


def documents_write(messages: list[Message]) -> None:
    """Write the search documents of messages just archived, given in archive order: each follows every
    message of its session archived before it, so their terms become its context."""
    neighbours: dict[int, tuple[_Neighbour | None, _Neighbour | None]] = {}
    documents = []
    for message in messages:
        if message.session_id not in neighbours:
            neighbours[message.session_id] = _neighbours_before(message.session_id, message.pk)
        previous, turn_start = neighbours[message.session_id]
        text = readable_text(message.content)
        terms = join_terms(index_terms(text))
        documents.append(
            SearchDocument(
                message_id=message.pk,
                session_id=message.session_id,
                text=text,
                terms=terms,
                context=_context(message, previous, turn_start),
                tokens=message.tokens,
            )
        )
        current = _Neighbour(message.pk, terms)
        neighbours[message.session_id] = (current, current if message.is_turn_start else turn_start)
    SearchDocument.objects.bulk_create(documents)
