"""Functions that write conversations: sessions, the archive, agents (API tokens: conversations.tokens)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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
    readable_text,
    title_problem,
)
from conversations.errors import InvalidInput, NotFound
from conversations.models import Agent, Message, ModelCall, Session
from conversations.refs import DEFAULT_AGENT, ChatRef
from conversations.selectors import agent_get

AUTO_TITLE_CHARS = 60


@dataclass(frozen=True)
class MessageIndexing:
    """How a message's words are stored for search. Search is the memory app's (memory/apps.py
    registers its rules at start-up); the archive stores what they give on each message it writes."""

    terms: Callable[[str], str]  # a message's text → its stored terms
    context: Callable[..., str]  # (previous=terms, turn_start=terms or None) → the stored search context


_indexing = MessageIndexing(terms=lambda text: "", context=lambda **neighbours: "")


def message_indexing_register(*, terms: Callable[[str], str], context: Callable[..., str]) -> None:
    global _indexing
    _indexing = MessageIndexing(terms=terms, context=context)


class InvalidTitle(InvalidInput):
    def __init__(self, detail: str) -> None:
        super().__init__(detail, field="title")


class UnknownAgent(NotFound):
    def __init__(self, slug: str) -> None:
        super().__init__(f"No agent {slug!r}.")
        self.slug = slug


def session_get_or_create(*, user: AbstractBaseUser, agent_slug: str | None, chat_id: str | None) -> Session:
    """The user's session of the chat `ChatRef.of(agent=agent_slug, chat_id=chat_id)` names, created on
    first use. Raises InvalidChatId / InvalidAgent (conversations.refs) or UnknownAgent."""
    chat = ChatRef.of(agent=agent_slug, chat_id=chat_id)
    # The common case, a chat that exists, in one query; the session carries its agent and the caller's user.
    found = Session.objects.filter(user=user, agent__slug=chat.agent, chat_id=chat.chat_id).select_related("agent")
    session = found.first()
    if session is not None:
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
    text = readable_text(blocks)
    return Message(
        session=session,
        role=role,
        content=blocks,
        tokens=estimate_tokens(blocks),
        is_turn_start=is_turn_start(role, blocks),
        largest_block_tokens=largest_block_tokens(blocks),
        search_text=text,
        search_terms=_indexing.terms(text),
        created_at=created_at or timezone.now(),
    )


NEIGHBOUR_ROWS = 4  # a plain turn is 2 messages, one with a tool round 4: its turn start is among them


def _neighbours(session_id: int) -> tuple[Message | None, Message | None]:
    """The session's newest message and newest turn start: the newest few rows on the (session, id)
    index, and a lookup on the turn-start index only when no turn start is among them."""
    fields = ("id", "is_turn_start", "search_terms")
    messages = Message.objects.filter(session_id=session_id).order_by("-id").only(*fields)
    newest = list(messages[:NEIGHBOUR_ROWS])
    if not newest:
        return None, None
    turn_start = next((message for message in newest if message.is_turn_start), None)
    if turn_start is None and len(newest) == NEIGHBOUR_ROWS:
        turn_start = messages.filter(is_turn_start=True).first()
    return newest[0], turn_start


def _context_of(message: Message, previous: Message | None, turn_start: Message | None) -> str:
    if previous is None:
        return ""
    inside_turn = not message.is_turn_start and turn_start is not None and turn_start is not previous
    return _indexing.context(
        previous=previous.search_terms, turn_start=turn_start.search_terms if inside_turn else None
    )


def message_append(
    *,
    session: Session,
    role: str,
    content: str | list[dict[str, Any]],
    created_at: datetime | None = None,
    after: tuple[Message, Message] | None = None,
) -> Message:
    """Archive one message. Turns of a session never interleave, so the newest messages read here are
    the ones this message follows; their terms become its search context. `after`: the session's
    newest message and newest turn start, when the caller has just archived them (nothing is read)."""
    message = message_build(session=session, role=role, content=content, created_at=created_at)
    previous, turn_start = after if after is not None else _neighbours(session.pk)
    message.search_context = _context_of(message, previous, turn_start)
    message.save()
    return message


def messages_bulk_append(*, messages: Iterable[Message], batch_size: int = 1000) -> int:
    """Insert built messages in order with bulk inserts; the caller holds the transaction.
    Each message gets its search context from the messages before it, as message_append does."""
    batch: list[Message] = []
    count = 0
    neighbours: dict[int, tuple[Message | None, Message | None]] = {}
    for message in messages:
        if message.session_id not in neighbours:
            neighbours[message.session_id] = _neighbours(message.session_id)
        previous, turn_start = neighbours[message.session_id]
        message.search_context = _context_of(message, previous, turn_start)
        neighbours[message.session_id] = (message, message if message.is_turn_start else turn_start)
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
