"""The search documents of archived messages (memory.models.SearchDocument): written with each batch
of messages the archive stores (conversations.services.message_indexing_register, memory/apps.py), in
the same transaction, or for messages archived to be indexed later (a turn's prompt and final reply),
in a batch of their own; the index triggers of each database (memory.search.sqlite, .postgres) read
them."""

from __future__ import annotations

from dataclasses import dataclass

from conversations.content import readable_text
from conversations.models import Message
from conversations.prepared import PreparedQuery
from memory.models import SearchDocument
from textsearch.text import index_terms, join_terms, search_context


@dataclass(frozen=True)
class _Neighbour:
    message_id: int
    terms: str


# A plain turn is 2 messages, one with a tool round 4: the newest turn start is among the newest few.
NEIGHBOUR_ROWS = 4


def _newest_before(session_id: int, message_id: int):
    fields = ("id", "is_turn_start", "search_document__terms")
    return Message.objects.filter(session_id=session_id, id__lt=message_id).order_by("-id").values_list(*fields)


# The newest rows before a message, read for each batch a turn indexes.
_NEWEST_BEFORE = PreparedQuery(
    lambda session_id, message_id: _newest_before(session_id, message_id)[:NEIGHBOUR_ROWS],
    session_id=int,
    message_id=int,
)


def _neighbours_before(session_id: int, message_id: int) -> tuple[_Neighbour | None, _Neighbour | None]:
    """The session's newest message before `message_id` and its newest turn start up to there (the
    same message when that is a turn start), with their stored terms: the newest few rows on the
    (session, id) index, and a lookup on the turn-start index only when no turn start is among them."""
    newest = _NEWEST_BEFORE.rows(session_id=session_id, message_id=message_id)
    if not newest:
        return None, None
    unindexed = [row[0] for row in newest if row[2] is None]
    if unindexed:
        # Archived to be indexed with the next message (conversations.services.message_append,
        # `index_later`) by a process that died first: indexed now, then read again.
        documents_write(list(Message.objects.filter(pk__in=unindexed).order_by("id")))
        newest = _NEWEST_BEFORE.rows(session_id=session_id, message_id=message_id)
    previous = _Neighbour(newest[0][0], newest[0][2] or "")
    if newest[0][1]:
        return previous, previous
    start = next((row for row in newest if row[1]), None)
    if start is None and len(newest) == NEIGHBOUR_ROWS:
        start = _newest_before(session_id, message_id).filter(is_turn_start=True).first()
    return previous, _Neighbour(start[0], start[2] or "") if start else None


def _context(message: Message, previous: _Neighbour | None, turn_start: _Neighbour | None) -> str:
    """The message's search context: the terms of the message before it, and of the prompt that
    started its turn when it is inside one (e.g. the reply after tool round-trips)."""
    if previous is None:
        return ""
    inside_turn = not message.is_turn_start and turn_start is not None and turn_start is not previous
    return search_context(previous=previous.terms, turn_start=turn_start.terms if inside_turn else None)


def _known_neighbours(after: Message | None) -> dict[int, tuple[_Neighbour | None, _Neighbour | None]]:
    """What `after`, a turn start this process has just indexed, tells without a query: the newest
    message of its session, which is also its newest turn start."""
    terms = getattr(after, "search_terms_written", None)
    if after is None or terms is None or not after.is_turn_start:
        return {}
    neighbour = _Neighbour(after.pk, terms)
    return {after.session_id: (neighbour, neighbour)}


def documents_write(messages: list[Message], *, after: Message | None = None) -> None:
    """Write the search documents of messages just archived, given in archive order: each follows every
    message of its session archived before it, so their terms become its context. `after`: the message
    the batch follows, when the archive's caller has just written it (conversations.services)."""
    neighbours = _known_neighbours(after)
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
        message.search_terms_written = terms  # what a later `after` reuses
        current = _Neighbour(message.pk, terms)
        neighbours[message.session_id] = (current, current if message.is_turn_start else turn_start)
    # A message is indexed once: one that another process indexed meanwhile (a turn's reply is indexed
    # after it is out, and the next message's indexer takes along any it finds without documents) keeps
    # its documents, and the index triggers see only the rows inserted.
    SearchDocument.objects.bulk_create(documents, ignore_conflicts=True)
