from __future__ import annotations

from django.core.management.base import BaseCommand

from conversations.management import user_named
from conversations.tokens import api_tokens_revoke


class Command(BaseCommand):
    help = "Revoke every API token of USERNAME."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = user_named(username)
        count = api_tokens_revoke(user=user)
        self.stdout.write(f"Revoked {count} token(s) of {username}.")
