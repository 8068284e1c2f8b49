from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.content import DEFAULT_AGENT, DEFAULT_CHAT_ID
from conversations.history_io import history_export
from conversations.selectors import session_get
from memory.notes.history import note_lines_export


class Command(BaseCommand):
    help = "Write a user's chat, then its memory notes, as JSON Lines on stdout (the format import_history reads)."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--agent", default=DEFAULT_AGENT)
        parser.add_argument("--chat-id", default=DEFAULT_CHAT_ID)

    def handle(self, *args, user: str, agent: str, chat_id: str, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"No user named {user!r}.")
        session = session_get(user=owner, agent_slug=agent, chat_id=chat_id)
        if session is None:
            raise CommandError(f"{user} has no chat {agent}/{chat_id}.")
        for line in history_export(session=session):
            self.stdout.write(line)
        for line in note_lines_export(session=session):
            self.stdout.write(line)
