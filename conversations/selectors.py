"""Functions that read conversations. Every lookup is scoped to its user."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Max, QuerySet

from conversations.content import agent_or_default, chat_id_or_default
from conversations.models import Agent, Session


def session_get(*, user: AbstractBaseUser, agent_slug: str | None, chat_id: str | None) -> Session | None:
    """The user's existing session, or None: reading never creates one."""
    return (
        Session.objects.select_related("agent")
        .filter(user=user, agent__slug=agent_or_default(agent_slug), chat_id=chat_id_or_default(chat_id))
        .first()
    )


def session_list(*, user: AbstractBaseUser) -> QuerySet[Session]:
    return (
        Session.objects.filter(user=user)
        .select_related("agent")
        .annotate(message_count=Count("messages"), last_message_at=Max("messages__created_at"))
        .order_by("-last_message_at", "agent__slug", "chat_id")
    )


def agent_list() -> QuerySet[Agent]:
    return Agent.objects.order_by("slug")


def history_page(*, session: Session, limit: int, before: int | None) -> tuple[list, bool]:
    """A keyset page of the archive, oldest first, and whether anything older remains."""
    from conversations.models import Message

    rows = Message.objects.filter(session=session).order_by("-id")
    if before is not None:
        rows = rows.filter(id__lt=before)
    page = list(rows.only("id", "role", "content", "created_at")[: limit + 1])
    has_more = len(page) > limit
    return list(reversed(page[:limit])), has_more
