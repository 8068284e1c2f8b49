"""Scheduled prompts (README, "Commands"): made by the command, the admin or the model's tool; run by the
task engine as their user, through the same turn code as a typed prompt.

Exactly once per due time, across processes: a worker claims a due time by moving `next_run_at`
forward with a conditional UPDATE (only one worker's UPDATE matches) and records the claimed due time
in a `ScheduledRun` row whose unique constraint refuses a second run of it. A recurring schedule whose
times were missed while the server was down runs once, then moves to its next future time.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, ClassVar

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from pydantic import AfterValidator, Field

from agent.models import ScheduledPrompt, ScheduledRun
from conversations.content import text_problem
from conversations.models import Message, Session
from conversations.refs import DEFAULT_CHAT, ChatRef
from conversations.selectors import agent_get
from lib.tool_inputs import LenientToolInput, ToolInputError, input_error, tool_definition, tool_input_parse

MIN_EVERY_SECONDS = 60
MAX_EVERY_SECONDS = 10 * 366 * 86400  # ten years: longer is a mistake, and overflows date arithmetic
MAX_AHEAD = timedelta(days=10 * 366)  # the first run at most this far ahead …
MAX_BEHIND = timedelta(days=1)  # … and at most this far in the past (a past time runs at once)


class ScheduleError(ValueError):
    pass


def parse_at(value: Any) -> datetime:
    """An ISO-8601 date-time (UTC when it has no offset), or ScheduleError for anything else —
    impossible dates (February 30, year 0) and times that exist in no calendar once in UTC included."""
    example = "an ISO-8601 date-time such as 2026-11-23T08:00:00Z"
    try:
        moment = parse_datetime(value) if isinstance(value, str) else None
        if moment is not None:
            moment = moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)
            moment = moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ScheduleError(f"`at` is not a real date-time ({str(value)[:40]!r}); give {example}.") from None
    if moment is None:
        raise ScheduleError(f"`at` must be {example}.")
    return moment


def _moment(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_at(value)
        except ScheduleError as error:
            raise input_error(str(error)) from None
    return value


class ScheduleIn(LenientToolInput):
    """The input of the model's `schedule_prompt` tool; `schedule_create` checks the rest (limits, the text)."""

    noun: ClassVar[str] = "schedule_prompt"

    text: Annotated[str, Field(description="The prompt to run.")]
    at: Annotated[
        str | None,
        Field(description="ISO-8601 date-time of the (first) run; UTC if no offset."),
        AfterValidator(_moment),
    ] = None
    every_seconds: Annotated[
        int | None, Field(ge=MIN_EVERY_SECONDS, le=MAX_EVERY_SECONDS, description="Repeat interval.")
    ] = None


SCHEDULE_TOOL: dict[str, Any] = tool_definition(
    "schedule_prompt",
    "Schedule a prompt that will be run as the user in this chat at a time, or repeatedly, even when the "
    "user is away (e.g. 'remind me every morning at 8' → at the next 08:00 UTC, every 86400 seconds). "
    "The text is what you will receive then, so write it as an instruction to yourself.",
    ScheduleIn,
)


def schedule_text_check(text: Any) -> None:
    """ScheduleError unless `text` may be a scheduled prompt: not empty, valid text, at most
    BUDDY_SCHEDULE_TEXT_CHARS characters."""
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError("The text of a scheduled prompt must not be empty.")
    if text_problem(text):
        raise ScheduleError(f"The text of a scheduled prompt {text_problem(text)}.")
    if len(text) > settings.BUDDY_SCHEDULE_TEXT_CHARS:
        limit = settings.BUDDY_SCHEDULE_TEXT_CHARS
        raise ScheduleError(f"The text of a scheduled prompt is at most {limit} characters.")


def schedule_room_check(*, user: AbstractBaseUser, exclude_pk: int | None = None) -> None:
    """ScheduleError when `user` already has BUDDY_SCHEDULES_PER_USER active schedules (`exclude_pk`:
    the schedule being edited, which does not count against itself)."""
    active = ScheduledPrompt.objects.filter(user=user, enabled=True).exclude(pk=exclude_pk).count()
    if active >= settings.BUDDY_SCHEDULES_PER_USER:
        raise ScheduleError(
            f"There are already {active} active schedules, the most one user may have; remove one in the admin first."
        )


def schedule_create(
    *,
    user: AbstractBaseUser,
    text: str,
    chat: ChatRef = DEFAULT_CHAT,
    at: datetime | None = None,
    every_seconds: int | None = None,
) -> ScheduledPrompt:
    """Validate and store a schedule in `chat`; ScheduleError says what is wrong. Preconditions: none —
    any input (from the model, the command, the admin) is checked here, the chat by ChatRef."""
    schedule_text_check(text)
    if at is None and every_seconds is None:
        raise ScheduleError("Give a time (`at`), an interval (`every_seconds`), or both.")
    if every_seconds is not None and (
        isinstance(every_seconds, bool)
        or not isinstance(every_seconds, int)
        or not MIN_EVERY_SECONDS <= every_seconds <= MAX_EVERY_SECONDS
    ):
        raise ScheduleError(
            f"every_seconds must be a whole number of at least {MIN_EVERY_SECONDS} and at most "
            f"{MAX_EVERY_SECONDS} (ten years)."
        )
    now = timezone.now()
    if at is not None and not now - MAX_BEHIND <= at <= now + MAX_AHEAD:
        raise ScheduleError("`at` must be within the next ten years (and not more than a day ago).")
    schedule_room_check(user=user)
    agent = agent_get(slug=chat.agent)
    if agent is None:
        raise ScheduleError(f"No agent {chat.agent!r}.")
    first = at or now + timedelta(seconds=every_seconds or 0)
    return ScheduledPrompt.objects.create(
        user=user, agent=agent, chat_id=chat.chat_id, text=text.strip(), next_run_at=first, every_seconds=every_seconds
    )


def schedule_from_tool(*, session: Session, tool_input: dict[str, Any]) -> str:
    """The model's `schedule_prompt` tool: at most BUDDY_SCHEDULES_PER_TURN schedules in one turn."""
    turn_start = Message.objects.filter(session=session, is_turn_start=True).order_by("-id").first()
    if turn_start is not None:
        made = ScheduledPrompt.objects.filter(
            user=session.user, agent=session.agent, chat_id=session.chat_id, created_at__gte=turn_start.created_at
        ).count()
        if made >= settings.BUDDY_SCHEDULES_PER_TURN:
            raise ScheduleError(
                f"This turn already made {made} schedules, the most one turn may make; ask the user to confirm more."
            )
    try:
        parsed = tool_input_parse(ScheduleIn, tool_input)
    except ToolInputError as error:
        raise ScheduleError(str(error)) from None
    schedule = schedule_create(
        user=session.user,
        text=parsed.text,
        chat=ChatRef(agent=session.agent.slug, chat_id=session.chat_id),
        at=parse_at(parsed.at) if parsed.at is not None else None,
        every_seconds=parsed.every_seconds,
    )
    when = f"{schedule.next_run_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    repeat = f", then every {schedule.every_seconds} seconds" if schedule.every_seconds else ""
    return f"Scheduled (#{schedule.pk}) for {when}{repeat}."


def _next_after(due: datetime, every_seconds: int, now: datetime) -> datetime:
    """The first time of the series after `now`: missed slots are skipped, not replayed."""
    step = timedelta(seconds=every_seconds)
    missed = max(0, int((now - due) / step))
    following = due + step * (missed + 1)
    return following if following > now else following + step


def schedule_claim_due(*, now: datetime | None = None) -> list[ScheduledRun]:
    """Claim every due time that has come; each is claimed by exactly one caller."""
    now = now or timezone.now()
    claimed: list[ScheduledRun] = []
    # A deactivated user's schedules wait: they run (once) if the user is active again.
    due = ScheduledPrompt.objects.filter(enabled=True, next_run_at__lte=now, user__is_active=True).values_list(
        "pk", "next_run_at", "every_seconds"
    )
    for pk, due_at, every_seconds in list(due[:500]):
        following = _next_after(due_at, every_seconds, now) if every_seconds else None
        with transaction.atomic():
            moved = ScheduledPrompt.objects.filter(pk=pk, next_run_at=due_at, enabled=True).update(
                next_run_at=following, enabled=following is not None, last_run_at=now
            )
            if not moved:  # another worker claimed this due time first
                continue
            try:
                with transaction.atomic():
                    claimed.append(ScheduledRun.objects.create(schedule_id=pk, due_at=due_at))
            except IntegrityError:
                continue
    return claimed


def scheduled_prompt_ids(message_ids: Collection[int]) -> set[int]:
    """Which of `message_ids` are prompts a schedule sent (the history shows them as `scheduled`)."""
    return set(ScheduledRun.objects.filter(prompt_id__in=message_ids).values_list("prompt_id", flat=True))
