"""Functions that write conversations: sessions, the archive, agents (API tokens: conversations.tokens)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations.content import (
    BIDI_CONTROL_RE,
    estimate_tokens,
    is_turn_start,
    largest_block_tokens,
    normalize_content,
    title_problem,
)
from conversations.errors import InvalidInput, NotFound
from conversations.models import Agent, Message, ModelCall, Session
from conversations.prepared import PreparedQuery
from conversations.refs import DEFAULT_AGENT, ChatRef
from conversations.selectors import agent_get

AUTO_TITLE_CHARS = 60


# Called with every batch of messages just archived, in order, inside the transaction that wrote
# them (or, for messages archived with `index_later`, that of the next message, or a transaction of
# their own: `messages_index`, which a turn runs once its reply is out): how other apps index
# what the archive stores without the archive knowing them (memory registers its search documents at
# start-up, memory/apps.py). `after`, when the caller knows it: the message the batch follows in its
# session, just archived by the caller (nothing need be read). An indexer meeting an archived message
# that was never indexed (its process died in between) indexes it then.
MessageIndexer = Callable[..., None]
_indexers: list[MessageIndexer] = []


def message_indexing_register(*, index: MessageIndexer) -> None:
    """Have `index` called with each batch of messages archived from now on (once per function)."""
    if index not in _indexers:
        _indexers.append(index)


def _indexed(messages: list[Message], *, after: Message | None = None) -> None:
    for index in _indexers:
        index(messages, after=after)


class InvalidTitle(InvalidInput):
    def __init__(self, detail: str) -> None:
        super().__init__(detail, field="title")


class UnknownAgent(NotFound):
    def __init__(self, slug: str) -> None:
        super().__init__(f"No agent {slug!r}.")
        self.slug = slug


# The session of a chat with its agent, by what names the chat: every prompt's first read.
_SESSION_OF_CHAT = PreparedQuery(
    lambda user_id, slug, chat_id: (
        Session.objects.filter(user_id=user_id, agent__slug=slug, chat_id=chat_id)
        .select_related("agent")
        .order_by("pk")[:1]
    ),
    user_id=int,
    slug=str,
    chat_id=str,
)


def session_get_or_create(*, user: AbstractBaseUser, agent_slug: str | None, chat_id: str | None) -> Session:
    """The user's session of the chat `ChatRef.of(agent=agent_slug, chat_id=chat_id)` names, created on
    first use. Raises InvalidChatId / InvalidAgent (conversations.refs) or UnknownAgent."""
    chat = ChatRef.of(agent=agent_slug, chat_id=chat_id)
    # The common case, a chat that exists, in one query; the session carries its agent and the caller's user.
    found = _SESSION_OF_CHAT.rows(user_id=user.pk, slug=chat.agent, chat_id=chat.chat_id)
    if found:
        session = found[0]
        session.user = user
        return session
    agent = agent_get(slug=chat.agent)
    if agent is None:
        raise UnknownAgent(chat.agent)
    chat_id = chat.chat_id
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


def session_title_from_prompt(*, session: Session, prompt: Message) -> None:
    """Name an untitled chat after its first prompt: its first line, at most AUTO_TITLE_CHARS, without
    bidirectional override or isolate characters (a title a user types with them is refused; one made
    from a prompt leaves them out, as the prompt itself is kept whole). A chat whose first messages came
    another way (an import) keeps its chat id as its name."""
    if session.title or Message.objects.filter(session=session, id__lt=prompt.id).exists():
        return
    text = "\n".join(block.get("text", "") for block in prompt.content if block.get("type") == "text")
    text = BIDI_CONTROL_RE.sub("", text)
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    title = " ".join(line.split())
    if len(title) > AUTO_TITLE_CHARS:
        title = title[: AUTO_TITLE_CHARS - 1].rstrip() + "…"
    if title and Session.objects.filter(pk=session.pk, title="").update(title=title):
        session.title = title


def session_rename(*, session: Session, title: str) -> Session:
    """Set the title the user chose (title_problem: 1–100 characters, not blank, no NUL and no bidi
    override or isolate), its runs of whitespace made one space. Raises InvalidTitle."""
    problem = title_problem(title) if isinstance(title, str) else "must be a string"
    if problem:
        raise InvalidTitle(f"A chat's title {problem}.")
    title = " ".join(title.split())
    Session.objects.filter(pk=session.pk).update(title=title)
    session.title = title
    return session


def message_build(
    *, session: Session, role: str, content: str | list[dict[str, Any]], created_at: datetime | None = None
) -> Message:
    """An unsaved Message with its token estimate and turn-start flag computed (once, here)."""
    blocks = normalize_content(content)
    return Message(
        session=session,
        role=role,
        content=blocks,
        tokens=estimate_tokens(blocks),
        is_turn_start=is_turn_start(role, blocks),
        largest_block_tokens=largest_block_tokens(blocks),
        created_at=created_at or timezone.now(),
    )


def message_append(
    *,
    session: Session,
    role: str,
    content: str | list[dict[str, Any]],
    created_at: datetime | None = None,
    after: Message | None = None,
    index_later: bool = False,
    unindexed: Message | None = None,
) -> Message:
    """Archive one message, and index it (message_indexing_register) in the same transaction. `after`:
    the session's newest message, when the caller has just archived it (the indexers read nothing).

    `index_later`: archive it alone (one INSERT, no transaction of its own); the caller then passes it
    as `unindexed` to the next message it archives in the session, which indexes both in one batch, or
    gives it to `messages_index` if none comes. A message left unindexed (its process died) is indexed
    by the indexer that next meets it among a new message's neighbours."""
    message = message_build(session=session, role=role, content=content, created_at=created_at)
    if index_later:
        message.save()
        return message
    # No savepoint inside a caller's transaction (the turn's): the message and its index rows stand or
    # fall with it.
    with transaction.atomic(savepoint=False):
        message.save()
        if unindexed is not None:
            _indexed([unindexed, message])
        else:
            _indexed([message], after=after)
    return message


def messages_index(*, messages: list[Message]) -> None:
    """Index messages archived with `index_later` that no later message took along, in archive order."""
    with transaction.atomic(savepoint=False):
        _indexed(messages)


def messages_bulk_append(*, messages: Iterable[Message], batch_size: int = 1000) -> int:
    """Insert built messages in order with bulk inserts, each batch indexed as it is written; the
    caller holds the transaction."""
    batch: list[Message] = []
    count = 0
    for message in messages:
        batch.append(message)
        if len(batch) >= batch_size:
            count += _bulk_insert(batch)
            batch = []
    if batch:
        count += _bulk_insert(batch)
    return count


def _bulk_insert(batch: list[Message]) -> int:
    Message.objects.bulk_create(batch)  # sets the ids on both databases (INSERT … RETURNING)
    _indexed(batch)
    return len(batch)


def agent_create_or_update(
    *, slug: str, name: str, avatar: str | None = None, personality: str | None = None, model: str | None = None
) -> tuple[Agent, bool]:
    agent = agent_get(slug=slug)
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


def agent_ensure_default() -> Agent:
    """The default agent, which a data migration creates; re-created here if it was deleted."""
    agent, _ = Agent.objects.get_or_create(slug=DEFAULT_AGENT, defaults={"name": "Buddy", "avatar": "🤖"})
    return agent


def model_call_record(
    *,
    session: Session,
    kind: str,
    model: str,
    reply: Any,
    started: float,
    error: str = "",
    prompt: Message | None = None,
) -> ModelCall:
    """Record one call to the model provider with its usage (a failed call: `reply` None, `error` set).
    `started` is the call's `time.monotonic()` start; usage figures the provider left out count as 0.
    The model recorded is the one that answered (the offline demo model says so), else `model`;
    `prompt` is the first message of the turn a chat call served."""
    usage = reply.usage if reply is not None else {}
    return ModelCall.objects.create(
        session=session,
        user_id=session.user_id,
        kind=kind,
        model=(reply.model if reply is not None and reply.model else model),
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_input_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_creation_input_tokens=usage.get("cache_creation_input_tokens") or 0,
        cache_creation_5m_input_tokens=usage.get("cache_creation_5m_input_tokens") or 0,
        cache_creation_1h_input_tokens=usage.get("cache_creation_1h_input_tokens") or 0,
        latency_ms=int((time.monotonic() - started) * 1000),
        stop_reason=reply.stop_reason if reply is not None else "",
        error=error,
        prompt_message_id=prompt.pk if prompt is not None else None,
    )
