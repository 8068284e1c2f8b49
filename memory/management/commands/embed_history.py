from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from conversations.models import Session
from memory import semantic


class Command(BaseCommand):
    help = (
        "Write the semantic-search vectors of archived messages that have none (an archive from before "
        "semantic search, or imported). Every session, or one with --session."
    )

    def add_arguments(self, parser):
        parser.add_argument("--session", type=int, help="a session id (default: every session)")

    def handle(self, *args, session: int | None, **options):
        if not semantic.enabled():
            raise CommandError(
                "Semantic search is off: set BUDDY_SEMANTIC_SEARCH=on and install the model (make semantic-model)."
            )
        sessions = Session.objects.order_by("pk").values_list("pk", flat=True)
        if session is not None:
            sessions = sessions.filter(pk=session)
            if not sessions.exists():
                raise CommandError(f"No session {session}.")
        total, started = 0, time.monotonic()
        for session_id in sessions.iterator():
            written = semantic.vectors_fill(session_id)
            total += written
            if written:
                self.stdout.write(f"session {session_id}: {written:,} vector(s)")
        self.stdout.write(f"Wrote {total:,} vector(s) in {time.monotonic() - started:.1f} s.")
