from __future__ import annotations

import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.errors import InvalidInput
from conversations.history_io import ImportLineError, ImportRefused, history_import_once, history_validate
from conversations.refs import DEFAULT_AGENT, DEFAULT_CHAT_ID, ChatRef
from conversations.services import UnknownAgent
from memory import semantic
from memory.notes.history import NoteLines


class Command(BaseCommand):
    help = (
        "Append a JSON Lines history ({role, content, created_at?} per line, then the chat's notes as "
        "export_history writes them) to a user's chat. Every line is "
        "validated first; then all are imported in one transaction, or none. The same history is never "
        "imported twice into one chat."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--user", required=True)
        parser.add_argument("--agent", default=DEFAULT_AGENT)
        parser.add_argument("--chat-id", default=DEFAULT_CHAT_ID)

    def handle(self, *args, file: Path, user: str, agent: str, chat_id: str, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"No user named {user!r}.")
        try:
            chat = ChatRef.of(agent=agent, chat_id=chat_id)
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        if not file.is_file():
            raise CommandError(f"No such file: {file}")
        tty = self.stderr.isatty() if hasattr(self.stderr, "isatty") else sys.stderr.isatty()

        def progress(stage: str):
            if not tty:
                return None
            return lambda line: self.stderr.write(f"\r{stage}: line {line:,}", ending="")

        try:
            with file.open("rb") as stream:
                validated = history_validate(stream, progress("validating"), extra=NoteLines())
            with file.open("rb") as stream:
                session, imported = history_import_once(
                    user=owner,
                    chat=chat,
                    stream=stream,
                    validated=validated,
                    progress=progress("importing"),
                    extra=NoteLines(),
                )
        except (ImportLineError, ImportRefused) as exc:
            raise CommandError(f"{file}: {exc}. Nothing was imported.") from None
        except UnknownAgent:
            raise CommandError(f"No agent {agent!r} (see create_agent). Nothing was imported.") from None
        finally:
            if tty:
                self.stderr.write("")
        self.stdout.write(f"Imported {imported:,} message(s) into {user}/{agent}/{chat_id}.")
        if semantic.enabled():
            semantic.vectors_schedule(session_id=session.pk)
            waiting, seconds = semantic.indexing_estimate(session_id=session.pk, messages=session.messages.count())
            if waiting:
                self.stdout.write(
                    f"Search finds them by their words now. The task workers are writing the semantic-search "
                    f"vectors of {waiting:,} message(s): about {_duration(seconds)} on this machine; until then "
                    "a search re-ranks its best word matches by meaning. (`embed_history` writes them here instead.)"
                )
            else:
                self.stdout.write("Search covers them in full, by words and by meaning.")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
