"""Functions that write conversations: sessions, the archive, agents, API tokens."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from buddy.auth import new_token, token_hash
from conversations.content import (
    agent_or_default,
    chat_id_or_default,
    estimate_tokens,
    is_turn_start,
    largest_block_tokens,
    normalize_content,
    readable_text,
)
from conversations.models import Agent, ApiToken, Message, Session
from memory.search.text import context_terms, index_terms, join_terms, split_terms


class UnknownAgent(LookupError):
    pass


def session_get_or_create(*, user: AbstractBaseUser, agent_slug: str | None, chat_id: str | None) -> Session:
    """The user's session for (agent, chat_id), created on first use. Raises UnknownAgent."""
    agent = Agent.objects.filter(slug=agent_or_default(agent_slug)).first()
    if agent is None:
        raise UnknownAgent(agent_or_default(agent_slug))
    chat_id = chat_id_or_default(chat_id)
    session = Session.objects.filter(user=user, agent=agent, chat_id=chat_id).first()
    if session is not None:
        return session
    session = Session(user=user, agent=agent, chat_id=chat_id)
    session.full_clean(validate_unique=False, validate_constraints=False)
    try:
        with transaction.atomic():
            session.save()
    except IntegrityError:  # another request created it first
        session = Session.objects.get(user=user, agent=agent, chat_id=chat_id)
    return session


def message_build(
    *, session: Session, role: str, content: str | list[dict[str, Any]], created_at: datetime | None = None
) -> Message:
    """An unsaved Message with its token estimate and turn-start flag computed (once, here)."""
    blocks = normalize_content(content)
    text = readable_text(blocks)
    return Message(
        session=session,
        role=role,
        content=blocks,
        tokens=estimate_tokens(blocks),
        is_turn_start=is_turn_start(role, blocks),
        largest_block_tokens=largest_block_tokens(blocks),
        search_text=text,
        search_terms=join_terms(index_terms(text)),
        created_at=created_at or timezone.now(),
    )


def _search_context_of(previous_terms: str) -> str:
    return join_terms(context_terms(split_terms(previous_terms)))


def _last_search_terms(session_id: int) -> str:
    """The index terms of the session's newest message: one lookup on the (session, id) index."""
    terms = (
        Message.objects.filter(session_id=session_id).order_by("-id").values_list("search_terms", flat=True).first()
    )
    return terms or ""


def message_append(
    *, session: Session, role: str, content: str | list[dict[str, Any]], created_at: datetime | None = None
) -> Message:
    """Archive one message. Turns of a session never interleave, so the newest message read here is
    the one this message follows; its terms become this message's search context."""
    message = message_build(session=session, role=role, content=content, created_at=created_at)
    message.search_context = _search_context_of(_last_search_terms(session.pk))
    message.save()
    return message


def messages_bulk_append(*, messages: Iterable[Message], batch_size: int = 1000) -> int:
    """Insert built messages in order with bulk inserts; the caller holds the transaction.
    Each message gets the terms of the one before it in its session as search context."""
    batch: list[Message] = []
    count = 0
    previous_terms: dict[int, str] = {}
    for message in messages:
        if message.session_id not in previous_terms:
            previous_terms[message.session_id] = _last_search_terms(message.session_id)
        message.search_context = _search_context_of(previous_terms[message.session_id])
        previous_terms[message.session_id] = message.search_terms
        batch.append(message)
        if len(batch) >= batch_size:
            Message.objects.bulk_create(batch)
            count += len(batch)
            batch = []
    if batch:
        Message.objects.bulk_create(batch)
        count += len(batch)
    return count


def agent_create_or_update(
    *, slug: str, name: str, avatar: str | None = None, personality: str | None = None, model: str | None = None
) -> tuple[Agent, bool]:
    agent = Agent.objects.filter(slug=slug).first()
    created = agent is None
    if agent is None:
        agent = Agent(slug=slug)
    agent.name = name
    for field, value in (("avatar", avatar), ("personality", personality), ("model", model)):
        if value is not None:
            setattr(agent, field, value)
    agent.full_clean()
    agent.save()
    return agent, created


def api_token_create(*, user: AbstractBaseUser) -> str:
    """Create a token and return it; only its hash is kept, so this is the one time it is seen."""
    token = new_token()
    ApiToken.objects.create(user=user, key_hash=token_hash(token), prefix=token[:12])
    return token


def api_tokens_revoke(*, user: AbstractBaseUser) -> int:
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return deleted
