from __future__ import annotations

from datetime import UTC

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from agent.schedules import ScheduleError, parse_at, schedule_create
from conversations.errors import InvalidInput
from conversations.refs import DEFAULT_AGENT, DEFAULT_CHAT_ID, ChatRef


class Command(BaseCommand):
    help = "Schedule TEXT to run as USERNAME at a time (--at) or every N seconds (--every), or both."

    def add_arguments(self, parser):
        parser.add_argument("text")
        parser.add_argument("--user", required=True)
        parser.add_argument("--agent", default=DEFAULT_AGENT)
        parser.add_argument("--chat-id", default=DEFAULT_CHAT_ID)
        parser.add_argument("--at", help="ISO-8601 date-time (UTC when no offset is given)")
        parser.add_argument("--every", type=int, help="repeat every SECONDS (at least 60)")

    def handle(self, *args, text, user, agent, chat_id, at, every, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"No user named {user!r}.")
        if at is None and every is None:
            raise CommandError("Give --at, --every, or both.")
        try:
            chat = ChatRef.of(agent=agent, chat_id=chat_id)
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        try:
            schedule = schedule_create(
                user=owner,
                text=text,
                chat=chat,
                at=parse_at(at) if at else None,
                every_seconds=every,
            )
        except ScheduleError as exc:
            raise CommandError(str(exc)) from exc
        when = schedule.next_run_at.astimezone(UTC).isoformat()
        if at and schedule.next_run_at <= timezone.now():
            self.stderr.write(
                self.style.WARNING(f"{when} is in the past: the prompt runs at once, within seconds of the next check.")
            )
        repeat = f", then every {schedule.every_seconds} s" if schedule.every_seconds else ""
        self.stdout.write(f"Scheduled #{schedule.pk} for {when}{repeat}.")
