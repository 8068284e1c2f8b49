"""Functions that read conversations. Every lookup is scoped to its user."""

from __future__ import annotations

from collections.abc import Callable, Collection

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Max, OuterRef, QuerySet, Subquery

from conversations.content import CONFIRMATION_ANSWER_RE
from conversations.errors import NotFound
from conversations.models import Agent, Message, Session
from conversations.refs import DEFAULT_AGENT, ChatRef

ScheduledPromptIds = Callable[[Collection[int]], set[int]]


def _none_scheduled(message_ids: Collection[int]) -> set[int]:
    return set()


# Which of some turn starts a schedule sent. Schedules are the agent's (agent/models.py), above the
# archive: the agent registers how to tell at start-up (agent/apps.py); until then none was.
_scheduled_prompt_ids: ScheduledPromptIds = _none_scheduled


def scheduled_prompts_register(*, lookup: ScheduledPromptIds) -> None:
    global _scheduled_prompt_ids
    _scheduled_prompt_ids = lookup


class ChatNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("No such chat.")


def session_get(*, user: AbstractBaseUser, chat: ChatRef) -> Session | None:
    """The user's existing session, or None: reading never creates one."""
    return (
        Session.objects.select_related("agent").filter(user=user, agent__slug=chat.agent, chat_id=chat.chat_id).first()
    )


def session_require(*, user: AbstractBaseUser, chat: ChatRef) -> Session:
    """The user's existing session; ChatNotFound when it does not exist or is another user's (which of
    the two is never revealed)."""
    session = session_get(user=user, chat=chat)
    if session is None:
        raise ChatNotFound()
    return session


def session_list(*, user: AbstractBaseUser) -> QuerySet[Session]:
    return (
        Session.objects.filter(user=user)
        .select_related("agent")
        .annotate(message_count=Count("messages"), last_message_at=Max("messages__created_at"))
        .order_by("-last_message_at", "agent__slug", "chat_id")
    )


def agent_get(*, slug: str | None) -> Agent | None:
    """The agent `slug` names (the default agent when it is empty), or None."""
    return Agent.objects.filter(slug=slug or DEFAULT_AGENT).first()


def session_find(*, user_id: int, agent_id: int, chat_id: str) -> Session | None:
    """The user's existing session with that agent and chat id, or None: reading never creates one."""
    return Session.objects.filter(user_id=user_id, agent_id=agent_id, chat_id=chat_id).first()


def agent_list() -> QuerySet[Agent]:
    return Agent.objects.order_by("slug")


def turn_prompt_subquery(message_field: str) -> Subquery:
    """For an annotation: the id of the prompt that started the turn of the message the field
    `message_field` points at (a turn's first message: the person's prompt), or null."""
    return Subquery(
        Message.objects.filter(
            session_id=OuterRef(f"{message_field}__session_id"), id__lte=OuterRef(message_field), is_turn_start=True
        )
        .order_by("-id")
        .values("id")[:1]
    )


def turn_prompt_id(*, message: Message) -> int | None:
    """The id of the prompt that started `message`'s turn (itself, for a prompt), or None."""
    return (
        Message.objects.filter(session_id=message.session_id, id__lte=message.pk, is_turn_start=True)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


def history_page(*, session: Session, limit: int, before: int | None) -> tuple[list, bool]:
    """A keyset page of the archive, oldest first, and whether anything older remains."""
    rows = Message.objects.filter(session=session).order_by("-id")
    if before is not None:
        rows = rows.filter(id__lt=before)
    page = list(rows.only("id", "role", "content", "created_at", "is_turn_start")[: limit + 1])
    has_more = len(page) > limit
    page = list(reversed(page[:limit]))
    prompt_kinds_set(page)
    return page, has_more


def history_page_around(*, session: Session, limit: int, around: int) -> tuple[list, bool]:
    """A page of `limit` messages centred on message `around` (half before it, it and the rest after),
    oldest first, and whether anything older remains. NotFound when the chat has no such message."""
    rows = Message.objects.filter(session=session).only("id", "role", "content", "created_at", "is_turn_start")
    if not rows.filter(id=around).exists():
        raise NotFound("No such message in this chat.")
    older = list(rows.filter(id__lt=around).order_by("-id")[: limit // 2 + 1])
    has_more = len(older) > limit // 2
    older = older[: limit // 2]
    newer = list(rows.filter(id__gte=around).order_by("id")[: limit - len(older)])
    page = list(reversed(older)) + newer
    prompt_kinds_set(page)
    return page, has_more


def prompt_kinds_set(messages: list) -> None:
    """Set `kind` on each message: what started the turn (`typed`, `confirmation`, `scheduled`) for a
    turn start, None for any other message. One query, for the scheduled ones."""
    starts = [message.id for message in messages if message.is_turn_start]
    scheduled = _scheduled_prompt_ids(starts) if starts else set()
    for message in messages:
        if not message.is_turn_start:
            message.kind = None
        elif message.id in scheduled:
            message.kind = "scheduled"
        elif any(
            block.get("type") == "text" and CONFIRMATION_ANSWER_RE.fullmatch(block.get("text", "").strip())
            for block in message.content
        ):
            message.kind = "confirmation"
        else:
            message.kind = "typed"
