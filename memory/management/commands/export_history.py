from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.errors import InvalidInput
from conversations.history_io import history_export
from conversations.refs import DEFAULT_AGENT, DEFAULT_CHAT_ID, ChatRef
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
        try:
            chat = ChatRef.of(agent=agent, chat_id=chat_id)
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        session = session_get(user=owner, chat=chat)
        if session is None:
            raise CommandError(f"{user} has no chat {chat}.")
        for line in history_export(session=session):
            self.stdout.write(line)
        for line in note_lines_export(session=session):
            self.stdout.write(line)
