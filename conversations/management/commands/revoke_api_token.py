from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.tokens import api_tokens_revoke


class Command(BaseCommand):
    help = "Revoke every API token of USERNAME."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        count = api_tokens_revoke(user=user)
        self.stdout.write(f"Revoked {count} token(s) of {username}.")
